// shared/bag_sampler: draws without replacement across forked processes, holders SIGKILLed mid-update.
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

// 4 processes draw k=4 from 10 bags of 64 at once; within each cycle of a
// bag no instance is drawn twice, and every complete cycle covers 64.
TEST(BagSampler, NoInstanceTwiceInACycleAcrossProcesses) {
  Watchdog dog(std::chrono::seconds(60), "BagSampler across processes");
  const uint32_t kBags = 10, kK = 4, kDraws = 2000;
  auto s = BagSampler::Create(std::vector<uint32_t>(kBags, 64), kK, {}, OnExhausted::kReset, 1).value();
  // Each child records (bag, cycle, pick) triples in its part of a block.
  const uint64_t per_child = uint64_t{kDraws} * kK * 3;
  auto rec = SharedBlock::Create(4 * per_child * sizeof(int64_t), "test-records").value();
  auto* r = reinterpret_cast<int64_t*>(rec->data());
  std::vector<pid_t> kids;
  for (int c = 0; c < 4; ++c)
    kids.push_back(Child([&, c] {
      std::vector<int64_t> out;
      int64_t* mine = r + c * per_child;
      for (uint32_t d = 0; d < kDraws; ++d) {
        const uint32_t bag = (d * 7 + c) % kBags;
        uint64_t cycle = 0;
        if (!s->Draw(bag, &out, &cycle).ok() || out.size() != kK) return 1;
        for (int64_t p : out) {
          *mine++ = bag;
          *mine++ = static_cast<int64_t>(cycle);
          *mine++ = p;
        }
      }
      return 0;
    }));
  for (pid_t p : kids) ASSERT_EQ(ExitCode(p), 0);
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  std::vector<std::vector<int>> per_cycle(kBags);
  for (uint64_t i = 0; i < 4 * per_child; i += 3) {
    auto t = std::make_tuple(r[i], r[i + 1], r[i + 2]);
    EXPECT_TRUE(seen.insert(t).second) << "bag " << r[i] << " cycle " << r[i + 1] << " instance " << r[i + 2]
                                       << " drawn twice";
    EXPECT_TRUE(r[i + 2] >= 0 && r[i + 2] < 64);
  }
  EXPECT_EQ(s->draws(), 4u * kDraws);
  EXPECT_EQ(s->recoveries(), 0u);
  // 8000 draws over 10 bags: 800 draws of 4 per bag = 50 full cycles each.
  for (uint32_t b = 0; b < kBags; ++b) {
    for (int64_t cyc = 1; cyc <= 49; ++cyc) {
      int n = 0;
      for (int64_t p = 0; p < 64; ++p) n += seen.count({b, cyc, p});
      ASSERT_EQ(n, 64) << "bag " << b << " cycle " << cyc << " is complete";
    }
  }
}

int g_signal_fd = -1;

void SignalAndHang() {
  (void)write(g_signal_fd, "x", 1);
  pause();
}

TEST(BagSampler, DrawerKilledMidDrawIsRolledBack) {
  Watchdog dog(std::chrono::seconds(30), "BagSampler mid-draw kill");
  auto s = BagSampler::Create({16, 16}, 4, {}, OnExhausted::kReset, 2).value();
  int mid[2];
  ASSERT_EQ(pipe(mid), 0);
  g_signal_fd = mid[1];
  pid_t c = Child([&] {
    testing::g_bag_sampler_mid_draw = &SignalAndHang;
    std::vector<int64_t> out;
    (void)s->Draw(1, &out, nullptr);
    return 3;
  });
  char x;
  ASSERT_EQ(read(mid[0], &x, 1), 1);  // the child is inside Draw, bag 1 locked, journal written
  kill(c, SIGKILL);
  EXPECT_EQ(ExitCode(c), 128 + SIGKILL);
  auto left = s->Remaining(1);
  ASSERT_TRUE(left.ok()) << "no deadlock";
  EXPECT_EQ(left.value(), 16u) << "the dead draw's instances are available again";
  EXPECT_EQ(s->recoveries(), 1u);
  std::vector<int64_t> out;
  std::set<int64_t> all;
  for (int d = 0; d < 4; ++d) {
    ASSERT_TRUE(s->Draw(1, &out, nullptr).ok());
    all.insert(out.begin(), out.end());
  }
  EXPECT_EQ(all.size(), 16u) << "one full cycle after the recovery";
}

TEST(BagSampler, WeightsModesAndErrors) {
  // Zero weights never draw; the bag's cycle is its positive-weight instances.
  auto s = BagSampler::Create({6}, 2, {0, 1, 0, 1, 0, 1}, OnExhausted::kError, 3).value();
  std::vector<int64_t> out;
  std::set<int64_t> got;
  for (int d = 0; d < 1; ++d) {
    ASSERT_TRUE(s->Draw(0, &out, nullptr).ok());
    got.insert(out.begin(), out.end());
  }
  for (int64_t p : got) EXPECT_EQ(p % 2, 1);
  Status st = s->Draw(0, &out, nullptr);
  EXPECT_TRUE(st.IsResourceExhausted()) << st.ToString();
  EXPECT_NE(st.message().find("bag 0 has 1 instances left"), std::string::npos) << st.message();
  ASSERT_TRUE(s->Reset(0).ok());
  EXPECT_EQ(s->Remaining(0).value(), 3u);
  const double w[6] = {1, 1, 1, 1, 1, 1};
  ASSERT_TRUE(s->SetWeights(0, w, 6).ok());
  EXPECT_EQ(s->Remaining(0).value(), 6u);
  EXPECT_FALSE(s->SetWeights(0, w, 5).ok());
  const double bad[6] = {1, -1, 1, 1, 1, 1};
  EXPECT_FALSE(s->SetWeights(0, bad, 6).ok());
  EXPECT_FALSE(s->Draw(9, &out, nullptr).ok());

  auto f = BagSampler::Create({5}, 2, {}, OnExhausted::kFewer, 4).value();
  std::vector<size_t> sizes;
  for (int d = 0; d < 4; ++d) {
    ASSERT_TRUE(f->Draw(0, &out, nullptr).ok());
    sizes.push_back(out.size());
  }
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1, 2})) << "fewer at the end of a cycle, then a new one";

  EXPECT_FALSE(BagSampler::Create({3}, 4, {}, OnExhausted::kReset, 0).ok()) << "a bag smaller than k";
  EXPECT_FALSE(BagSampler::Create({3}, 1, {1, 2}, OnExhausted::kReset, 0).ok()) << "weights count";
}

}  // namespace
}  // namespace stoker
