// io/example_decoder: conversions, clear errors, unpacked values.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "example.pb.h"
#include "io/example_decoder.h"

namespace stoker {
namespace {

Status DecodeOne(const std::string& rec, const std::vector<FieldSpec>& specs, std::vector<std::string>* out) {
  out->clear();
  std::vector<uint8_t*> dst;
  for (const FieldSpec& f : specs) out->emplace_back(f.bytes(), '\0');
  for (std::string& b : *out) dst.push_back(reinterpret_cast<uint8_t*>(b.data()));
  return ExampleDecoder(specs).Decode(reinterpret_cast<const uint8_t*>(rec.data()), rec.size(), dst.data());
}

TEST(ExampleDecoder, ConversionsAndClearErrors) {
  tf::Example ex;
  auto& m = *ex.mutable_features()->mutable_feature();
  for (float v : {1.5f, -2.0f, 65504.0f}) m["f"].mutable_float_list()->add_value(v);
  for (int64_t v : {0, 255, 7}) m["i"].mutable_int64_list()->add_value(v);
  m["big"].mutable_int64_list()->add_value(300);
  std::string rec;
  ex.SerializeToString(&rec);
  std::vector<std::string> out;
  // float_list -> float64 and float16; int64_list -> uint8.
  ASSERT_TRUE(DecodeOne(rec, {{"f", ElementType::kFloat64, {3}}, {"i", ElementType::kUInt8, {3}}}, &out).ok());
  double d[3];
  std::memcpy(d, out[0].data(), 24);
  EXPECT_EQ(d[1], -2.0);
  EXPECT_EQ(static_cast<uint8_t>(out[1][1]), 255);
  ASSERT_TRUE(DecodeOne(rec, {{"f", ElementType::kFloat16, {3}}}, &out).ok());
  uint16_t h[3];
  std::memcpy(h, out[0].data(), 6);
  EXPECT_EQ(h[0], 0x3e00);  // 1.5
  EXPECT_EQ(h[2], 0x7bff);  // 65504
  auto expect_error = [&](std::vector<FieldSpec> specs, const std::string& want) {
    Status st = DecodeOne(rec, specs, &out);
    ASSERT_TRUE(st.IsDataLoss()) << want;
    EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
  };
  expect_error({{"f", ElementType::kFloat32, {4}}}, "feature 'f' is a float_list of 3 values; declared float32 (4,) needs 4");
  expect_error({{"f", ElementType::kFloat32, {2}}}, "feature 'f' is a float_list of 3 values");
  expect_error({{"f", ElementType::kInt64, {3}}}, "feature 'f' is a float_list; declared int64 (3,) needs int64_list");
  expect_error({{"i", ElementType::kFloat32, {3}}}, "is a int64_list; declared float32 (3,) needs float_list");
  expect_error({{"big", ElementType::kUInt8, {}}}, "value 300 (element 0) does not fit declared uint8 ()");
  expect_error({{"nope", ElementType::kUInt8, {}}}, "feature 'nope' is missing from the record (it has ");
  // Garbage is malformed, not a crash.
  Status junk = DecodeOne(std::string("\x0a\xff\xff\xff\x0f", 5), {{"f", ElementType::kFloat32, {3}}}, &out);
  EXPECT_TRUE(junk.IsDataLoss());
}

TEST(ExampleDecoder, UnpackedValuesAndEntryFieldOrder) {
  // Hand-encoded: Example{features{feature{ value: float_list{1.0 unpacked, 2.0 unpacked}, key "v" }}}
  // with the map entry's value before its key (parsers must accept any order).
  std::string flist = std::string("\x0d", 1) + std::string("\x00\x00\x80\x3f", 4) + std::string("\x0d", 1) +
                      std::string("\x00\x00\x00\x40", 4);                     // FloatList, two fixed32 values
  std::string feature = "\x12" + std::string(1, static_cast<char>(flist.size())) + flist;  // Feature.float_list
  std::string entry = "\x12" + std::string(1, static_cast<char>(feature.size())) + feature + "\x0a\x01v";
  std::string features = "\x0a" + std::string(1, static_cast<char>(entry.size())) + entry;
  std::string example = "\x0a" + std::string(1, static_cast<char>(features.size())) + features;
  std::vector<std::string> out;
  Status st = DecodeOne(example, {{"v", ElementType::kFloat32, {2}}}, &out);
  ASSERT_TRUE(st.ok()) << st.ToString();
  float v[2];
  std::memcpy(v, out[0].data(), 8);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[1], 2.0f);
}

}  // namespace
}  // namespace stoker
