// streaming/stream_buffer_pool: full mode's memory for shards the cache has no
// room for.
#include "streaming/stream_buffer_pool.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace stoker {
namespace {

TEST(StreamBufferPool, SizedFromTheLargestShardAndTheWindow) {
  StreamBufferPool p;
  ASSERT_TRUE(p.Configure({3 << 20, 0, 4, 2}, true, "test").ok());
  EXPECT_EQ(p.capacity(), 4u << 20);  // whole huge pages
  EXPECT_EQ(p.count(), 2u * 4 + 2);  // two windows and one per fetcher
  EXPECT_EQ(p.made(), 0u);  // made as the fetchers need them
  StreamBufferPool small;
  ASSERT_TRUE(small.Configure({100, 6, 4, 2}, true, "test").ok());
  EXPECT_EQ(small.capacity(), 4096u);  // whole pages below 1 MiB
  EXPECT_EQ(small.count(), 6u);        // as asked
  StreamBufferPool huge;
  Status st = huge.Configure({uint64_t{1} << 40, 8, 4, 2}, true, "the dataset");
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(st.message().find("the dataset"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("stream_buffers"), std::string::npos) << st.ToString();
}

TEST(StreamBufferPool, SpeculativeFetchesLeaveAWindowAndReadersAlwaysGetOne) {
  StreamBufferPool p;
  ASSERT_TRUE(p.Configure({4096, 3, 2, 1}, false, "test").ok());
  auto epoch = std::make_shared<int>(0);
  auto none = [] { return static_cast<StreamBuffer*>(nullptr); };
  StreamBuffer* a = p.Acquire(epoch, true, 2, none).value();  // (reserve: the window)
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(p.Acquire(epoch, true, 2, none).value(), nullptr);  // 2 left = the window: kept for readers
  StreamBuffer* b = p.Acquire(epoch, false, 0, none).value();
  StreamBuffer* c = p.Acquire(epoch, false, 0, none).value();
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(p.made(), 3u);
  // All taken: a reader's shard takes a prefetched one back ...
  EXPECT_EQ(p.Acquire(epoch, false, 0, [&] { return a; }).value(), a);
  // ... or, with none to take back, one more is made and unmapped on return.
  StreamBuffer* d = p.Acquire(epoch, false, 0, none).value();
  EXPECT_EQ(p.made(), 4u);
  p.Return(d);
  EXPECT_EQ(p.made(), 3u);
  p.Return(b);
  EXPECT_EQ(p.made(), 3u);
  EXPECT_EQ(p.bytes(), 3u * 4096);
}

TEST(StreamBufferPool, ASpeculativeFetchLeavesItsReserveFree) {
  StreamBufferPool p;
  ASSERT_TRUE(p.Configure({4096, 4, 2, 1}, false, "test").ok());  // 4 buffers
  auto epoch = std::make_shared<int>(0);
  auto none = [] { return static_cast<StreamBuffer*>(nullptr); };
  ASSERT_NE(p.Acquire(epoch, true, 2, none).value(), nullptr);
  ASSERT_NE(p.Acquire(epoch, true, 2, none).value(), nullptr);
  EXPECT_EQ(p.Acquire(epoch, true, 2, none).value(), nullptr);  // 2 free: the reserve
  ASSERT_NE(p.Acquire(epoch, true, 1, none).value(), nullptr);   // a smaller reserve: one more
  EXPECT_EQ(p.Acquire(epoch, true, 1, none).value(), nullptr);
  ASSERT_NE(p.Acquire(epoch, true, 0, none).value(), nullptr);   // none: the last one
  EXPECT_EQ(p.Acquire(epoch, true, 0, none).value(), nullptr);   // none left
  EXPECT_EQ(p.made(), 4u);
}

TEST(StreamBufferPool, AnEpochLeftEarlyGivesItsBuffersBack) {
  StreamBufferPool p;
  ASSERT_TRUE(p.Configure({4096, 2, 1, 1}, false, "test").ok());
  auto none = [] { return static_cast<StreamBuffer*>(nullptr); };
  auto epoch = std::make_shared<int>(0);
  StreamBuffer* a = p.Acquire(epoch, false, 0, none).value();
  StreamBuffer* b = p.Acquire(epoch, false, 0, none).value();
  EXPECT_FALSE(a->Free());
  epoch.reset();  // nobody holds that epoch any more
  EXPECT_TRUE(a->Free() && b->Free());
  auto next = std::make_shared<int>(1);
  EXPECT_NE(p.Acquire(next, true, 0, none).value(), nullptr);
  EXPECT_EQ(p.made(), 2u);
}

// Which of the pages [p, p + n) are in memory.
std::vector<bool> Resident(const uint8_t* p, size_t n) {
  std::vector<unsigned char> v(n / 4096);
  EXPECT_EQ(mincore(const_cast<uint8_t*>(p), n, v.data()), 0);
  std::vector<bool> out;
  for (unsigned char c : v) out.push_back(c & 1);
  return out;
}

// The THPeligible line of the mapping that starts at p (/proc/self/smaps):
// 1 where the kernel may back it with huge pages, 0 not, -1 unknown.
int ThpEligible(const void* p) {
  char start[32];
  std::snprintf(start, sizeof start, "%lx-", reinterpret_cast<unsigned long>(p));
  std::ifstream f("/proc/self/smaps");
  bool in = false;
  for (std::string line; std::getline(f, line);) {
    if (line.find('-') != std::string::npos && line.find(':') > line.find(' ')) in = line.rfind(start, 0) == 0;
    if (in && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

bool KernelHasHugePages() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  return s.find("[always]") != std::string::npos || s.find("[madvise]") != std::string::npos;
}

TEST(StreamBufferPool, BackedInOneCallForWhatArrivesAndOnlyOnce) {
  StreamBufferPool p;
  StreamBufferSizing sizing{3 << 20, 1, 1, 1};
  sizing.huge_pages = false;
  ASSERT_TRUE(p.Configure(sizing, true, "test").ok());
  EXPECT_EQ(p.capacity(), 3u << 20);  // whole small pages: no huge-page rounding
  EXPECT_FALSE(p.huge_pages());
  auto epoch = std::make_shared<int>(0);
  StreamBuffer* b = p.Acquire(epoch, false, 0, [] { return static_cast<StreamBuffer*>(nullptr); }).value();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->backed, 0u);
  EXPECT_EQ(b->map, nullptr);  // made, not mapped: the fetcher maps it (Back), not Acquire under the dataset's mutex
  ASSERT_TRUE(p.Back(b, 0).ok());
  ASSERT_NE(b->map, nullptr);
  for (bool r : Resident(b->map, b->capacity)) EXPECT_FALSE(r);  // mapped, nothing backed
  ASSERT_TRUE(p.Back(b, (1 << 20) + 1).ok());
  EXPECT_EQ(b->backed, (1u << 20) + 4096);  // whole pages, the shard's and no more
  std::vector<bool> r = Resident(b->map, b->capacity);
  for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i], i < 257) << "page " << i;
  ASSERT_TRUE(p.Back(b, 100).ok());  // a smaller shard next: nothing to do
  EXPECT_EQ(b->backed, (1u << 20) + 4096);
  ASSERT_TRUE(p.Back(b, uint64_t{1} << 30).ok());  // never past the buffer
  EXPECT_EQ(b->backed, b->capacity);
  for (bool x : Resident(b->map, b->capacity)) EXPECT_TRUE(x);
  b->map[b->capacity - 1] = 7;  // (writable)
  if (const int eligible = ThpEligible(b->map); eligible >= 0) EXPECT_EQ(eligible, 0) << "small pages asked for";
}

TEST(StreamBufferPool, HugePagesUnlessTheHostTakesFreeMemoryBack) {
  StreamBufferPool p;
  ASSERT_TRUE(p.Configure({3 << 20, 1, 1, 1}, true, "test").ok());  // (huge_pages: the default)
  EXPECT_TRUE(p.huge_pages());
  EXPECT_EQ(p.capacity(), 4u << 20);
  auto epoch = std::make_shared<int>(0);
  StreamBuffer* b = p.Acquire(epoch, false, 0, [] { return static_cast<StreamBuffer*>(nullptr); }).value();
  ASSERT_TRUE(p.Back(b, 1).ok());
  EXPECT_EQ(b->backed, 2u << 20);  // a whole huge page
  const int eligible = ThpEligible(b->map);
  if (eligible < 0 || !KernelHasHugePages()) GTEST_SKIP() << "this kernel says nothing of huge pages";
  EXPECT_EQ(eligible, 1);
  StreamBufferPool small;
  StreamBufferSizing sizing{3 << 20, 1, 1, 1};
  sizing.huge_pages = false;
  ASSERT_TRUE(small.Configure(sizing, true, "test").ok());
  StreamBuffer* s = small.Acquire(epoch, false, 0, [] { return static_cast<StreamBuffer*>(nullptr); }).value();
  ASSERT_TRUE(small.Back(s, 1).ok());
  EXPECT_EQ(ThpEligible(s->map), 0);  // advised against, even where the kernel's default is "always"
}

}  // namespace
}  // namespace stoker
