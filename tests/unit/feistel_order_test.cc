// order/feistel_order: a bijection of [0, n) for every n, keyed by (seed,
// epoch), random access equal to reading, and shuffled like a random
// permutation by the usual measures.
#include "order/feistel_order.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

namespace stoker {
namespace {

TEST(FeistelOrder, APermutationOfEveryN) {
  for (uint64_t n : {0ull, 1ull, 2ull, 3ull, 7ull, 64ull, 1000ull, 65537ull}) {
    FeistelOrder o(n, FeistelOrder::SeedFor(1, 0));
    std::vector<bool> seen(n, false);
    for (uint64_t p = 0; p < n; ++p) {
      const uint64_t v = o.At(p);
      ASSERT_LT(v, n);
      ASSERT_FALSE(seen[v]) << "n " << n << ": " << v << " twice";
      seen[v] = true;
    }
  }
}

TEST(FeistelOrder, KeyedBySeedAndEpochWithRandomAccess) {
  const uint64_t n = 100000;
  FeistelOrder a(n, FeistelOrder::SeedFor(7, 0)), same(n, FeistelOrder::SeedFor(7, 0));
  FeistelOrder next(n, FeistelOrder::SeedFor(7, 1)), other(n, FeistelOrder::SeedFor(8, 0));
  std::vector<int64_t> run(100);
  ASSERT_TRUE(a.Read(54321, 100, run.data()).ok());
  int differ_epoch = 0, differ_seed = 0;
  for (uint64_t k = 0; k < 100; ++k) {
    EXPECT_EQ(static_cast<uint64_t>(run[k]), same.At(54321 + k));
    differ_epoch += next.At(54321 + k) != a.At(54321 + k);
    differ_seed += other.At(54321 + k) != a.At(54321 + k);
  }
  EXPECT_GT(differ_epoch, 95);
  EXPECT_GT(differ_seed, 95);
  // Far past what any list could hold: O(1) per position.
  FeistelOrder huge(100'000'000'000ull, FeistelOrder::SeedFor(1, 2));
  EXPECT_LT(huge.At(99'999'999'999ull), 100'000'000'000ull);
  EXPECT_NE(huge.At(0), huge.At(1));
}

// Statistics of a random permutation of n, against which the Feistel one is
// measured (with fixed seeds): mean |p(i) - i| / n is 1/3; Spearman's rank
// correlation of (i, p(i)) and of (p(i), p(i+1)) is about 0 (sd 1/sqrt(n)).
TEST(FeistelOrder, ShuffledLikeARandomPermutation) {
  const uint64_t n = 200000;
  for (uint64_t seed : {1ull, 2ull, 3ull}) {
    FeistelOrder o(n, FeistelOrder::SeedFor(seed, 0));
    double disp = 0, r_pos = 0, r_next = 0;
    const double mean = (n - 1) / 2.0;
    uint64_t prev = o.At(0);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t v = o.At(i);
      disp += std::fabs(static_cast<double>(v) - static_cast<double>(i));
      r_pos += (static_cast<double>(i) - mean) * (static_cast<double>(v) - mean);
      if (i) r_next += (static_cast<double>(prev) - mean) * (static_cast<double>(v) - mean);
      prev = v;
    }
    const double var = (static_cast<double>(n) * n - 1) / 12.0 * n;
    disp /= static_cast<double>(n) * n;
    r_pos /= var;
    r_next /= var;
    EXPECT_NEAR(disp, 1.0 / 3, 0.005) << "seed " << seed;
    EXPECT_LT(std::fabs(r_pos), 5 / std::sqrt(static_cast<double>(n))) << "seed " << seed;
    EXPECT_LT(std::fabs(r_next), 5 / std::sqrt(static_cast<double>(n))) << "seed " << seed;
  }
}

}  // namespace
}  // namespace stoker
