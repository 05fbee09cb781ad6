// order/torch_randperm: the generator is std::mt19937's, the order is a
// permutation drawn as it is read, the generator's state after it is
// torch's.  (Equality with torch.randperm itself: tests/python/test_sampling.py.)
#include "order/torch_randperm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "watchdog.h"

namespace stoker {
namespace {

TEST(TorchRandperm, TheGeneratorIsMt19937) {
  for (uint64_t seed : {0ull, 5489ull, 42ull, 0x1234567890ull}) {
    TorchMT19937 g = TorchMT19937::Seeded(seed);
    std::mt19937 ref(static_cast<uint32_t>(seed));
    for (int i = 0; i < 2000; ++i) ASSERT_EQ(g(), ref()) << "seed " << seed << " draw " << i;
  }
  TorchMT19937 g = TorchMT19937::Seeded(7);
  std::mt19937 ref(7);
  const uint64_t hi = ref(), lo = ref();
  EXPECT_EQ(g.Random64(), (hi << 32) | lo);  // the first draw is the high word
}

std::vector<int64_t> Reference(uint64_t n, TorchMT19937 g) {  // the forward Fisher-Yates, plainly
  std::vector<int64_t> a(n);
  for (uint64_t i = 0; i < n; ++i) a[i] = static_cast<int64_t>(i);
  for (uint64_t i = 0; i + 1 < n; ++i) std::swap(a[i], a[i + g() % (n - i)]);
  return a;
}

TEST(TorchRandperm, AForwardFisherYatesReadAsItIsDrawn) {
  testing::Watchdog dog(std::chrono::seconds(60), "TorchRandperm.Forward");
  for (uint64_t n : {1ull, 2ull, 3ull, 1000ull, 100003ull}) {
    TorchRandperm p(n, n, TorchMT19937::Seeded(n), 0);
    std::vector<int64_t> got(n);
    // Read in batches from the start, as a loader does, while it is drawn.
    for (uint64_t pos = 0; pos < n; pos += 97) ASSERT_TRUE(p.Read(pos, std::min<uint64_t>(97, n - pos), got.data() + pos).ok());
    EXPECT_EQ(got, Reference(n, TorchMT19937::Seeded(n))) << "n " << n;
  }
}

TEST(TorchRandperm, TheFinalStateCountsEveryDrawTorchMakes) {
  const uint64_t n = 5000;
  TorchRandperm p(n, 10, TorchMT19937::Seeded(3), /*extra_perms=*/1);
  std::vector<int64_t> first(10);
  ASSERT_TRUE(p.Read(0, 10, first.data()).ok());
  EXPECT_EQ(p.size(), 10u);
  TorchMT19937 after = p.final_state();
  TorchMT19937 ref = TorchMT19937::Seeded(3);
  for (uint64_t i = 0; i < 2 * (n - 1); ++i) (void)ref();  // two permutations' draws
  for (int i = 0; i < 10; ++i) EXPECT_EQ(after(), ref());
  EXPECT_FALSE(p.Read(5, 10, first.data()).ok());  // past its end
}

TEST(TorchRandperm, StoppedWhileAReaderWaitsIsCancelledNotAHang) {
  testing::Watchdog dog(std::chrono::seconds(60), "TorchRandperm.Stop");
  auto p = std::make_unique<TorchRandperm>(50'000'000, 50'000'000, TorchMT19937::Seeded(1), 0);
  p->Stop();
  std::vector<int64_t> out(1);
  Status st = p->Read(49'999'999, 1, out.data());
  if (p->drawn() < 50'000'000) EXPECT_TRUE(st.IsCancelled()) << st.ToString();
}

}  // namespace
}  // namespace stoker
