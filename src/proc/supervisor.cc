#include "proc/supervisor.h"

#include <pthread.h>

#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

namespace stoker {

UniqueFd PidfdOpen(pid_t pid) {
  return UniqueFd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
}

Supervisor::Supervisor(OnExit on_exit) : on_exit_(std::move(on_exit)), owner_(getpid()) {
  epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
  wake_.reset(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = UINT64_MAX;
  epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "stoker-watch");  // (top -H, py-spy, /proc/<pid>/task/*/comm)
    Run();
  });
}

Supervisor::~Supervisor() {
  if (getpid() != owner_) {  // a forked copy: the thread does not exist here
    thread_.detach();
    return;
  }
  Stop();
}

void Supervisor::Stop() {
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof one);
  thread_.join();
}

Status Supervisor::Watch(uint32_t id, pid_t pid) {
  UniqueFd fd = PidfdOpen(pid);
  if (!fd.valid()) return Status::IOError("pidfd_open(" + std::to_string(pid) + ")", errno);
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.u64 = id;
  std::lock_guard<std::mutex> g(mu_);
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0)
    return Status::IOError("epoll_ctl(pidfd of " + std::to_string(pid) + ")", errno);
  auto old = watched_.find(id);
  if (old != watched_.end()) {
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, old->second.pidfd.get(), nullptr);
    watched_.erase(old);
  }
  watched_.emplace(id, Entry{pid, std::move(fd)});
  return Status::OK();
}

void Supervisor::Forget(uint32_t id) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = watched_.find(id);
  if (it == watched_.end()) return;
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.pidfd.get(), nullptr);
  watched_.erase(it);
}

void Supervisor::Run() {
  // Block every signal on this thread so Python's handlers run on the main thread.
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  struct epoll_event evs[16];
  for (;;) {
    int n = epoll_wait(epoll_.get(), evs, 16, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (evs[i].data.u64 == UINT64_MAX) return;
      const auto id = static_cast<uint32_t>(evs[i].data.u64);
      ExitInfo info;
      {
        std::lock_guard<std::mutex> g(mu_);
        auto it = watched_.find(id);
        if (it == watched_.end()) continue;
        info.pid = it->second.pid;
        siginfo_t si {};
        if (waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(it->second.pidfd.get()), &si,
                   WEXITED | WNOWAIT | WNOHANG) == 0 && si.si_pid != 0) {
          if (si.si_code == CLD_EXITED) {
            info.exit_code = si.si_status;
          } else {
            info.signal = si.si_status;
            info.core_dumped = si.si_code == CLD_DUMPED;
          }
        } else {
          // Not our child (or already reaped): the pidfd still says it exited.
          info.exit_code = -1;
        }
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.pidfd.get(), nullptr);
        watched_.erase(it);
      }
      on_exit_(id, info);
    }
  }
}

}  // namespace stoker
