// sync/futex: wait, timeout, wake across processes.
#include "sync/futex.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "watchdog.h"

namespace stoker {
namespace {

using testing::Watchdog;

TEST(Futex, WaitReturnsAtOnceWhenValueDiffers) {
  std::atomic<uint32_t> w{5};
  EXPECT_EQ(FutexWait(&w, 4, -1), EAGAIN);
}

TEST(Futex, WaitTimesOut) {
  std::atomic<uint32_t> w{0};
  const int64_t t0 = MonotonicNanos();
  EXPECT_EQ(FutexWait(&w, 0, 20 * 1000 * 1000), ETIMEDOUT);
  EXPECT_GE(MonotonicNanos() - t0, 15 * 1000 * 1000);
}

TEST(Futex, WakeEndsAWait) {
  Watchdog dog(std::chrono::seconds(20), "WakeEndsAWait");
  std::atomic<uint32_t> w{0};
  std::thread waiter([&] {
    while (w.load() == 0) FutexWait(&w, 0, -1);  // (a spurious return loops)
  });
  usleep(20 * 1000);
  w.store(1);
  FutexWake(&w, 1);
  waiter.join();
}

}  // namespace
}  // namespace stoker
