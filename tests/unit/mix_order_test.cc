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

// A cursor given in the spec (a state's counters) is read from as if the
// order had been stepped there: the same samples, nothing replayed.
// A rank's part (StridedRankOrder) walks the Mix's order once per read: the
// same places as the whole order's, padding included.
TEST(MixOrder, ARanksPartReadsTheWholeOrdersPlaces) {
  MixSpec spec{{700, 500, 91}, {3, 1, 0.5}, 4, 1, true, 1291, false};
  auto mix = MixOrder::Make(spec).value();
  const std::vector<int64_t> whole = All(*mix);
  for (uint32_t world : {1u, 3u, 4u}) {
    const uint64_t total = (whole.size() + world - 1) / world * world;  // padded
    for (uint32_t rank = 0; rank < world; ++rank) {
      StridedRankOrder part(MixOrder::Make(spec).value(), total, rank, world);
      std::vector<int64_t> want;
      for (uint64_t p = rank; p < total; p += world) want.push_back(whole[p % whole.size()]);
      EXPECT_EQ(All(part), want) << "rank " << rank << " of " << world;
      std::vector<int64_t> some(7);  // (a read in the middle, the padding at its end)
      ASSERT_TRUE(part.Read(part.size() - 7, 7, some.data()).ok());
      EXPECT_EQ(some, std::vector<int64_t>(want.end() - 7, want.end()));
    }
  }
  int64_t x[2];
  EXPECT_FALSE(mix->ReadStrided(1289, 2, 2, x).ok());
}

TEST(MixOrder, AKnownCursorReadsAsTheWholeOrder) {
  MixSpec spec{{700, 500, 90}, {3, 1, 0.5}, 4, 1, true, 3000, false};
  std::vector<int64_t> whole = All(*MixOrder::Make(spec).value());
  spec.at = 2345;
  spec.at_counts = MixOrder::Make(spec).value()->Counters(2345);
  auto o = MixOrder::Make(spec).value();
  std::vector<int64_t> rest(3000 - 2345);
  ASSERT_TRUE(o->Read(2345, rest.size(), rest.data()).ok());
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), whole.begin() + 2345));
  spec.at_counts[0] += 1;  // a damaged state
  EXPECT_NE(MixOrder::Make(spec).status().message().find("sum to"), std::string::npos);
}

// A mix changed at position 4,000 (new weights, source 1 removed, a new
// source keyed 9 added): from the change on the new weights hold at every
// prefix, and each kept source goes on in its own order, repeating nothing of
// its source-epoch.
TEST(MixOrder, AChangedMixGoesOnFromEachSourcesPlaceWithTheNewWeights) {
  MixSpec old{{3000, 2000, 5000}, {1, 1, 2}, 7, 3, true, 0, false};
  auto a = MixOrder::Make(old).value();
  const uint64_t change = 4000;
  std::vector<int64_t> before(change);
  ASSERT_TRUE(a->Read(0, change, before.data()).ok());
  std::vector<uint64_t> c = a->Counters(change);
  MixSpec now{{3000, 5000, 800}, {1, 3, 1}, 7, 3, true, 0, false};
  now.keys = {1, 3, 9};  // sources 0 and 2 kept (keys index + 1), a new one
  now.base = {c[0], c[2], 0};
  now.start = change;
  auto b = MixOrder::Make(now).value();
  ASSERT_EQ(b->size(), 3000u + 5000 + 800 - change);
  std::vector<int64_t> after = All(*b);
  std::vector<std::set<uint64_t>> seen(2);  // kept sources' samples this source-epoch
  for (int64_t g : before) {
    auto [i, j] = a->Locate(static_cast<uint64_t>(g));
    if (i != 1) seen[i == 0 ? 0 : 1].insert(j);
  }
  std::vector<double> counts(3, 0);
  double worst = 0;
  for (size_t p = 0; p < after.size(); ++p) {
    auto [i, j] = b->Locate(static_cast<uint64_t>(after[p]));
    ++counts[i];
    for (size_t s = 0; s < 3; ++s)
      worst = std::max(worst, std::fabs(counts[s] - now.weights[s] / 5.0 * static_cast<double>(p + 1)));
    if (i < 2 && seen[i].size() < now.sizes[i]) {
      EXPECT_TRUE(seen[i].insert(j).second) << "source " << i << " repeats sample " << j << " at " << p;
    }
  }
  EXPECT_LE(worst, 1.0);
  EXPECT_EQ(seen[0].size(), c[0] + static_cast<uint64_t>(counts[0]));  // each of source 0's once
  // The shuffle of a kept source is its own: source 2 (now 1) reads as before.
  std::vector<uint64_t> next_old, next_new;
  for (int64_t g : All(*a)) {
    auto [i, j] = a->Locate(static_cast<uint64_t>(g));
    if (i == 2) next_old.push_back(j);
  }
  for (int64_t g : after) {
    auto [i, j] = b->Locate(static_cast<uint64_t>(g));
    if (i == 1) next_new.push_back(j);
  }
  const size_t both = std::min(next_old.size() - c[2], next_new.size());
  EXPECT_TRUE(std::equal(next_new.begin(), next_new.begin() + both, next_old.begin() + c[2]));
  // Stop after a change: none of the rest runs out.
  now.stop = true;
  auto s = MixOrder::Make(now).value();
  std::vector<uint64_t> took(3, 0);
  for (int64_t g : All(*s)) ++took[s->Locate(static_cast<uint64_t>(g)).first];
  for (size_t i = 0; i < 3; ++i) EXPECT_LE(now.base[i] + took[i], now.sizes[i]) << i;
}

TEST(WindowOrder, APermutationThatKeepsOneWindowOfShardsOpen) {
  // 23 shards of 1-9 samples, windows of 4 shards.
  std::vector<uint64_t> sizes;
  for (int s = 0; s < 23; ++s) sizes.push_back(1 + (s * 7) % 9);
  std::vector<uint64_t> first(sizes.size() + 1, 0);
  for (size_t s = 0; s < sizes.size(); ++s) first[s + 1] = first[s] + sizes[s];
  auto shard_of = [&](int64_t i) {
    return static_cast<size_t>(std::upper_bound(first.begin(), first.end(), static_cast<uint64_t>(i)) - first.begin()) - 1;
  };
  WindowOrder o(sizes, 4, 77);
  ASSERT_EQ(o.size(), first.back());
  std::vector<int64_t> v = All(o);
  std::vector<int64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (size_t p = 0; p < sorted.size(); ++p) ASSERT_EQ(sorted[p], static_cast<int64_t>(p)) << "not a permutation";
  // Each shard's samples come within one run of 4 shards' samples: at most
  // 4 shards are begun and not finished at any position.
  std::vector<uint64_t> left(sizes);
  std::set<size_t> open;
  size_t most = 0;
  for (int64_t i : v) {
    const size_t s = shard_of(i);
    open.insert(s);
    most = std::max(most, open.size());
    if (--left[s] == 0) open.erase(s);
  }
  EXPECT_LE(most, 4u);
  // Shuffled: the shards' order is not the files', nor the rows' in a shard.
  EXPECT_NE(v, sorted);
  WindowOrder other(sizes, 4, 78), again(sizes, 4, 77);
  EXPECT_NE(v, All(other));
  EXPECT_EQ(All(again), v) << "the same key gives the same order";
  // A window of every shard is a shuffle of everything; a shard of none is skipped.
  std::vector<uint64_t> with_empty = {3, 0, 4};
  WindowOrder skipping(with_empty, 1, 5);
  std::vector<int64_t> e = All(skipping);
  std::sort(e.begin(), e.end());
  EXPECT_EQ(e, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(MixOrder, ASourceInShardsIsShuffledByWindowsOfItsShards) {
  // Source 0: 12 shards of 10 samples, windows of 3; source 1: 50 samples, no shards.
  MixSpec spec{{120, 50}, {1, 1}, 4, 2, true, 0, false};
  spec.shards = {MixSpec::Shards{3, std::vector<uint64_t>(12, 10)}, MixSpec::Shards{}};
  auto o = MixOrder::Make(spec).value();
  std::vector<int64_t> v = All(*o);
  std::vector<uint64_t> left(12, 10);
  std::set<uint64_t> open, seen;
  size_t most = 0;
  for (int64_t g : v) {
    auto [i, j] = o->Locate(static_cast<uint64_t>(g));
    if (i != 0) continue;
    ASSERT_TRUE(seen.insert(j).second) << "source 0 repeats " << j << " within its source-epoch";
    open.insert(j / 10);
    most = std::max(most, open.size());
    if (--left[j / 10] == 0) open.erase(j / 10);
  }
  EXPECT_EQ(seen.size(), 85u);  // (the epoch's 170 positions, half each)
  EXPECT_LE(most, 3u) << "source 0 kept more than a window of its shards open";
  // The same mix without shards opens nearly all of them.
  MixSpec plain = spec;
  plain.shards.clear();
  std::vector<int64_t> u = All(*MixOrder::Make(plain).value());
  std::set<uint64_t> touched;
  for (size_t p = 0; p < 30; ++p)
    if (o->Locate(u[p]).first == 0) touched.insert(o->Locate(u[p]).second / 10);
  EXPECT_GT(touched.size(), 3u);
  // Source 1's order and the schedule are the plain mix's.
  for (size_t p = 0; p < v.size(); ++p) {
    ASSERT_EQ(o->Locate(v[p]).first, o->Locate(u[p]).first);
    if (o->Locate(v[p]).first == 1) ASSERT_EQ(v[p], u[p]);
  }
  // Cycling starts a new shuffle of the shards; a known cursor agrees.
  spec.samples = 400;
  auto c = MixOrder::Make(spec).value();
  std::vector<int64_t> all = All(*c);
  std::vector<int64_t> tail(100);
  ASSERT_TRUE(c->Read(300, 100, tail.data()).ok());
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), all.begin() + 300));
  std::vector<int64_t> first_pass, second_pass;
  for (int64_t g : all)
    if (c->Locate(g).first == 0) (first_pass.size() < 120 ? first_pass : second_pass).push_back(g);
  ASSERT_EQ(first_pass.size(), 120u);
  EXPECT_NE(std::vector<int64_t>(first_pass.begin(), first_pass.begin() + second_pass.size()), second_pass);
}

TEST(MixOrder, BadSpecsAreNamed) {
  EXPECT_NE(MixOrder::Make(MixSpec{}).status().message().find("no sources"), std::string::npos);
  EXPECT_NE(MixOrder::Make(MixSpec{{3, 4}, {1}, 0, 0, false, 0, false}).status().message().find("1 weights for 2"),
            std::string::npos);
  EXPECT_NE(MixOrder::Make(MixSpec{{3, 0}, {1, 1}, 0, 0, false, 0, false}).status().message().find(
                "source 1 has no samples"), std::string::npos);
  EXPECT_NE(MixOrder::Make(MixSpec{{3, 4}, {1, 0}, 0, 0, false, 0, false}).status().message().find(
                "source 1's weight"), std::string::npos);
  MixSpec sharded{{3, 4}, {1, 1}, 0, 0, true, 0, false};
  sharded.shards = {MixSpec::Shards{2, {1, 1}}, MixSpec::Shards{}};
  EXPECT_NE(MixOrder::Make(sharded).status().message().find("source 0 has 3 samples and shards of 2"),
            std::string::npos);
  sharded.shards.pop_back();
  EXPECT_NE(MixOrder::Make(sharded).status().message().find("shards of 1 sources for 2"), std::string::npos);
}

}  // namespace
}  // namespace stoker
