// shared/shared_lock: mutual exclusion across processes, and a holder that dies.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "shared/bag_sampler_testing.h"
#include "shared/shared_block.h"
#include "stoker/bag_sampler.h"
#include "stoker/shared_counter.h"
#include "stoker/shared_lock.h"
#include "watchdog.h"
#include "child_process.h"

namespace stoker {
namespace {

using testing::Watchdog;
using testing::Child;
using testing::ExitCode;

TEST(SharedLock, IsReentrantAndExcludesOtherProcesses) {
  Watchdog dog(std::chrono::seconds(30), "SharedLock reentrant");
  auto lock = SharedLock::Create().value();
  ASSERT_TRUE(lock->Lock(-1, nullptr).ok());
  ASSERT_TRUE(lock->Lock(-1, nullptr).ok()) << "the holder may lock again";
  pid_t c = Child([&] { return lock->TryLock(nullptr) ? 1 : 0; });
  EXPECT_EQ(ExitCode(c), 0) << "another process cannot take it";
  c = Child([&] { return lock->Lock(50'000'000, nullptr).IsTimeout() ? 0 : 1; });
  EXPECT_EQ(ExitCode(c), 0) << "a timed wait gives up";
  ASSERT_TRUE(lock->Unlock().ok());
  c = Child([&] { return lock->TryLock(nullptr) ? 1 : 0; });
  EXPECT_EQ(ExitCode(c), 0) << "still held once: locked twice, unlocked once";
  ASSERT_TRUE(lock->Unlock().ok());
  c = Child([&] { return lock->TryLock(nullptr) && lock->Unlock().ok() ? 0 : 1; });
  EXPECT_EQ(ExitCode(c), 0);
  EXPECT_FALSE(lock->Unlock().ok()) << "unlocking a lock not held is an error";
}

TEST(SharedLock, HolderKilledMidUpdateIsReportedToTheNextHolder) {
  Watchdog dog(std::chrono::seconds(30), "SharedLock robust");
  auto lock = SharedLock::Create().value();
  int held[2];
  ASSERT_EQ(pipe(held), 0);
  pid_t c = Child([&] {
    (void)lock->Lock(-1, nullptr);
    (void)write(held[1], "x", 1);
    pause();
    return 0;
  });
  char x;
  ASSERT_EQ(read(held[0], &x, 1), 1);
  kill(c, SIGKILL);
  EXPECT_EQ(ExitCode(c), 128 + SIGKILL);
  bool died = false;
  ASSERT_TRUE(lock->Lock(5'000'000'000, &died).ok()) << "no deadlock";
  EXPECT_TRUE(died);
  EXPECT_EQ(lock->owner_deaths(), 1u);
  ASSERT_TRUE(lock->Unlock().ok());
  ASSERT_TRUE(lock->Lock(-1, &died).ok());
  EXPECT_FALSE(died) << "reported once";
  ASSERT_TRUE(lock->Unlock().ok());
}

}  // namespace
}  // namespace stoker
