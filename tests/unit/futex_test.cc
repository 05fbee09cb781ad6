#include "sync/futex.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "sync/doorbell.h"
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

TEST(Futex, WakeAcrossProcesses) {
  Watchdog dog(std::chrono::seconds(20), "WakeAcrossProcesses");
  void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* l = new (p) DoorbellLayout{};
  auto* flag = reinterpret_cast<std::atomic<uint32_t>*>(static_cast<char*>(p) + 64);
  flag->store(0);
  pid_t child = fork();
  if (child == 0) {
    Doorbell b(l);
    bool ok = b.WaitUntil([&] { return flag->load(std::memory_order_acquire) == 1; }, 10'000'000'000);
    _exit(ok ? 0 : 1);
  }
  usleep(50 * 1000);  // let the child go to sleep on the futex
  flag->store(1, std::memory_order_release);
  Doorbell(l).Ring();
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  munmap(p, 4096);
}

// Many threads wait on one doorbell; many ring it.  Every waiter must see its
// condition eventually (no lost wake-up), under a watchdog.
TEST(Doorbell, NoLostWakeupsUnderContention) {
  Watchdog dog(std::chrono::seconds(60), "NoLostWakeupsUnderContention");
  DoorbellLayout l{};
  std::atomic<uint64_t> counter{0};
  constexpr int kWaiters = 4, kRingers = 3, kRounds = 2000;
  std::vector<std::thread> threads;
  std::atomic<int> finished{0};
  for (int w = 0; w < kWaiters; ++w) {
    threads.emplace_back([&] {
      Doorbell b(&l);
      for (uint64_t target = 1; target <= kRingers * kRounds; target += 97) {
        ASSERT_TRUE(b.WaitUntil([&] { return counter.load(std::memory_order_acquire) >= target; }, -1));
      }
      finished.fetch_add(1);
    });
  }
  for (int r = 0; r < kRingers; ++r) {
    threads.emplace_back([&] {
      Doorbell b(&l);
      for (int i = 0; i < kRounds; ++i) {
        counter.fetch_add(1, std::memory_order_release);
        b.Ring();
        if (i % 128 == 0) usleep(100);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(finished.load(), kWaiters);
}

TEST(Doorbell, WaitUntilHonoursTimeout) {
  DoorbellLayout l{};
  Doorbell b(&l);
  const int64_t t0 = MonotonicNanos();
  EXPECT_FALSE(b.WaitUntil([] { return false; }, 30 * 1000 * 1000));
  const int64_t dt = MonotonicNanos() - t0;
  EXPECT_GE(dt, 25 * 1000 * 1000);
  EXPECT_LT(dt, 5'000'000'000);
}

}  // namespace
}  // namespace stoker
