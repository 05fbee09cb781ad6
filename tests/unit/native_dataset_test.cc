// io/native_dataset: what every NativeDataset gets without overriding it
// (the epoch order, fixed sample sizes) and the element types.
#include "stoker/native_dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "counting_dataset.h"

namespace stoker {
namespace {

using testing::Counting;

TEST(NativeDataset, DefaultOrderIsTheGlobalOrderStridedOverRanks) {
  Counting ds(10);
  OrderRecipe o;
  o.shuffle = true;
  o.seed = 4;
  o.world_size = 3;
  std::vector<int64_t> all;
  for (uint32_t r = 0; r < 3; ++r) {
    o.rank = r;
    const std::vector<int64_t> mine = ds.Order(o);
    EXPECT_EQ(mine, o.RankPart(o.Global(10), RankSplit::kStrided));
    EXPECT_EQ(mine.size(), 4u);  // padded
    all.insert(all.end(), mine.begin(), mine.end());
  }
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  EXPECT_EQ(all.size(), 10u);
}

TEST(NativeDataset, FixedFieldsSizeThemselvesAndVariableOnesMustSay) {
  Counting ds(3);
  uint64_t bytes[2] = {0, 0};
  ASSERT_TRUE(ds.SampleBytes(1, bytes).ok());
  EXPECT_EQ(bytes[0], 8u);
  EXPECT_EQ(bytes[1], 8u);
  EXPECT_FALSE(ds.has_variable_fields());

  class Ragged : public Counting {
   public:
    Ragged() : Counting(3) {}
    const std::vector<FieldSpec>& fields() const override { return f_; }
    std::vector<FieldSpec> f_{{"v", ElementType::kUInt8, {}, true}};
  } ragged;
  EXPECT_TRUE(ragged.has_variable_fields());
  Status st = ragged.SampleBytes(0, bytes);
  EXPECT_EQ(st.code(), Status::Code::kInternal);
  EXPECT_NE(st.message().find("counting"), std::string::npos) << st.ToString();
}

TEST(NativeDataset, ElementSizes) {
  EXPECT_EQ(ElementSize(ElementType::kBool), 1u);
  EXPECT_EQ(ElementSize(ElementType::kFloat16), 2u);
  EXPECT_EQ(ElementSize(ElementType::kBFloat16), 2u);
  EXPECT_EQ(ElementSize(ElementType::kInt64), 8u);
  EXPECT_EQ(ElementSize(ElementType::kComplex128), 16u);
  EXPECT_EQ(ElementSize(static_cast<ElementType>(200)), 0u);
}

}  // namespace
}  // namespace stoker
