// collate/native_collate: the batch layout of a native dataset's fields.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/batch_impl.h"
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

// A str or bytes field: each sample's bytes, written to its leaf by the
// reader, are named by a str (bytes) node of a list, by offset; samples left
// out are left out of the list.
TEST(NativeCollate, StrAndBytesSamplesGoIntoTheTree) {
  FieldSpec s{"s", ElementType::kUInt8, {}, true};
  s.leaf = FieldLeaf::kStr;
  FieldSpec b{"b", ElementType::kUInt8, {}, true};
  b.leaf = FieldLeaf::kBytes;
  const std::vector<std::string> text = {"héllo", "", "wörld!"}, raw = {"\x01\x02", std::string(1, '\0'), ""};
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < 3; ++i) sizes.push_back(text[i].size()), sizes.push_back(raw[i].size());
  NativeCollate c({s, b}, 3, true, &sizes);
  std::vector<uint8_t> region(c.total_bytes());
  for (size_t i = 0; i < 3; ++i) {
    std::memcpy(c.Sample(region.data(), 0, i), text[i].data(), text[i].size());
    std::memcpy(c.Sample(region.data(), 1, i), raw[i].data(), raw[i].size());
  }
  const std::vector<uint64_t> kept = {0, 2};
  c.WriteHeader(region.data(), &kept);
  // dict, 2 fields: "s" -> list of 2 str, "b" -> list of 2 bytes
  const uint8_t* p = region.data() + sizeof(BatchHeader);
  auto tag = [&] { return static_cast<Tag>(*p++); };
  auto u32 = [&] { uint32_t v; std::memcpy(&v, p, 4); p += 4; return v; };
  auto str = [&] { uint32_t n = u32(); std::string v(reinterpret_cast<const char*>(p), n); p += n; return v; };
  ASSERT_EQ(tag(), Tag::kDict);
  ASSERT_EQ(u32(), 2u);
  ASSERT_EQ(tag(), Tag::kStr);
  EXPECT_EQ(str(), "s");
  ASSERT_EQ(tag(), Tag::kList);
  ASSERT_EQ(u32(), 2u);
  auto at = [&] {
    uint64_t off, n;
    std::memcpy(&off, p, 8), std::memcpy(&n, p + 8, 8);
    p += 16;
    return std::string(reinterpret_cast<const char*>(region.data() + off), n);
  };
  for (size_t i : kept) {
    ASSERT_EQ(tag(), Tag::kStrAt);
    EXPECT_EQ(at(), text[i]);
  }
  ASSERT_EQ(tag(), Tag::kStr);
  EXPECT_EQ(str(), "b");
  ASSERT_EQ(tag(), Tag::kList);
  ASSERT_EQ(u32(), 2u);
  for (size_t i : kept) {
    ASSERT_EQ(tag(), Tag::kBytesAt);
    EXPECT_EQ(at(), raw[i]);
  }
}

// The C++ API's batch (api/batch.cc) reads a str or bytes sample as a
// uint8 view of its bytes.
TEST(NativeCollate, StrSamplesAreByteViewsInTheCppBatch) {
  FieldSpec s{"s", ElementType::kUInt8, {}, true};
  s.leaf = FieldLeaf::kStr;
  const std::vector<std::string> text = {"ab", "", "cde"};
  std::vector<uint64_t> sizes = {2, 0, 3};
  NativeCollate c({s}, 3, true, &sizes);
  std::vector<uint8_t> region(c.total_bytes());
  for (size_t i = 0; i < 3; ++i) std::memcpy(c.Sample(region.data(), 0, i), text[i].data(), text[i].size());
  c.WriteHeader(region.data());
  Batch::Impl impl;
  ASSERT_TRUE(ParseNativeBatch(region.data(), region.size(), &impl, nullptr).ok());
  ASSERT_EQ(impl.fields.size(), 1u);
  ASSERT_TRUE(impl.fields[0].variable);
  ASSERT_EQ(impl.fields[0].items.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const TensorView& t = impl.fields[0].items[i];
    EXPECT_EQ(t.dtype, ElementType::kUInt8);
    EXPECT_EQ(std::string(static_cast<const char*>(t.data), t.nbytes), text[i]);
  }
  EXPECT_EQ(impl.size, 3u);
}

}  // namespace
}  // namespace stoker
