// shared/shared_counter: one count across forked processes.
#include <gtest/gtest.h>
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

TEST(SharedCounter, AtomicAcrossProcesses) {
  Watchdog dog(std::chrono::seconds(60), "SharedCounter");
  auto c = SharedCounter::Create(5).value();
  std::vector<pid_t> kids;
  for (int i = 0; i < 4; ++i)
    kids.push_back(Child([&] {
      for (int j = 0; j < 100000; ++j) c->Add(1);
      return 0;
    }));
  for (pid_t p : kids) EXPECT_EQ(ExitCode(p), 0);
  EXPECT_EQ(c->Load(), 400005);
  int64_t expected = 1;
  EXPECT_FALSE(c->CompareExchange(&expected, 7));
  EXPECT_EQ(expected, 400005);
  EXPECT_TRUE(c->CompareExchange(&expected, 7));
  EXPECT_EQ(c->Exchange(9), 7);
  EXPECT_EQ(c->Load(), 9);
}

}  // namespace
}  // namespace stoker
