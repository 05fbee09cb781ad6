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

// A joined field (values + offsets, or padded + lengths), read by the C++
// API's batch: every kept sample's elements, in order, after samples left
// out; a padded row zero past its sample although the region held other
// bytes; the batch's size from the offsets (or lengths), not the values.
TEST(NativeCollate, JoinedFieldsHoldTheKeptSamplesAndTheirOffsetsOrLengths) {
  const std::vector<std::vector<int32_t>> rows = {{1, 2, 3}, {}, {4}, {5, 6, 7, 8, 9}, {10, 11}};
  const uint64_t n = rows.size();
  for (FieldLayout layout : {FieldLayout::kOffsets, FieldLayout::kPadded}) {
    for (bool skip : {false, true}) {
      SCOPED_TRACE(std::to_string(static_cast<int>(layout)) + (skip ? " skip" : ""));
      FieldSpec v{"v", ElementType::kInt32, {}, true};
      v.layout = layout;
      FieldSpec id{"id", ElementType::kInt64, {}};
      std::vector<uint64_t> sizes;
      for (const auto& r : rows) sizes.push_back(r.size() * 4), sizes.push_back(8);
      NativeCollate c({v, id}, n, true, &sizes);
      std::vector<uint8_t> region(c.total_bytes(), 0xAB);  // (a slot's memory holds earlier batches)
      for (uint64_t i = 0; i < n; ++i) {
        std::memcpy(c.Sample(region.data(), 0, i), rows[i].data(), rows[i].size() * 4);
        const int64_t k = static_cast<int64_t>(i);
        std::memcpy(c.Sample(region.data(), 1, i), &k, 8);
      }
      if (layout == FieldLayout::kOffsets)  // end to end, in place
        EXPECT_EQ(c.Sample(region.data(), 0, 3) - c.Sample(region.data(), 0, 0), 4 * 4);
      const std::vector<uint64_t> kept = {0, 2, 3};
      c.WriteHeader(region.data(), skip ? &kept : nullptr);
      Batch::Impl impl;
      ASSERT_TRUE(ParseNativeBatch(region.data(), region.size(), &impl, nullptr).ok());
      ASSERT_EQ(impl.fields.size(), 2u);
      const BatchField& f = impl.fields[0];
      EXPECT_EQ(f.name, "v");
      EXPECT_FALSE(f.variable);
      ASSERT_EQ(f.layout, layout);
      const std::vector<uint64_t> want = skip ? kept : std::vector<uint64_t>{0, 1, 2, 3, 4};
      EXPECT_EQ(impl.size, want.size());
      const int64_t* index = f.index.as<int64_t>();
      const int32_t* values = f.tensor.as<int32_t>();
      ASSERT_TRUE(index && values);
      EXPECT_EQ(f.tensor.dtype, ElementType::kInt32);
      if (layout == FieldLayout::kOffsets) {
        ASSERT_EQ(f.index.shape, std::vector<int64_t>{static_cast<int64_t>(want.size() + 1)});
        int64_t total = 0;
        for (uint64_t j = 0; j < want.size(); ++j) {
          EXPECT_EQ(index[j], total);
          EXPECT_EQ(std::vector<int32_t>(values + index[j], values + index[j] + rows[want[j]].size()), rows[want[j]]);
          total += static_cast<int64_t>(rows[want[j]].size());
        }
        EXPECT_EQ(index[want.size()], total);
        EXPECT_EQ(f.tensor.shape, std::vector<int64_t>{total});
      } else {
        ASSERT_EQ(f.tensor.shape, (std::vector<int64_t>{static_cast<int64_t>(want.size()), 5}));
        ASSERT_EQ(f.index.shape, std::vector<int64_t>{static_cast<int64_t>(want.size())});
        for (uint64_t j = 0; j < want.size(); ++j) {
          std::vector<int32_t> row(values + j * 5, values + j * 5 + 5), expect = rows[want[j]];
          expect.resize(5, 0);
          EXPECT_EQ(row, expect) << "row " << j;
          EXPECT_EQ(index[j], static_cast<int64_t>(rows[want[j]].size()));
        }
      }
      const int64_t* ids = impl.fields[1].tensor.as<int64_t>();
      for (uint64_t j = 0; j < want.size(); ++j) EXPECT_EQ(ids[j], static_cast<int64_t>(want[j]));
    }
  }
}

// A joined field's layout applies to batches: one sample alone
// (batch_size=None) is its 1-D tensor, as before.
TEST(NativeCollate, AJoinedFieldsSampleAloneIsItsTensor) {
  FieldSpec v{"v", ElementType::kFloat32, {}, true};
  v.layout = FieldLayout::kOffsets;
  std::vector<uint64_t> sizes = {12};
  NativeCollate c({v}, 1, false, &sizes);
  std::vector<uint8_t> region(c.total_bytes());
  c.WriteHeader(region.data());
  Batch::Impl impl;
  ASSERT_TRUE(ParseNativeBatch(region.data(), region.size(), &impl, nullptr).ok());
  ASSERT_EQ(impl.fields.size(), 1u);
  EXPECT_EQ(impl.fields[0].layout, FieldLayout::kEach);
  ASSERT_EQ(impl.fields[0].items.size(), 0u);
  EXPECT_EQ(impl.fields[0].tensor.shape, std::vector<int64_t>{3});
}

}  // namespace
}  // namespace stoker
