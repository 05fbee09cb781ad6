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

TEST(TorchRandperm, AResumedDrawSkipsToItsFloorAndGivesTheSamePlacesAfterIt) {
  testing::Watchdog dog(std::chrono::seconds(60), "TorchRandperm.NotBefore");
  for (uint64_t n : {2ull, 3ull, 1000ull, 100003ull, 3000017ull}) {
    const std::vector<int64_t> ref = Reference(n, TorchMT19937::Seeded(n + 1));
    for (uint64_t floor : {uint64_t{1}, n / 3, n / 2 + 1, n - 1, n}) {
      TorchRandperm p(n, n, TorchMT19937::Seeded(n + 1), 0);
      p.NotBefore(floor / 2);
      p.NotBefore(floor);  // (the furthest promise holds)
      const uint64_t first = std::min(floor, n - 1);  // (the last place is drawn with the last step)
      std::vector<int64_t> got(n - first);
      for (uint64_t pos = first; pos < n; pos += 61) {
        const uint64_t k = std::min<uint64_t>(61, n - pos);
        ASSERT_TRUE(p.Read(pos, k, got.data() + (pos - first)).ok()) << "n " << n << " floor " << floor;
      }
      EXPECT_TRUE(std::equal(got.begin(), got.end(), ref.begin() + first)) << "n " << n << " floor " << floor;
      if (first > 0) {
        int64_t one = 0;
        Status st = p.Read(first - 1, 1, &one);
        EXPECT_FALSE(st.ok());
        EXPECT_NE(st.ToString().find("NotBefore"), std::string::npos) << st.ToString();
      }
      // The generator's state after it is torch's, as without the skip.
      TorchMT19937 after = p.final_state(), want = TorchMT19937::Seeded(n + 1);
      for (uint64_t i = 0; i + 1 < n; ++i) (void)want();
      for (int i = 0; i < 5; ++i) EXPECT_EQ(after(), want());
    }
  }
  // A promise made once the draw has begun changes nothing.
  TorchRandperm p(1000, 1000, TorchMT19937::Seeded(1), 0);
  std::vector<int64_t> got(1000);
  ASSERT_TRUE(p.Read(0, 10, got.data()).ok());
  p.NotBefore(500);
  ASSERT_TRUE(p.Read(10, 990, got.data() + 10).ok());
  EXPECT_EQ(got, Reference(1000, TorchMT19937::Seeded(1)));
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
