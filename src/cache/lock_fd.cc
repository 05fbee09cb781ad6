#include "cache/lock_fd.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <mutex>

namespace stoker {

namespace {

// One bit per descriptor number below kMaxFd (higher numbers go unrecorded:
// their children keep the copy, as before).
constexpr int kMaxFd = 1 << 20;
constexpr int kWords = kMaxFd / 64;
std::atomic<uint64_t> g_recorded[kWords];

// In the child, right after fork(): only async-signal-safe calls.
void AfterForkInChild() {
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int w = 0; w < kWords; ++w) {
    uint64_t bits = g_recorded[w].exchange(0, std::memory_order_relaxed);
    while (bits) {
      const int fd = w * 64 + std::countr_zero(bits);
      bits &= bits - 1;
      if (null >= 0 && fd != null) dup3(null, fd, O_CLOEXEC);
    }
  }
  if (null >= 0) close(null);
}

void Record(int fd, bool on) {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, AfterForkInChild); });
  if (fd < 0 || fd >= kMaxFd) return;
  const uint64_t bit = uint64_t{1} << (fd % 64);
  if (on)
    g_recorded[fd / 64].fetch_or(bit, std::memory_order_relaxed);
  else
    g_recorded[fd / 64].fetch_and(~bit, std::memory_order_relaxed);
}

}  // namespace

void LockFd::reset(int fd) {
  if (fd_ >= 0) {
    // Unlocked first: a child forked before this descriptor was recorded (or
    // after it was forgotten) shares its open file description, and closing
    // ours alone would leave the lock to the child.
    flock(fd_, LOCK_UN);
    Record(fd_, false);
    close(fd_);
  }
  fd_ = fd;
  if (fd_ >= 0) Record(fd_, true);
}

int LockFd::RecordedForTest() {
  int n = 0;
  for (int w = 0; w < kWords; ++w) n += std::popcount(g_recorded[w].load(std::memory_order_relaxed));
  return n;
}

}  // namespace stoker
