// order/index_order: a vector's order, and a rank's part padded or cut as
// torch's DistributedSampler makes it.
#include "order/index_order.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "read_all.h"

namespace stoker {
namespace {

using testing::All;

TEST(IndexOrder, RanksTakeEveryWorldthPlacePaddedOrCut) {
  auto base = std::make_shared<VectorOrder>(std::vector<int64_t>{10, 11, 12, 13, 14});
  StridedRankOrder r1(base, 6, 1, 3);  // padded to 6: 10 11 12 13 14 10
  EXPECT_EQ(All(r1), (std::vector<int64_t>{11, 14}));
  StridedRankOrder r2(base, 6, 2, 3);
  EXPECT_EQ(All(r2), (std::vector<int64_t>{12, 10}));
  StridedRankOrder big(base, 12, 0, 2);  // more than twice: repeats cyclically
  EXPECT_EQ(All(big), (std::vector<int64_t>{10, 12, 14, 11, 13, 10}));
  StridedRankOrder cut(base, 4, 1, 2);  // drop_last: 4 places
  EXPECT_EQ(All(cut), (std::vector<int64_t>{11, 13}));
  int64_t x;
  EXPECT_FALSE(cut.Read(2, 1, &x).ok());
  EXPECT_FALSE(base->Read(4, 2, &x).ok());
}

TEST(IndexOrder, IotaIsTheIdentityWithNoStorage) {
  IotaOrder o(5);
  EXPECT_EQ(All(o), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  int64_t x[2];
  ASSERT_TRUE(IotaOrder(uint64_t{1} << 40).Read((uint64_t{1} << 40) - 2, 2, x).ok());
  EXPECT_EQ(x[1], (int64_t{1} << 40) - 1);
  EXPECT_FALSE(o.Read(4, 2, x).ok());
}

TEST(IndexOrder, TheRemainderIsTheOrderLessItsConsumedPlaces) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const uint64_t n = rng() % 60;
    std::vector<int64_t> v(n);
    std::iota(v.begin(), v.end(), int64_t{100});
    std::shuffle(v.begin(), v.end(), rng);
    std::vector<PlaceRange> consumed;
    std::vector<bool> gone(n, false);
    for (int k = rng() % 5; k > 0; --k) {  // any order, overlapping, past the end
      const uint64_t b = rng() % (n + 5), e = b + rng() % 12;
      consumed.push_back({b, e});
      for (uint64_t p = b; p < e && p < n; ++p) gone[p] = true;
    }
    std::vector<int64_t> want;
    for (uint64_t p = 0; p < n; ++p)
      if (!gone[p]) want.push_back(v[p]);
    RemainderOrder rest(std::make_shared<VectorOrder>(v), consumed);
    ASSERT_EQ(rest.size(), want.size());
    EXPECT_EQ(All(rest), want);
    for (uint64_t p = 0; p < want.size(); ++p) {  // and a position alone, anywhere
      int64_t x = 0;
      ASSERT_TRUE(rest.Read(p, 1, &x).ok());
      EXPECT_EQ(x, want[p]);
    }
    for (size_t i = 1; i < rest.consumed().size(); ++i)
      EXPECT_LT(rest.consumed()[i - 1].end, rest.consumed()[i].begin) << "merged and sorted";
  }
  int64_t x;
  RemainderOrder none(std::make_shared<VectorOrder>(std::vector<int64_t>{1, 2}), {{0, 9}});
  EXPECT_EQ(none.size(), 0u);
  EXPECT_FALSE(none.Read(0, 1, &x).ok());
}

TEST(IndexOrder, ContiguousRanksTakeEqualRunsPadded) {
  auto base = std::make_shared<VectorOrder>(std::vector<int64_t>{10, 11, 12, 13, 14});
  EXPECT_EQ(All(*std::make_shared<ContiguousRankOrder>(base, 6, 0, 3)), (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(All(*std::make_shared<ContiguousRankOrder>(base, 6, 2, 3)), (std::vector<int64_t>{14, 10}));
  EXPECT_EQ(All(*std::make_shared<ContiguousRankOrder>(base, 4, 1, 2)), (std::vector<int64_t>{12, 13}));  // cut
  int64_t x;
  EXPECT_FALSE(ContiguousRankOrder(base, 4, 1, 2).Read(2, 1, &x).ok());
}

TEST(IndexOrder, ConsumedPlacesOfEachSplit) {
  // Strided: position j of every rank is places [j*W, (j+1)*W).
  EXPECT_EQ(ConsumedPlaces({{0, 3}, {5, 6}}, 4, true, 0), (std::vector<PlaceRange>{{0, 12}, {20, 24}}));
  // Contiguous over 12 places and 3 ranks: runs of 4.
  EXPECT_EQ(ConsumedPlaces({{0, 2}}, 3, false, 12), (std::vector<PlaceRange>{{0, 2}, {4, 6}, {8, 10}}));
}

// Ranks stop mid-epoch and the rest of the epoch is read by another number
// of ranks, again and again (4 -> 3 -> 6 -> 1): every sample once, the only
// repeats the padding of the last segment's split.
TEST(IndexOrder, AnEpochResumedOnOtherWorldSizesReadsEverySampleOnce) {
  const uint64_t n = 1009;  // prime
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), int64_t{0});
  std::shuffle(v.begin(), v.end(), std::mt19937_64(3));
  std::shared_ptr<IndexOrder> global = std::make_shared<VectorOrder>(v);
  std::map<int64_t, int> seen;
  const std::vector<uint32_t> worlds = {4, 3, 6, 1};
  const std::vector<uint64_t> stop_at = {37, 101, 20, ~uint64_t{0}};  // positions each rank reads
  for (size_t seg = 0; seg < worlds.size(); ++seg) {
    const uint32_t w = worlds[seg];
    const uint64_t len = global->size(), per = (len + w - 1) / w;
    const uint64_t read = std::min(stop_at[seg], per);
    for (uint32_t r = 0; r < w; ++r) {
      StridedRankOrder part(global, per * w, r, w);
      std::vector<int64_t> got(read);
      ASSERT_TRUE(part.Read(0, read, got.data()).ok());
      for (int64_t i : got) ++seen[i];
    }
    global = std::make_shared<RemainderOrder>(global, ConsumedPlaces({{0, read}}, w, true, per * w));
  }
  EXPECT_EQ(global->size(), 0u);
  ASSERT_EQ(seen.size(), n);
  int twice = 0;
  for (const auto& [i, count] : seen) {
    ASSERT_LE(count, 2) << i;
    twice += count == 2;
  }
  EXPECT_EQ(twice, 0) << "one rank in the last segment: no padding";
}

}  // namespace
}  // namespace stoker
