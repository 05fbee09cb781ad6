// order/mix_order: a mixed epoch's sources by the largest deficit, within one
// sample of the weights at every prefix, each source's samples in its order.
#include "order/mix_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "read_all.h"

namespace stoker {
namespace {

using testing::All;

TEST(MixOrder, OneThousandZipfSourcesStayWithinOneSampleOfTheirWeightsAtEveryPrefix) {
  const size_t k = 1000;
  MixSpec spec;
  std::mt19937_64 rng(5);
  for (size_t i = 0; i < k; ++i) {
    spec.sizes.push_back(1 + static_cast<uint64_t>(20000.0 / std::pow(i + 1, 1.1)) + rng() % 7);
    spec.weights.push_back(1.0 / std::pow(i + 1, 1.1));
  }
  spec.samples = 200000;
  spec.shuffle = true;
  auto o = MixOrder::Make(spec).value();
  double total = 0;
  for (double w : spec.weights) total += w;
  std::vector<uint64_t> counts(k, 0);
  std::vector<int64_t> v = All(*o);
  double worst = 0;
  for (size_t p = 0; p < v.size(); ++p) {
    ++counts[o->Locate(static_cast<uint64_t>(v[p])).first];
    if ((p + 1) % 200 == 0 || p < 2000) {  // every prefix early, then 1,000 points
      for (size_t i = 0; i < k; ++i)
        worst = std::max(worst, std::fabs(static_cast<double>(counts[i]) - spec.weights[i] / total * (p + 1)));
    }
  }
  EXPECT_LE(worst, 1.0);
}

// The tournament chooses what the plain rule does: argmax over every source
// of w_i * n - c_i, ties to the lowest i (equal weights make many ties).
TEST(MixOrder, TheTournamentChoosesAsTheRuleOverEverySource) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t k = 1 + rng() % 70;
    MixSpec spec;
    for (size_t i = 0; i < k; ++i) {
      spec.sizes.push_back(1 + rng() % 50);
      spec.weights.push_back(trial % 3 == 0 ? 1.0 : trial % 3 == 1 ? 1.0 + rng() % 4 : 0.01 + (rng() % 1000) / 7.0);
    }
    spec.samples = 3000;
    auto o = MixOrder::Make(spec).value();
    std::vector<int64_t> v = All(*o);
    double total = 0;
    for (double w : spec.weights) total += w;
    std::vector<double> w(k);
    for (size_t i = 0; i < k; ++i) w[i] = spec.weights[i] / total;
    std::vector<uint64_t> c(k, 0);
    for (size_t p = 0; p < v.size(); ++p) {
      const double n = static_cast<double>(p + 1);
      size_t best = 0;
      for (size_t i = 1; i < k; ++i)
        if (w[i] * n - static_cast<double>(c[i]) > w[best] * n - static_cast<double>(c[best])) best = i;
      ++c[best];
      ASSERT_EQ(o->Locate(static_cast<uint64_t>(v[p])).first, best) << "trial " << trial << " position " << p;
    }
  }
}

TEST(MixOrder, EachSourceIsReadOncePerSourceEpochAndCyclesOrStops) {
  MixSpec spec{{5, 3, 7}, {2, 1, 1}, 9, 0, true, 0, false};
  auto o = MixOrder::Make(spec).value();
  ASSERT_EQ(o->size(), 15u);  // the sum of the sizes
  std::vector<int64_t> v = All(*o);
  // Cycle: source 0 (weight 1/2) takes 7 or 8 of 15; its first 5 are one source-epoch, each once.
  std::vector<std::vector<uint64_t>> per(3);
  for (int64_t g : v) {
    auto [i, j] = o->Locate(static_cast<uint64_t>(g));
    ASSERT_LT(j, spec.sizes[i]);
    per[i].push_back(j);
  }
  for (size_t i = 0; i < 3; ++i) {
    const size_t first = std::min<size_t>(per[i].size(), spec.sizes[i]);
    std::set<uint64_t> once(per[i].begin(), per[i].begin() + first);
    EXPECT_EQ(once.size(), first) << "source " << i << " repeats within a source-epoch";
  }
  EXPECT_GT(per[1].size(), spec.sizes[1]) << "source 1 ran out and cycled";
  // Another epoch: other shuffles, the same schedule of sources.
  MixSpec next = spec;
  next.epoch = 1;
  std::vector<int64_t> w = All(*MixOrder::Make(next).value());
  EXPECT_NE(v, w);
  for (size_t p = 0; p < v.size(); ++p)
    EXPECT_EQ(o->Locate(v[p]).first, o->Locate(w[p]).first);
  // Stop: the epoch ends before any source would run out: no repeats at all.
  spec.stop = true;
  auto s = MixOrder::Make(spec).value();
  std::vector<int64_t> u = All(*s);
  EXPECT_EQ(std::set<int64_t>(u.begin(), u.end()).size(), u.size());
  // Sources 0 (5 samples, weight 1/2) and 1 (3, weight 1/4) both run out near
  // position 10: the epoch is the 9 positions where none can have.
  EXPECT_EQ(u.size(), 9u);
}

TEST(MixOrder, ReadsAnywhereAgreeAndTheCountersFollow) {
  MixSpec spec{{70000, 50000}, {3, 1}, 1, 2, true, 150000, false};
  auto a = MixOrder::Make(spec).value();
  std::vector<int64_t> whole = All(*a);
  auto b = MixOrder::Make(spec).value();
  for (uint64_t pos : {140000ull, 3ull, 70001ull, 149999ull, 0ull}) {  // forward, back, anywhere
    int64_t x = 0;
    ASSERT_TRUE(b->Read(pos, 1, &x).ok());
    EXPECT_EQ(x, whole[pos]) << pos;
  }
  std::vector<uint64_t> c = b->Counters(100000);
  EXPECT_EQ(c[0] + c[1], 100000u);
  EXPECT_LE(std::fabs(static_cast<double>(c[0]) - 75000.0), 1.0);
  int64_t x;
  EXPECT_FALSE(b->Read(150000, 1, &x).ok());
}

TEST(MixOrder, BadSpecsAreNamed) {
  EXPECT_NE(MixOrder::Make(MixSpec{}).status().message().find("no sources"), std::string::npos);
  EXPECT_NE(MixOrder::Make(MixSpec{{3, 4}, {1}, 0, 0, false, 0, false}).status().message().find("1 weights for 2"),
            std::string::npos);
  EXPECT_NE(MixOrder::Make(MixSpec{{3, 0}, {1, 1}, 0, 0, false, 0, false}).status().message().find(
                "source 1 has no samples"), std::string::npos);
  EXPECT_NE(MixOrder::Make(MixSpec{{3, 4}, {1, 0}, 0, 0, false, 0, false}).status().message().find(
                "source 1's weight"), std::string::npos);
}

}  // namespace
}  // namespace stoker
