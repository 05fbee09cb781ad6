#include "proc/parent_watch.h"

#include <pthread.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "proc/supervisor.h"

namespace stoker {

Status StartParentWatch(pid_t expected_parent, int exit_code) {
  // The watched process is the loader's main process: the parent under fork
  // and spawn, the forkserver's client under forkserver.
  UniqueFd fd = PidfdOpen(expected_parent);
  const int err = errno;
  if (!fd.valid()) {
    if (err == ESRCH) return Status::Closed("the main process " + std::to_string(expected_parent) + " is gone");
    return Status::IOError("pidfd_open(main process " + std::to_string(expected_parent) + ")", err);
  }
  std::thread([pidfd = fd.release(), exit_code] {
    pthread_setname_np(pthread_self(), "stoker-parent");
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    struct pollfd p {pidfd, POLLIN, 0};
    while (poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    _exit(exit_code);
  }).detach();
  return Status::OK();
}

}  // namespace stoker
