// proc/parent_watch: a process exits with the given code as soon as the
// process it watches dies (not when the thread that forked it ends).
#include "proc/parent_watch.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "watchdog.h"

namespace stoker {
namespace {

// Runs in a helper process that reaps its orphans (a subreaper): forks a
// parent, whose child watches it and outlives it.  Returns the child's exit
// code, or 100+ when something else went wrong.
int OrphanExitCode() {
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) return 100;
  int fds[2];
  if (pipe(fds) != 0) return 101;
  const pid_t parent = fork();
  if (parent == 0) {
    const pid_t me = getpid();
    // Forked from a thread that ends at once: the watch must not care.
    std::thread([&] {
      const pid_t child = fork();
      if (child == 0) {
        if (!StartParentWatch(me, 42).ok()) _exit(102);
        for (;;) pause();  // until the watch ends it
      }
      (void)!write(fds[1], &child, sizeof child);
    }).join();
    usleep(50000);  // the watch is running
    _exit(0);       // the parent dies: the child must follow
  }
  pid_t child = 0;
  if (read(fds[0], &child, sizeof child) != sizeof child) return 103;
  waitpid(parent, nullptr, 0);
  int st = 0;
  if (waitpid(child, &st, 0) != child) return 104;  // (reparented to us: the subreaper)
  return WIFEXITED(st) ? WEXITSTATUS(st) : 105;
}

TEST(ParentWatch, ExitsWithTheCodeWhenTheWatchedProcessDies) {
  testing::Watchdog dog(std::chrono::seconds(30), "ParentWatch.Exits");
  const pid_t helper = fork();
  if (helper == 0) _exit(OrphanExitCode());
  int st = 0;
  ASSERT_EQ(waitpid(helper, &st, 0), helper);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 42);
}

TEST(ParentWatch, AParentAlreadyGoneIsClosed) {
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  Status st = StartParentWatch(gone, 1);
  EXPECT_EQ(st.code(), Status::Code::kClosed) << st.ToString();
}

}  // namespace
}  // namespace stoker
