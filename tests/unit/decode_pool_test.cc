// DecodePool (src/parquet/decode_pool.h): freed large blocks kept, up to
// its limit, and given to the next requests of their size class.
#include "parquet/decode_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace stoker {
namespace {

TEST(DecodePool, SizeClassesHoldTheRequestWithinAnEighthMore) {
  EXPECT_EQ(DecodePool::ClassOf(1000), 1000);  // (small: as asked)
  for (int64_t n : {int64_t{64} << 10, (int64_t{64} << 10) + 1, int64_t{1} << 20, (int64_t{3} << 20) + 12345,
                    (int64_t{5} << 20) - 1}) {
    const int64_t c = DecodePool::ClassOf(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c - n, n / 8) << n;
    EXPECT_EQ(DecodePool::ClassOf(c), c) << n;  // (a class is its own class)
  }
}

TEST(DecodePool, AFreedBlockGoesToTheNextRequestOfItsClassWithinTheLimit) {
  arrow::ProxyMemoryPool under(arrow::default_memory_pool());
  auto* pool = new DecodePool(int64_t{3} << 20, &under);
  const int64_t mib = int64_t{1} << 20;
  uint8_t *a, *b, *c, *d;
  ASSERT_TRUE(pool->Allocate(mib, &a).ok());
  ASSERT_TRUE(pool->Allocate(mib + 100, &b).ok());  // (the same class: 1 MiB + an eighth)
  ASSERT_TRUE(pool->Allocate(2 * mib, &c).ok());
  pool->Free(b, mib + 100);
  EXPECT_EQ(pool->stats().kept, static_cast<uint64_t>(DecodePool::ClassOf(mib + 100)));
  ASSERT_TRUE(pool->Allocate(mib + 50, &d).ok());
  EXPECT_EQ(d, b);  // (given the block freed)
  EXPECT_EQ(pool->stats().reused, 1u);
  EXPECT_EQ(pool->stats().kept, 0u);
  // Past the limit (3 MiB), freed blocks go back.
  pool->Free(a, mib);
  pool->Free(c, 2 * mib);
  pool->Free(d, mib + 50);
  EXPECT_LE(pool->stats().kept, uint64_t{3} << 20);
  EXPECT_EQ(under.bytes_allocated(), static_cast<int64_t>(pool->stats().kept));
  EXPECT_EQ(pool->bytes_allocated(), 0);
  pool->ReleaseUnused();
  EXPECT_EQ(pool->stats().kept, 0u);
  EXPECT_EQ(under.bytes_allocated(), 0);
  pool->Close();
}

TEST(DecodePool, SmallOrOveralignedBlocksAreNeverKept) {
  arrow::ProxyMemoryPool under(arrow::default_memory_pool());
  auto* pool = new DecodePool(int64_t{64} << 20, &under);
  uint8_t *a, *b;
  ASSERT_TRUE(pool->Allocate(1000, &a).ok());
  ASSERT_TRUE(pool->Allocate(int64_t{1} << 20, 4096, &b).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 4096, 0u);
  pool->Free(a, 1000);
  pool->Free(b, int64_t{1} << 20, 4096);
  EXPECT_EQ(pool->stats().kept, 0u);
  EXPECT_EQ(under.bytes_allocated(), 0);
  pool->Close();
}

TEST(DecodePool, ReallocationKeepsTheBytesAndWithinItsClassItsBlock) {
  arrow::ProxyMemoryPool under(arrow::default_memory_pool());
  auto* pool = new DecodePool(int64_t{64} << 20, &under);
  const int64_t mib = int64_t{1} << 20;
  uint8_t* p;
  ASSERT_TRUE(pool->Allocate(1000, &p).ok());
  for (int i = 0; i < 1000; ++i) p[i] = static_cast<uint8_t>(i * 7);
  const std::vector<int64_t> sizes = {5000, mib, mib + 1000, 3 * mib, 100 << 10, 2000};  // (small to large and back)
  int64_t size = 1000;
  for (int64_t next : sizes) {
    uint8_t* before = p;
    ASSERT_TRUE(pool->Reallocate(size, next, &p).ok());
    if (size >= DecodePool::kMinKept && next >= DecodePool::kMinKept &&
        DecodePool::ClassOf(size) == DecodePool::ClassOf(next))
      EXPECT_EQ(p, before) << size << " to " << next;
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(p[i], static_cast<uint8_t>(i * 7)) << size << " to " << next;
    size = next;
  }
  EXPECT_EQ(pool->bytes_allocated(), 2000);
  pool->Free(p, size);
  pool->ReleaseUnused();
  EXPECT_EQ(under.bytes_allocated(), 0);
  pool->Close();
}

TEST(DecodePool, ClosedItLastsUntilItsLastBlockIsFreed) {
  arrow::ProxyMemoryPool under(arrow::default_memory_pool());
  auto* pool = new DecodePool(int64_t{64} << 20, &under);
  uint8_t *a, *b;
  ASSERT_TRUE(pool->Allocate(int64_t{1} << 20, &a).ok());
  ASSERT_TRUE(pool->Allocate(int64_t{1} << 20, &b).ok());
  pool->Free(a, int64_t{1} << 20);  // (kept)
  pool->Close();                    // (the kept block goes; b is still in use)
  EXPECT_EQ(under.bytes_allocated(), DecodePool::ClassOf(int64_t{1} << 20));
  std::memset(b, 1, 1 << 20);
  pool->Free(b, int64_t{1} << 20);  // (the last: the pool goes with it)
  EXPECT_EQ(under.bytes_allocated(), 0);
}

TEST(DecodePool, ManyThreadsNeverKeepPastTheLimit) {
  arrow::ProxyMemoryPool under(arrow::default_memory_pool());
  const uint64_t keep = uint64_t{8} << 20;
  auto* pool = new DecodePool(keep, &under);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([pool, t] {
      std::mt19937_64 rng(t);
      std::vector<std::pair<uint8_t*, int64_t>> held;
      for (int i = 0; i < 2000; ++i) {
        if (held.size() < 8 && rng() % 2) {
          const int64_t n = static_cast<int64_t>(1000 + rng() % (3 << 20));
          uint8_t* p;
          ASSERT_TRUE(pool->Allocate(n, &p).ok());
          p[0] = p[n - 1] = 1;
          held.push_back({p, n});
        } else if (!held.empty()) {
          pool->Free(held.back().first, held.back().second);
          held.pop_back();
        }
        ASSERT_LE(pool->stats().kept, uint64_t{8} << 20);
      }
      for (auto& [p, n] : held) pool->Free(p, n);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(pool->stats().reused, 0u);
  EXPECT_EQ(pool->bytes_allocated(), 0);
  EXPECT_EQ(under.bytes_allocated(), static_cast<int64_t>(pool->stats().kept));
  pool->Close();
  EXPECT_EQ(under.bytes_allocated(), 0);
}

}  // namespace
}  // namespace stoker
