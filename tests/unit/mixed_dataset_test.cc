// io/mixed_dataset: native datasets laid end to end, each global index
// routed to its source (the bucket table against a plain search), and
// sources of other fields refused by name.
#include "io/mixed_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "counting_dataset.h"

namespace stoker {
namespace {

using testing::Counting;

TEST(MixedDataset, EveryGlobalIndexReadsItsSourcesSample) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    // Zipf-like sizes with many one-sample sources (several per bucket).
    const size_t k = 1 + rng() % 300;
    std::vector<std::shared_ptr<NativeDataset>> sources;
    std::vector<uint64_t> offsets{0};
    for (size_t i = 0; i < k; ++i) {
      const uint64_t n = trial % 2 ? 1 + rng() % 3 : 1 + 5000 / (i + 1);
      sources.push_back(std::make_shared<Counting>(n));
      offsets.push_back(offsets.back() + n);
    }
    auto mixed = MixedDataset::Make(sources).value();
    ASSERT_EQ(mixed->size(), offsets.back());
    int64_t v = -1;
    float f[2];
    uint8_t* dst[2] = {reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(f)};
    for (uint64_t g = 0; g < mixed->size(); ++g) {
      ASSERT_TRUE(mixed->Read(g, dst).ok());
      const size_t i = static_cast<size_t>(std::upper_bound(offsets.begin(), offsets.end(), g) - offsets.begin() - 1);
      ASSERT_EQ(static_cast<uint64_t>(v), g - offsets[i]) << "trial " << trial << " index " << g;
      if (g == offsets[i])
        EXPECT_NE(mixed->DescribeSample(g).find("source " + std::to_string(i) + " of the mix"), std::string::npos);
    }
    EXPECT_FALSE(mixed->Read(mixed->size(), dst).ok());
  }
}

}  // namespace
}  // namespace stoker
