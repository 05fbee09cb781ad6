// collate/native_collate: the batch layout of a native dataset's fields.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "collate/native_collate.h"

namespace stoker {
namespace {

TEST(NativeCollate, TensorAndDictLayouts) {
  NativeCollate one({FieldSpec{"", ElementType::kFloat32, {3}}}, 4);
  EXPECT_EQ(one.total_bytes() % kLeafAlign, 0u);
  std::vector<uint8_t> region(one.total_bytes());
  one.WriteHeader(region.data());
  BatchHeader h;
  std::memcpy(&h, region.data(), sizeof h);
  EXPECT_EQ(h.magic, kBatchMagic);
  EXPECT_EQ(region[sizeof h], static_cast<uint8_t>(Tag::kTensor));
  EXPECT_EQ(one.Sample(region.data(), 0, 1) - one.Sample(region.data(), 0, 0), 12);
  NativeCollate two({FieldSpec{"x", ElementType::kUInt8, {5}}, FieldSpec{"y", ElementType::kInt64, {}}}, 3);
  std::vector<uint8_t> r2(two.total_bytes());
  two.WriteHeader(r2.data());
  EXPECT_EQ(r2[sizeof(BatchHeader)], static_cast<uint8_t>(Tag::kDict));
  EXPECT_EQ((two.Sample(r2.data(), 1, 0) - r2.data()) % kLeafAlign, 0);
  EXPECT_GE(two.Sample(r2.data(), 1, 0), two.Sample(r2.data(), 0, 2) + 5);
}

}  // namespace
}  // namespace stoker
