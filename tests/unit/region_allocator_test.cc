#include "shm/region_allocator.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

constexpr uint64_t K = 4096;

TEST(RegionAllocator, StaysWithinBudget) {
  RegionAllocator a(0, 1000 * K, 10 * K);
  auto x = a.Allocate(6 * K, false);
  ASSERT_TRUE(x);
  EXPECT_FALSE(a.Allocate(6 * K, false)) << "would exceed the 10-page budget";
  auto y = a.Allocate(6 * K, true);
  ASSERT_TRUE(y) << "over_limit ignores the budget";
  EXPECT_EQ(a.resident(), 12 * K);
  EXPECT_FALSE(a.Allocate(3 * K + 1, false)) << "sizes are page multiples";
}

TEST(RegionAllocator, ReusesAndMergesFreeRanges) {
  RegionAllocator a(0, 1000 * K, 100 * K);
  auto x = *a.Allocate(2 * K, false), y = *a.Allocate(2 * K, false), z = *a.Allocate(2 * K, false);
  a.Free(x, 2 * K);
  a.Free(y, 2 * K);
  EXPECT_EQ(a.warm_free(), 4 * K);
  auto w = a.Allocate(4 * K, false);
  ASSERT_TRUE(w);
  EXPECT_EQ(*w, x) << "adjacent warm ranges merge and are reused first";
  EXPECT_EQ(a.top(), z + 2 * K) << "no new bytes were taken";
}

TEST(RegionAllocator, DiscardReleasesBudget) {
  RegionAllocator a(0, 1000 * K, 8 * K);
  auto x = *a.Allocate(4 * K, false);
  auto y = *a.Allocate(4 * K, false);
  (void)y;
  a.Free(x, 4 * K);
  EXPECT_EQ(a.resident(), 8 * K);
  EXPECT_FALSE(a.Allocate(8 * K, false));
  auto ranges = a.DiscardFree();
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0].first, x);
  EXPECT_EQ(a.resident(), 4 * K);
  EXPECT_TRUE(a.Allocate(4 * K, false)) << "a discarded range is reusable within the budget";
}

TEST(RegionAllocator, ReserveBoundsEvenOverLimit) {
  RegionAllocator a(0, 8 * K, 4 * K);
  EXPECT_FALSE(a.Allocate(12 * K, true));
}

}  // namespace
}  // namespace stoker
