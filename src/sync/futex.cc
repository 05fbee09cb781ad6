#include "sync/futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace stoker {

static_assert(sizeof(std::atomic<uint32_t>) == 4, "futex words are 32 bits");

int FutexWait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns) {
  struct timespec ts;
  struct timespec* tsp = nullptr;
  if (timeout_ns >= 0) {
    ts.tv_sec = timeout_ns / 1000000000;
    ts.tv_nsec = timeout_ns % 1000000000;
    tsp = &ts;
  }
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, tsp,
                    nullptr, 0);
  return rc == 0 ? 0 : errno;
}

int FutexWake(std::atomic<uint32_t>* word, int count) {
  long rc = syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, count, nullptr,
                    nullptr, 0);
  return rc < 0 ? 0 : static_cast<int>(rc);
}

int64_t MonotonicNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace stoker
