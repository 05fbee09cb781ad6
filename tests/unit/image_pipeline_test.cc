// The transform plan (src/vision/image_pipeline.cc).
#include <gtest/gtest.h>

#include <vector>

#include "image_test_util.h"
#include "stoker/image_transforms.h"

namespace stoker {
namespace {

using testing::Gradient;
using testing::Op;

TEST(ImagePipeline, RejectsWhatItCannotRun) {
  auto norm = Op(ImageOp::Kind::kNormalize);
  norm.mean = {0.5};
  norm.stddev = {0.5};
  auto r = ImagePipeline::Make({norm});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ToDtype"), std::string::npos);
  auto cast = Op(ImageOp::Kind::kToDtype);
  r = ImagePipeline::Make({cast, Op(ImageOp::Kind::kCenterCrop, 4, 4)});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("after every resize"), std::string::npos);
  EXPECT_FALSE(ImagePipeline::Make({Op(ImageOp::Kind::kCenterCrop, 0, 4)}).ok());
  auto flip = Op(ImageOp::Kind::kHorizontalFlip);
  flip.p = 1.5;
  EXPECT_FALSE(ImagePipeline::Make({flip}).ok());
}

TEST(ImagePipeline, FixedSizeAndOutputSize) {
  auto p = ImagePipeline::Make({Op(ImageOp::Kind::kResize, 256), Op(ImageOp::Kind::kCenterCrop, 224, 200)}).value();
  EXPECT_TRUE(p->fixed_size());
  EXPECT_EQ(p->fixed_height(), 224);
  EXPECT_EQ(p->fixed_width(), 200);
  auto q = ImagePipeline::Make({Op(ImageOp::Kind::kResize, 100)}).value();
  EXPECT_FALSE(q->fixed_size());
  int64_t h, w;
  q->OutputSize(375, 500, &h, &w);  // torchvision: int(100 * 500 / 375) = 133
  EXPECT_EQ(h, 100);
  EXPECT_EQ(w, 133);
  q->OutputSize(500, 375, &h, &w);
  EXPECT_EQ(h, 133);
  EXPECT_EQ(w, 100);
}

TEST(ImagePipeline, CenterCropPadsWithZerosAndFlipMirrors) {
  const auto rgb = Gradient(4, 6);
  auto flip = Op(ImageOp::Kind::kHorizontalFlip);
  flip.p = 1.0;
  auto p = ImagePipeline::Make({Op(ImageOp::Kind::kCenterCrop, 6, 6), flip}).value();
  std::vector<uint8_t> out(3 * 6 * 6);
  ASSERT_TRUE(p->Run(rgb.data(), 4, 6, 0, out.data()).ok());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 6; ++x) {
        const uint8_t got = out[(c * 6 + y) * 6 + x];
        const int sy = y - 1;  // one row of padding above and below
        const uint8_t want = sy < 0 || sy >= 4 ? 0 : rgb[(sy * 6 + (5 - x)) * 3 + c];
        ASSERT_EQ(got, want) << c << " " << y << " " << x;
      }
}

// ToDtype(float32, scale=True), then Normalize(mean, std).
std::vector<ImageOp> ToFloatAndNormalize(std::vector<double> mean, std::vector<double> stddev) {
  auto cast = Op(ImageOp::Kind::kToDtype);
  cast.dtype = ElementType::kFloat32;
  cast.scale = true;
  auto norm = Op(ImageOp::Kind::kNormalize);
  norm.mean = std::move(mean);
  norm.stddev = std::move(stddev);
  return {cast, norm};
}

TEST(ImagePipeline, NormalizeWritesFloatPlanes) {
  std::vector<uint8_t> rgb(2 * 2 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 20);
  const auto ops = ToFloatAndNormalize({0.1, 0.2, 0.3}, {0.5, 0.25, 2.0});
  const ImageOp& norm = ops[1];
  auto p = ImagePipeline::Make(ops).value();
  std::vector<float> out(12);
  ASSERT_TRUE(p->Run(rgb.data(), 2, 2, 0, reinterpret_cast<uint8_t*>(out.data())).ok());
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 4; ++i)
      EXPECT_FLOAT_EQ(out[c * 4 + i], (rgb[i * 3 + c] / 255.0f - static_cast<float>(norm.mean[c])) /
                                          static_cast<float>(norm.stddev[c]));
}

// Large float outputs take the streamed (non-temporal) writer: its values
// equal the formula's for every pixel, flipped or not, whatever the
// destination's alignment, and for sizes it leaves to the plain writer.
TEST(ImagePipeline, LargeFloatPlanesEqualTheFormulaFlippedOrNot) {
  const auto ops = ToFloatAndNormalize({0.485, 0.456, 0.406}, {0.229, 0.224, 0.225});
  const ImageOp& norm = ops[1];
  for (int64_t h : {170, 171}) {  // 170 x 190 is a multiple of 4 pixels; 171 x 191 is not
    const int64_t w = h + 20;
    std::vector<uint8_t> rgb(static_cast<size_t>(h * w * 3));
    for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 7 + i / 97);
    for (double p : {0.0, 1.0}) {
      auto flip = Op(ImageOp::Kind::kHorizontalFlip);
      flip.p = p;
      auto pipe = ImagePipeline::Make({flip, ops[0], ops[1]}).value();
      for (size_t offset : {0, 1, 2, 3}) {  // floats past a 16-byte boundary
        std::vector<float> buf(static_cast<size_t>(3 * h * w) + 4, -1.0f);
        ASSERT_TRUE(pipe->Run(rgb.data(), h, w, 0, reinterpret_cast<uint8_t*>(buf.data() + offset)).ok());
        for (int c = 0; c < 3; ++c)
          for (int64_t y = 0; y < h; ++y)
            for (int64_t x = 0; x < w; ++x) {
              const int64_t sx = p > 0 ? w - 1 - x : x;
              const float want = (static_cast<float>(rgb[(y * w + sx) * 3 + c]) / 255.0f -
                                  static_cast<float>(norm.mean[c])) /
                                 static_cast<float>(norm.stddev[c]);
              ASSERT_EQ(buf[offset + (c * h + y) * w + x], want) << h << " " << p << " " << offset << " " << c << " "
                                                                 << y << " " << x;
            }
        for (size_t i = 0; i < offset; ++i) ASSERT_EQ(buf[i], -1.0f);
        for (size_t i = offset + 3 * h * w; i < buf.size(); ++i) ASSERT_EQ(buf[i], -1.0f);
      }
    }
  }
}

TEST(ImagePipeline, RandomStepsAreAFunctionOfTheWord) {
  const auto rgb = Gradient(50, 70);
  auto rrc = Op(ImageOp::Kind::kRandomResizedCrop, 16, 16);
  auto p = ImagePipeline::Make({rrc, Op(ImageOp::Kind::kHorizontalFlip)}).value();
  std::vector<uint8_t> a(3 * 16 * 16), b(a.size()), c(a.size());
  ASSERT_TRUE(p->Run(rgb.data(), 50, 70, 42, a.data()).ok());
  ASSERT_TRUE(p->Run(rgb.data(), 50, 70, 42, b.data()).ok());
  ASSERT_TRUE(p->Run(rgb.data(), 50, 70, 43, c.data()).ok());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(ImagePipeline, RandomCropLargerThanTheImage) {
  const auto rgb = Gradient(8, 8);
  auto crop = Op(ImageOp::Kind::kRandomCrop, 10, 6);
  auto p = ImagePipeline::Make({crop}).value();
  std::vector<uint8_t> out(3 * 10 * 6);
  Status st = p->Run(rgb.data(), 8, 8, 1, out.data());
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("pad_if_needed"), std::string::npos);
  crop.pad_if_needed = true;
  p = ImagePipeline::Make({crop}).value();
  EXPECT_TRUE(p->Run(rgb.data(), 8, 8, 1, out.data()).ok());
}

}  // namespace
}  // namespace stoker
