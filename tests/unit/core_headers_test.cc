// The small header-only helpers of core/ and io/: Mix64 and MixShuffle
// (core/mix.h), UniqueFd (core/unique_fd.h), float16/bfloat16 conversion
// (io/half.h).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "core/mix.h"
#include "core/unique_fd.h"
#include "io/half.h"

namespace stoker {
namespace {

TEST(Mix, Mix64IsSplitMix64AndShufflesArePermutationsOfTheirState) {
  EXPECT_EQ(Mix64(0), 0xe220a8397b1dcdafull);  // splitmix64's first output from seed 0
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 1000; ++i) seen.insert(Mix64(i));
  EXPECT_EQ(seen.size(), 1000u);
  std::vector<int> a(100), b;
  std::iota(a.begin(), a.end(), 0);
  b = a;
  MixShuffle(a.begin(), a.end(), 42);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, b);
  EXPECT_NE(a, b);
  std::vector<int> c = b;
  MixShuffle(c.begin(), c.end(), 42);
  EXPECT_EQ(a, c);
  // Roughly uniform: each value lands in the first half about half the time.
  int first_half = 0;
  for (uint64_t s = 0; s < 2000; ++s) {
    std::vector<int> v(10);
    std::iota(v.begin(), v.end(), 0);
    MixShuffle(v.begin(), v.end(), s);
    first_half += std::find(v.begin(), v.end(), 0) - v.begin() < 5;
  }
  EXPECT_NEAR(first_half, 1000, 150);
}

TEST(UniqueFd, ClosesOnceAndMovesOwnership) {
  int raw = open("/dev/null", O_RDONLY);
  ASSERT_GE(raw, 0);
  {
    UniqueFd a(raw);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw);
  }
  EXPECT_EQ(fcntl(raw, F_GETFD), -1);  // closed
  UniqueFd c(open("/dev/null", O_RDONLY));
  const int kept = c.release();
  EXPECT_FALSE(c.valid());
  EXPECT_NE(fcntl(kept, F_GETFD), -1);  // released: still open
  close(kept);
}

TEST(Half, RoundTripsRoundsToNearestEvenAndKeepsSpecials) {
  for (float f : {0.f, -0.f, 1.f, -2.5f, 65504.f, 6.103515625e-05f, 5.9604645e-08f}) EXPECT_EQ(HalfToFloat(FloatToHalf(f)), f) << f;
  EXPECT_EQ(FloatToHalf(1.f), 0x3c00u);
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.f + 1.f / 4096)), 1.f);           // below half an ulp: down
  EXPECT_EQ(HalfToFloat(FloatToHalf(1.f + 3.f / 2048)), 1.f + 1.f / 512);  // a tie: to even
  EXPECT_TRUE(std::isinf(HalfToFloat(FloatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(3.140625f)), 3.140625f);
  EXPECT_EQ(FloatToBFloat16(1.f), 0x3f80u);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

}  // namespace
}  // namespace stoker
