// stoker/order_recipe.h (src/order/order_recipe.cc): the global order of an
// epoch and each rank's part of it.
#include "stoker/order_recipe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

namespace stoker {
namespace {

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

TEST(OrderRecipe, GlobalIsAPermutationFixedBySeedAndEpoch) {
  OrderRecipe o;
  EXPECT_EQ(o.Global(10), Iota(10));  // not shuffled: the identity
  o.shuffle = true;
  o.seed = 7;
  const std::vector<int64_t> a = o.Global(1000);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Iota(1000));
  EXPECT_NE(a, Iota(1000));
  EXPECT_EQ(o.Global(1000), a);  // the same in every call and process
  OrderRecipe next = o;
  next.epoch = 1;
  EXPECT_NE(next.Global(1000), a);
  OrderRecipe other = o;
  other.seed = 8;
  EXPECT_NE(other.Global(1000), a);
  EXPECT_TRUE(o.Global(0).empty());
}

TEST(OrderRecipe, RanksSplitPaddedOrCutStridedOrContiguous) {
  OrderRecipe o;
  o.world_size = 3;
  const std::vector<int64_t> all = Iota(10);
  EXPECT_EQ(o.PerRank(10), 4u);  // padded: 12 places, the first two repeated
  o.rank = 0;
  EXPECT_EQ(o.RankPart(all, RankSplit::kStrided), (std::vector<int64_t>{0, 3, 6, 9}));
  o.rank = 1;
  EXPECT_EQ(o.RankPart(all, RankSplit::kStrided), (std::vector<int64_t>{1, 4, 7, 0}));
  o.rank = 2;
  EXPECT_EQ(o.RankPart(all, RankSplit::kContiguous), (std::vector<int64_t>{8, 9, 0, 1}));
  o.pad = false;  // cut: 9 places
  EXPECT_EQ(o.PerRank(10), 3u);
  EXPECT_EQ(o.RankPart(all, RankSplit::kContiguous), (std::vector<int64_t>{6, 7, 8}));
  o.rank = 0;
  EXPECT_EQ(o.RankPart(all, RankSplit::kStrided), (std::vector<int64_t>{0, 3, 6}));
  // Every sample once over the ranks when the split is even.
  o.world_size = 5;
  std::multiset<int64_t> seen;
  for (uint32_t r = 0; r < 5; ++r) {
    o.rank = r;
    for (int64_t i : o.RankPart(all, RankSplit::kStrided)) seen.insert(i);
  }
  EXPECT_EQ(std::vector<int64_t>(seen.begin(), seen.end()), all);
}

TEST(OrderRecipe, ByShardsKeepsAWindowOfShardsTogether) {
  // Four shards of 5 samples; windows of two shards.
  std::vector<std::pair<uint64_t, uint64_t>> shards{{0, 5}, {5, 5}, {10, 5}, {15, 5}};
  OrderRecipe o;
  EXPECT_EQ(o.GlobalByShards(shards, 2), Iota(20));  // not shuffled: shard order
  o.shuffle = true;
  o.seed = 3;
  const std::vector<int64_t> a = o.GlobalByShards(shards, 2);
  ASSERT_EQ(a.size(), 20u);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, Iota(20));
  // Each run of 10 holds exactly two whole shards.
  for (size_t w = 0; w < 2; ++w) {
    std::set<int64_t> shard_ids;
    for (size_t i = 10 * w; i < 10 * w + 10; ++i) shard_ids.insert(a[i] / 5);
    EXPECT_EQ(shard_ids.size(), 2u);
  }
  EXPECT_EQ(o.GlobalByShards(shards, 2), a);
  EXPECT_EQ(o.GlobalByShards(shards, 0), o.GlobalByShards(shards, 1));  // a window is at least a shard
}

}  // namespace
}  // namespace stoker

// The old names still compile (with a deprecation warning where they are used).
#include "stoker/sample_order.h"
#include "stoker/loader.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static_assert(std::is_same_v<stoker::SampleOrder, stoker::OrderRecipe>);
static_assert(sizeof(stoker::LoaderOptions{}.shuffle) == sizeof(bool));
#pragma GCC diagnostic pop
