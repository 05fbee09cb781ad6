// LockFd: a file descriptor that holds (or may take) a cache file lock
// (flock), kept out of forked children.
//
// A flock belongs to the open file description, and fork() gives the child a
// copy of every descriptor: the lock then lasts while the child keeps its
// copy, whatever the parent does.  A child forked while a fetcher held the
// cache's directory lock (a torch DataLoader starting workers, multiprocessing
// with fork) held it for its whole life, and the parent's next look at the
// cache waited for it forever; children also kept the parent's shards pinned.
// Every open LockFd is recorded (a bit per descriptor number, lock-free), and
// in a forked child each one is pointed at /dev/null (dup2: the child's copy
// of the lock is gone, and the number stays open for whatever closes it later;
// nothing the child does can release the parent's locks).  And the parent
// unlocks (LOCK_UN) before it closes: a copy a child took in the moment
// between open() and being recorded loses the lock with the parent's.
//
// Move-only, like UniqueFd; not thread-safe per object.
#ifndef STOKER_CACHE_LOCK_FD_H_
#define STOKER_CACHE_LOCK_FD_H_

#include <utility>

namespace stoker {

class LockFd {
 public:
  LockFd() = default;
  explicit LockFd(int fd) { reset(fd); }
  LockFd(LockFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  LockFd& operator=(LockFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  LockFd(const LockFd&) = delete;
  LockFd& operator=(const LockFd&) = delete;
  ~LockFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Unlocks and closes the one it has (forgotten before it is closed, so a
  // reused number is never pointed at /dev/null in a child) and takes `fd`.
  void reset(int fd = -1);

  // How many descriptors are recorded (tests).
  static int RecordedForTest();

 private:
  int fd_ = -1;
};

}  // namespace stoker

#endif  // STOKER_CACHE_LOCK_FD_H_
