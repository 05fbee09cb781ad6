// Child processes for the tests of shared state: fork a child that runs a
// function (and dies with the parent), and its exit code.
#ifndef STOKER_TESTS_CHILD_PROCESS_H_
#define STOKER_TESTS_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace stoker::testing {

// Forks a child running fn (exit code = fn's return); it dies with the parent.
template <typename F>
pid_t Child(F fn) {
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    _exit(fn());
  }
  return pid;
}

// Its exit code, or 128 + the signal that killed it.
inline int ExitCode(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_CHILD_PROCESS_H_
