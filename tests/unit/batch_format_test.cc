// shm/batch_format: the tree a batch's structure is written as, read back
// with bounds checks, and the dtype table the Python side mirrors.
#include "shm/batch_format.h"

#include <gtest/gtest.h>

#include <string>

namespace stoker {
namespace {

TEST(BatchFormat, TreeBytesReadBackAndNothingPastTheirEnd) {
  TreeWriter w;
  w.PutTag(Tag::kDict);
  w.Put<uint32_t>(1);
  w.PutTag(Tag::kStr);
  w.Put<uint32_t>(1);
  w.PutBytes("x", 1);
  w.PutTag(Tag::kTensor);
  w.Put<uint8_t>(static_cast<uint8_t>(DType::kFloat32));
  w.Put<uint8_t>(1);
  w.Put<int64_t>(4);
  const size_t offset_at = w.size();
  w.Put<uint64_t>(0);
  w.Put<uint64_t>(16);
  w.Patch64(offset_at, 128);

  const std::string& b = w.bytes();
  TreeReader r(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  uint8_t tag, dtype, ndim;
  uint32_t n, len;
  const uint8_t* key;
  int64_t dim;
  uint64_t off, nbytes;
  ASSERT_TRUE(r.Get(&tag) && tag == static_cast<uint8_t>(Tag::kDict));
  ASSERT_TRUE(r.Get(&n) && n == 1);
  ASSERT_TRUE(r.Get(&tag) && tag == static_cast<uint8_t>(Tag::kStr));
  ASSERT_TRUE(r.Get(&len) && r.GetBytes(len, &key) && key[0] == 'x');
  ASSERT_TRUE(r.Get(&tag) && tag == static_cast<uint8_t>(Tag::kTensor));
  ASSERT_TRUE(r.Get(&dtype) && r.Get(&ndim) && r.Get(&dim));
  EXPECT_EQ(DTypeSize(static_cast<DType>(dtype)) * dim, 16);
  ASSERT_TRUE(r.Get(&off) && r.Get(&nbytes));
  EXPECT_EQ(off, 128u);  // patched
  EXPECT_TRUE(r.done());
  EXPECT_FALSE(r.Get(&tag));  // past the end: refused, not read

  TreeReader cut(reinterpret_cast<const uint8_t*>(b.data()), 3);
  ASSERT_TRUE(cut.Get(&tag));
  EXPECT_FALSE(cut.Get(&n));  // a u32 that is not all there
  const uint8_t* p;
  EXPECT_FALSE(cut.GetBytes(3, &p));
}

TEST(BatchFormat, DTypeTable) {
  EXPECT_EQ(static_cast<int>(DType::kNumDTypes), 15);
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(DTypeSize(DType::kComplex64), 8u);
  EXPECT_STREQ(DTypeName(DType::kUInt16), "uint16");
  EXPECT_STREQ(DTypeName(DType::kComplex128), "complex128");
}

}  // namespace
}  // namespace stoker
