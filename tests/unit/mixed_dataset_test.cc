// io/mixed_dataset: native datasets laid end to end, each global index
// routed to its source (the bucket table against a plain search), and
// sources of other fields refused by name.
#include "io/mixed_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "counting_dataset.h"
#include "io/record_file_dataset.h"
#include "test_files.h"

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

TEST(MixedDataset, ABatchReadGivesEachSampleWhatItsOwnReadGives) {
  // Raw record files of Zipf sizes as sources, read a batch at a time (each source's
  // samples together, runs of neighbouring records at once) against one
  // Read per sample: batches in order, shuffled, with repeats.
  std::vector<std::shared_ptr<NativeDataset>> sources;
  std::vector<std::string> paths;
  for (int i = 0; i < 30; ++i) {
    const int rows = 1 + 600 / (i + 1);
    std::vector<float> v(static_cast<size_t>(rows) * 3);
    for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<float>(i * 10000 + j);
    paths.push_back(testing::TempFile("mix_src" + std::to_string(i),
                                      std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4)));
    sources.push_back(
        RecordFileDataset::OpenRaw(paths.back(), ElementType::kFloat32, {3}, i % 2 ? IoMode::kMmap : IoMode::kPread)
            .value());
  }
  // A mix whose last source is a mix itself (its batch read nests).
  std::vector<std::shared_ptr<NativeDataset>> inner(sources.begin() + 20, sources.end());
  sources.resize(20);
  sources.push_back(MixedDataset::Make(inner).value());
  auto mixed = MixedDataset::Make(sources).value();
  std::mt19937_64 rng(5);
  std::vector<uint64_t> all(mixed->size());
  for (uint64_t g = 0; g < all.size(); ++g) all[g] = g;
  std::vector<uint64_t> shuffled = all;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  for (const std::vector<uint64_t>* order : {&all, &shuffled}) {
    for (size_t at = 0; at < order->size(); at += 97) {
      std::vector<uint64_t> batch(order->begin() + at, order->begin() + std::min(order->size(), at + 97));
      batch.push_back(batch.front());  // a repeat
      std::vector<float> got(batch.size() * 3, -1), want(3);
      std::vector<uint8_t*> dsts;
      for (size_t k = 0; k < batch.size(); ++k) dsts.push_back(reinterpret_cast<uint8_t*>(got.data() + 3 * k));
      ASSERT_TRUE(mixed->ReadBatch(batch.data(), batch.size(), dsts.data()).ok());
      for (size_t k = 0; k < batch.size(); ++k) {
        uint8_t* one = reinterpret_cast<uint8_t*>(want.data());
        ASSERT_TRUE(mixed->Read(batch[k], &one).ok());
        ASSERT_EQ(std::vector<float>(got.begin() + 3 * k, got.begin() + 3 * k + 3), want) << "sample " << batch[k];
      }
    }
  }
  const uint64_t bad[2] = {0, mixed->size()};
  std::vector<float> out(6);
  uint8_t* dsts[2] = {reinterpret_cast<uint8_t*>(out.data()), reinterpret_cast<uint8_t*>(out.data() + 3)};
  Status st = mixed->ReadBatch(bad, 2, dsts);
  EXPECT_NE(st.message().find("no sample " + std::to_string(mixed->size())), std::string::npos) << st.ToString();
  for (const std::string& p : paths) std::remove(p.c_str());
}

}  // namespace
}  // namespace stoker
