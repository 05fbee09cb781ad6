// Native transforms and the batch layout's variable fields and skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "collate/native_collate.h"
#include "shm/batch_format.h"
#include "stoker/transforms.h"

namespace stoker {
namespace {

// A dataset of n samples, field "img" uint8 (2, 3, 4) with value index*100 + position.
class Grid : public NativeDataset {
 public:
  explicit Grid(uint64_t n) : n_(n) {}
  uint64_t size() const override { return n_; }
  const std::vector<FieldSpec>& fields() const override { return fields_; }
  Status Read(uint64_t index, uint8_t* const* dst) override {
    for (int i = 0; i < 24; ++i) dst[0][i] = static_cast<uint8_t>(index * 100 + i);
    return Status::OK();
  }
  std::string Describe() const override { return "grid"; }

 private:
  uint64_t n_;
  std::vector<FieldSpec> fields_{{"img", ElementType::kUInt8, {2, 3, 4}}};
};

std::shared_ptr<NativeDataset> Apply(TransformChain chain, uint64_t seed = 1) {
  auto r = TransformDataset(std::make_shared<Grid>(10), {{"img", std::move(chain)}}, seed);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.value();
}

template <typename T>
std::vector<T> ReadAs(NativeDataset& d, uint64_t i) {
  std::vector<T> out(d.fields()[0].bytes() / sizeof(T));
  uint8_t* dst[1] = {reinterpret_cast<uint8_t*>(out.data())};
  EXPECT_TRUE(d.Read(i, dst).ok());
  return out;
}

TEST(Transforms, CastNormalizeCrop) {
  auto d = Apply({MakeCast(ElementType::kFloat32),
                  MakeNormalize({0.0, 100.0}, {1.0, 2.0}, 0).value(),
                  MakeCrop({1, 1}, {2, 2}).value()});
  EXPECT_EQ(d->fields()[0].dtype, ElementType::kFloat32);
  EXPECT_EQ(d->fields()[0].shape, (std::vector<int64_t>{2, 2, 2}));
  auto v = ReadAs<float>(*d, 1);  // sample 1: values 100 + i
  // channel 0, row 1, col 1 -> element 5 -> 105; (105 - 0) / 1
  EXPECT_FLOAT_EQ(v[0], 105.0f);
  EXPECT_FLOAT_EQ(v[1], 106.0f);
  EXPECT_FLOAT_EQ(v[2], 109.0f);
  // channel 1, row 1, col 1 -> element 12 + 5 = 17 -> 117; (117 - 100) / 2
  EXPECT_FLOAT_EQ(v[4], 8.5f);
}

TEST(Transforms, CastSaturatesAndFlipReshape) {
  auto d = Apply({MakeCast(ElementType::kInt8)});
  auto v = ReadAs<int8_t>(*d, 2);  // 200.. wraps as uint8 (200..223) -> int8 cast of the integer: C conversion
  EXPECT_EQ(v[0], static_cast<int8_t>(200));
  auto f = Apply({MakeFlip(-1, 1.0).value(), MakeReshape({-1}).value()});
  EXPECT_EQ(f->fields()[0].shape, (std::vector<int64_t>{24}));
  auto w = ReadAs<uint8_t>(*f, 0);
  EXPECT_EQ(w[0], 3);
  EXPECT_EQ(w[3], 0);
  EXPECT_EQ(w[4], 7);
  auto sat = MakeCast(ElementType::kUInt8);
  FieldSpec in{"", ElementType::kFloat32, {4}};
  float src[4] = {-5.0f, 300.0f, 12.7f, NAN};
  uint8_t out[4];
  sat->Apply(in, reinterpret_cast<uint8_t*>(src), out, 0);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 255);
  EXPECT_EQ(out[2], 12);
  EXPECT_EQ(out[3], 0);
}

TEST(Transforms, RandomnessFollowsSeedEpochIndex) {
  auto d = Apply({MakeRandomCrop({2, 2}).value(), MakeFlip(-1, 0.5).value()}, 5);
  auto a = ReadAs<uint8_t>(*d, 3);
  EXPECT_EQ(ReadAs<uint8_t>(*d, 3), a);  // the same sample, same epoch: the same crop
  int differ_by_index = 0, differ_by_epoch = 0;
  for (uint64_t i = 0; i < 10; ++i) {
    auto x = ReadAs<uint8_t>(*d, i);
    for (auto& b : x) b = static_cast<uint8_t>(b - i * 100);  // positions only
    auto y = ReadAs<uint8_t>(*d, (i + 1) % 10);
    for (auto& b : y) b = static_cast<uint8_t>(b - ((i + 1) % 10) * 100);
    differ_by_index += x != y;
    d->SetEpoch(1);
    auto z = ReadAs<uint8_t>(*d, i);
    for (auto& b : z) b = static_cast<uint8_t>(b - i * 100);
    differ_by_epoch += x != z;
    d->SetEpoch(0);
  }
  EXPECT_GE(differ_by_index, 5);
  EXPECT_GE(differ_by_epoch, 5);
}

TEST(Transforms, ErrorsNameTheProblem) {
  auto base = std::make_shared<Grid>(2);
  auto bad_field = TransformDataset(base, {{"nope", {MakeCast(ElementType::kFloat32)}}}, 0);
  ASSERT_FALSE(bad_field.ok());
  EXPECT_NE(bad_field.status().message().find("has fields 'img'"), std::string::npos);
  auto too_big = TransformDataset(base, {{"img", {MakeCrop({0, 0}, {4, 4}).value()}}}, 0);
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("window (4, 4) at (0, 0) does not fit shape (2, 3, 4)"), std::string::npos)
      << too_big.status().message();
  auto norm = TransformDataset(base, {{"img", {MakeNormalize({1, 2, 3}, {1, 1, 1}, 0).value()}}}, 0);
  ASSERT_FALSE(norm.ok());
  EXPECT_NE(norm.status().message().find("3 means for axis 0 of shape (2, 3, 4), which has 2"), std::string::npos);
  EXPECT_FALSE(MakeReshape({-1, -1}).ok());
  EXPECT_FALSE(MakeNormalize({1}, {0}).ok());
  auto reshape = TransformDataset(base, {{"img", {MakeReshape({5, 5}).value()}}}, 0);
  ASSERT_FALSE(reshape.ok());
  // Chains extend: a transformed dataset transformed again is one chain.
  auto once = TransformDataset(base, {{"img", {MakeCast(ElementType::kFloat32)}}}, 0).value();
  auto twice = TransformDataset(once, {{"img", {MakeReshape({-1}).value()}}}, 0);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice.value()->fields()[0].dtype, ElementType::kFloat32);
  EXPECT_EQ(twice.value()->fields()[0].shape, (std::vector<int64_t>{24}));
  EXPECT_FLOAT_EQ(ReadAs<float>(*twice.value(), 1)[23], 123.0f);
}

TEST(NativeCollate, VariableFieldsAndKeptSamples) {
  std::vector<FieldSpec> fields = {{"a", ElementType::kInt32, {2}}, {"b", ElementType::kUInt8, {}, true}};
  std::vector<uint64_t> sizes = {8, 3, 8, 0, 8, 5};  // 3 samples x 2 fields
  NativeCollate layout(fields, 3, true, &sizes);
  std::vector<uint8_t> region(layout.total_bytes());
  for (uint64_t i = 0; i < 3; ++i) {
    int32_t a[2] = {static_cast<int32_t>(i), static_cast<int32_t>(10 * i)};
    std::memcpy(layout.Sample(region.data(), 0, i), a, 8);
    std::memset(layout.Sample(region.data(), 1, i), 'a' + static_cast<int>(i), sizes[i * 2 + 1]);
  }
  const std::vector<uint64_t> kept = {0, 2};
  layout.WriteHeader(region.data(), &kept);
  // Sample 2 moved into position 1 of the fixed field.
  int32_t a1[2];
  std::memcpy(a1, layout.Sample(region.data(), 0, 1), 8);
  EXPECT_EQ(a1[0], 2);
  EXPECT_EQ(a1[1], 20);
  BatchHeader h;
  std::memcpy(&h, region.data(), sizeof h);
  EXPECT_EQ(h.magic, kBatchMagic);
  TreeReader r(region.data() + h.tree_offset, h.tree_bytes);
  uint8_t tag;
  uint32_t n;
  ASSERT_TRUE(r.Get(&tag) && tag == static_cast<uint8_t>(Tag::kDict));
  ASSERT_TRUE(r.Get(&n) && n == 2);
  // "a": tensor [2, 2]
  uint32_t len;
  const uint8_t* key;
  ASSERT_TRUE(r.Get(&tag) && r.Get(&len) && r.GetBytes(len, &key));
  uint8_t dtype, nd;
  int64_t d0, d1;
  uint64_t off, nbytes;
  ASSERT_TRUE(r.Get(&tag) && r.Get(&dtype) && r.Get(&nd) && r.Get(&d0) && r.Get(&d1) && r.Get(&off) && r.Get(&nbytes));
  EXPECT_EQ(d0, 2);
  EXPECT_EQ(nbytes, 16u);
  // "b": a list of 2 tensors of 3 and 5 bytes.
  ASSERT_TRUE(r.Get(&tag) && r.Get(&len) && r.GetBytes(len, &key));
  ASSERT_TRUE(r.Get(&tag) && tag == static_cast<uint8_t>(Tag::kList));
  ASSERT_TRUE(r.Get(&n));
  EXPECT_EQ(n, 2u);
  for (uint64_t want : {3u, 5u}) {
    ASSERT_TRUE(r.Get(&tag) && r.Get(&dtype) && r.Get(&nd) && r.Get(&d0) && r.Get(&off) && r.Get(&nbytes));
    EXPECT_EQ(nbytes, want);
    EXPECT_EQ(d0, static_cast<int64_t>(want));
    EXPECT_EQ(region[off], want == 3 ? 'a' : 'c');
  }
}

}  // namespace
}  // namespace stoker
