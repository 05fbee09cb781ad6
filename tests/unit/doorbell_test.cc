// sync/doorbell: a ring is never lost, a timeout ends the wait, and a
// waiter in another process is woken.
#include "sync/doorbell.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "watchdog.h"

namespace stoker {
namespace {

// Many threads wait on one doorbell; many ring it.  Every waiter must see its
// condition eventually (no lost wake-up), under a watchdog.
TEST(Doorbell, NoLostWakeupsUnderContention) {
  testing::Watchdog dog(std::chrono::seconds(60), "NoLostWakeupsUnderContention");
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

TEST(Doorbell, WakesAWaiterWhoseConditionBecameTrue) {
  testing::Watchdog dog(std::chrono::seconds(30), "Doorbell.WakesAWaiter");
  DoorbellLayout layout{};
  std::atomic<int> value{0};
  for (int round = 1; round <= 200; ++round) {  // many rounds: a lost wake-up would hang one
    std::thread ringer([&] {
      value.store(round, std::memory_order_release);
      Doorbell(&layout).Ring();
    });
    EXPECT_TRUE(Doorbell(&layout).WaitUntil([&] { return value.load(std::memory_order_acquire) == round; }, -1));
    ringer.join();
  }
}

TEST(Doorbell, WakesAWaiterInAnotherProcess) {
  testing::Watchdog dog(std::chrono::seconds(20), "WakeAcrossProcesses");
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
}  // namespace
}  // namespace stoker
