// loader/epoch_source: an epoch's order served to the Scheduler in batches.
#include "loader/epoch_source.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace stoker {
namespace {

std::vector<int64_t> Payload(const TaskSpec& t) {
  std::vector<int64_t> v(t.payload.size() / 8);
  std::memcpy(v.data(), t.payload.data(), t.payload.size());
  return v;
}

TEST(EpochSource, BatchesInOrderLastOnePartialOrDropped) {
  EpochSource s;
  s.Begin(std::vector<int64_t>{9, 8, 7, 6, 5, 4, 3}, 3, false);
  EXPECT_EQ(s.batches(), 3u);
  EXPECT_EQ(s.samples(), 7u);
  TaskSpec t;
  std::vector<std::vector<int64_t>> got;
  std::vector<uint64_t> tokens;
  while (s.Next(&t).value()) {
    EXPECT_EQ(t.kind, TaskKind::kIndices);
    got.push_back(Payload(t));
    tokens.push_back(t.token);
  }
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{9, 8, 7}, {6, 5, 4}, {3}}));
  EXPECT_EQ(tokens, (std::vector<uint64_t>{1, 2, 3}));  // never 0 ("no token")
  EXPECT_EQ(s.BatchIndices(2), (std::vector<int64_t>{6, 5, 4}));
  EXPECT_EQ(s.Describe(3), "[3]");
  EXPECT_TRUE(s.BatchIndices(0).empty());
  EXPECT_EQ(s.Describe(4), "?");
  s.Begin(std::vector<int64_t>{9, 8, 7, 6, 5, 4, 3}, 3, true);  // drop_last
  EXPECT_EQ(s.batches(), 2u);
}

TEST(EpochSource, BatchSizeZeroIsOneUncollatedSampleAndOrdersAreShared) {
  auto order = std::make_shared<VectorOrder>(std::vector<int64_t>{4, 2});
  EpochSource s;
  s.Begin(order, 0, false);
  TaskSpec t;
  ASSERT_TRUE(s.Next(&t).value());
  EXPECT_EQ(t.kind, TaskKind::kIndex);
  EXPECT_EQ(Payload(t), (std::vector<int64_t>{4}));
  ASSERT_TRUE(s.Next(&t).value());
  EXPECT_FALSE(s.Next(&t).value());
  EXPECT_EQ(order.use_count(), 2);  // held, not copied
  std::vector<int64_t> many(40);
  s.Begin(many, 20, false);
  EXPECT_EQ(s.Describe(1), "[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ...]");
}

}  // namespace
}  // namespace stoker
