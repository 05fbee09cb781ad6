#include "shm/region_allocator.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

constexpr uint64_t K = 4096;

TEST(RegionAllocator, StaysWithinBudget) {
  RegionAllocator a(0, 1000 * K, 10 * K);
  auto x = a.Allocate(6 * K);
  ASSERT_TRUE(x);
  EXPECT_FALSE(a.Allocate(6 * K)) << "would exceed the 10-page budget";
  EXPECT_TRUE(a.Allocate(4 * K)) << "exactly up to the budget";
  EXPECT_EQ(a.resident(), 10 * K);
  EXPECT_FALSE(a.Allocate(4096)) << "not one page past it";
  EXPECT_FALSE(a.Allocate(3 * K + 1)) << "sizes are page multiples";
}

TEST(RegionAllocator, ReusesAndMergesFreeRanges) {
  RegionAllocator a(0, 1000 * K, 100 * K);
  auto x = *a.Allocate(2 * K), y = *a.Allocate(2 * K), z = *a.Allocate(2 * K);
  a.Free(x, 2 * K);
  a.Free(y, 2 * K);
  EXPECT_EQ(a.warm_free(), 4 * K);
  auto w = a.Allocate(4 * K);
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, x) << "adjacent warm ranges merge and are reused first";
  EXPECT_EQ(a.top(), z + 2 * K) << "no new bytes were taken";
}

TEST(RegionAllocator, DiscardReleasesBudget) {
  RegionAllocator a(0, 1000 * K, 8 * K);
  auto x = *a.Allocate(4 * K);
  auto y = *a.Allocate(4 * K);
  (void)y;
  a.Free(x, 4 * K);
  EXPECT_EQ(a.resident(), 8 * K);
  EXPECT_FALSE(a.Allocate(8 * K));
  auto ranges = a.DiscardFree();
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].first, x);
  EXPECT_EQ(a.resident(), 4 * K);
  EXPECT_TRUE(a.Allocate(4 * K)) << "a discarded range is reusable within the budget";
}

TEST(RegionAllocator, DiscardedSpaceAtTheTopIsOneRangeAgain) {
  RegionAllocator a(0, 12 * K, 12 * K);
  auto x = *a.Allocate(4 * K), y = *a.Allocate(4 * K);
  a.Free(y, 4 * K);
  a.Free(x, 4 * K);
  EXPECT_FALSE(a.Allocate(12 * K)) << "warm ranges still count as resident";
  a.DiscardFree();
  EXPECT_EQ(a.top(), 0u);
  auto z = a.Allocate(12 * K);
  ASSERT_TRUE(z) << "free space below and above the old top is contiguous";
  EXPECT_EQ(*z, 0u);
}

TEST(RegionAllocator, RangeBoundsAllocations) {
  RegionAllocator a(0, 8 * K, 100 * K);
  EXPECT_FALSE(a.Allocate(12 * K)) << "the range ends before the budget does";
  EXPECT_TRUE(a.Allocate(8 * K));
}

}  // namespace
}  // namespace stoker
