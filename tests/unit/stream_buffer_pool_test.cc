// cache/stream_buffer_pool: full mode's memory for shards the cache has no
// room for.
#include "cache/stream_buffer_pool.h"

#include <gtest/gtest.h>

#include <memory>

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

}  // namespace
}  // namespace stoker
