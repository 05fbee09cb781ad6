// stoker.vision's C++ core: decoding (JPEG made here with TurboJPEG's
// compressor), the resampler and the transform plan.  Equality with PIL is
// tested from Python (tests/python/test_vision.py), where PIL is.
#include <turbojpeg.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "stoker/image.h"
#include "stoker/image_dataset.h"
#include "stoker/image_transforms.h"
#include "vision/resample.h"

namespace stoker {
namespace {

std::vector<uint8_t> Gradient(int h, int w) {
  std::vector<uint8_t> px(static_cast<size_t>(h * w * 3));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &px[(y * w + x) * 3];
      p[0] = static_cast<uint8_t>(x * 255 / (w - 1));
      p[1] = static_cast<uint8_t>(y * 255 / (h - 1));
      p[2] = static_cast<uint8_t>((x + y) & 255);
    }
  return px;
}

std::vector<uint8_t> Jpeg(const std::vector<uint8_t>& rgb, int h, int w, int quality = 95) {
  tjhandle t = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long n = 0;
  EXPECT_EQ(tjCompress2(t, rgb.data(), w, 0, h, TJPF_RGB, &out, &n, TJSAMP_444, quality, 0), 0);
  std::vector<uint8_t> v(out, out + n);
  tjFree(out);
  tjDestroy(t);
  return v;
}

ImageOp Op(ImageOp::Kind k, int64_t h = 0, int64_t w = 0) {
  ImageOp op;
  op.kind = k;
  op.height = h;
  op.width = w;
  return op;
}

TEST(ImageDecode, JpegRoundTripsWithinCompressionError) {
  const auto rgb = Gradient(40, 60);
  const auto jpg = Jpeg(rgb, 40, 60, 100);
  auto info = ReadImageInfo(jpg.data(), jpg.size());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info.value().height, 40);
  EXPECT_EQ(info.value().width, 60);
  std::vector<uint8_t> out;
  ASSERT_TRUE(DecodeImage(jpg.data(), jpg.size(), kDefaultMaxImagePixels, &out).ok());
  ASSERT_EQ(out.size(), rgb.size());
  int worst = 0;
  for (size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(int(out[i]) - int(rgb[i])));
  EXPECT_LE(worst, 8);
}

TEST(ImageDecode, BadInputIsDataLossNamingWhy) {
  std::vector<uint8_t> out;
  auto empty = DecodeImage(nullptr, 0, kDefaultMaxImagePixels, &out);
  EXPECT_TRUE(empty.status().IsDataLoss());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
  const uint8_t gif[] = {'G', 'I', 'F', '8', '9', 'a', 0, 0};
  auto unknown = DecodeImage(gif, sizeof(gif), kDefaultMaxImagePixels, &out);
  EXPECT_TRUE(unknown.status().IsDataLoss());
  EXPECT_NE(unknown.status().message().find("not a JPEG or PNG"), std::string::npos);
  const auto jpg = Jpeg(Gradient(64, 64), 64, 64);
  auto cut = DecodeImage(jpg.data(), jpg.size() / 2, kDefaultMaxImagePixels, &out);
  EXPECT_TRUE(cut.status().IsDataLoss());
  EXPECT_NE(cut.status().message().find("truncated"), std::string::npos) << cut.status().message();
  auto bomb = DecodeImage(jpg.data(), jpg.size(), 64 * 64 - 1, &out);
  EXPECT_TRUE(bomb.status().IsDataLoss());
  EXPECT_NE(bomb.status().message().find("decompression bomb"), std::string::npos);
}

TEST(Resample, SameSizeIsACopyOfTheWindow) {
  const auto rgb = Gradient(10, 12);
  vision::RgbView v{rgb.data(), 10, 12, 36};
  std::vector<uint8_t> out(4 * 5 * 3);
  vision::ResizeBilinear(v, 10, 12, 3, 2, 4, 5, out.data());
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 15; ++x) EXPECT_EQ(out[y * 15 + x], rgb[(3 + y) * 36 + 6 + x]);
}

TEST(Resample, WindowEqualsTheWholeResizeCropped) {
  const auto rgb = Gradient(37, 53);
  vision::RgbView v{rgb.data(), 37, 53, 53 * 3};
  std::vector<uint8_t> whole(20 * 24 * 3), part(7 * 9 * 3);
  vision::ResizeBilinear(v, 20, 24, 0, 0, 20, 24, whole.data());
  vision::ResizeBilinear(v, 20, 24, 5, 11, 7, 9, part.data());
  for (int y = 0; y < 7; ++y)
    for (int x = 0; x < 27; ++x) ASSERT_EQ(part[y * 27 + x], whole[(5 + y) * 72 + 33 + x]);
}

TEST(Resample, ConstantStaysConstant) {
  std::vector<uint8_t> rgb(31 * 29 * 3, 77);
  vision::RgbView v{rgb.data(), 31, 29, 29 * 3};
  std::vector<uint8_t> out(8 * 50 * 3);
  vision::ResizeBilinear(v, 8, 50, 0, 0, 8, 50, out.data());
  for (uint8_t b : out) EXPECT_EQ(b, 77);
}

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

TEST(ImagePipeline, NormalizeWritesFloatPlanes) {
  std::vector<uint8_t> rgb(2 * 2 * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 20);
  auto cast = Op(ImageOp::Kind::kToDtype);
  cast.dtype = ElementType::kFloat32;
  cast.scale = true;
  auto norm = Op(ImageOp::Kind::kNormalize);
  norm.mean = {0.1, 0.2, 0.3};
  norm.stddev = {0.5, 0.25, 2.0};
  auto p = ImagePipeline::Make({cast, norm}).value();
  std::vector<float> out(12);
  ASSERT_TRUE(p->Run(rgb.data(), 2, 2, 0, reinterpret_cast<uint8_t*>(out.data())).ok());
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < 4; ++i)
      EXPECT_FLOAT_EQ(out[c * 4 + i], (rgb[i * 3 + c] / 255.0f - static_cast<float>(norm.mean[c])) /
                                          static_cast<float>(norm.stddev[c]));
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

TEST(ImageFolderDataset, ReadsLabelsAndNamesTheBadFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("stoker_image_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto jpg = Jpeg(Gradient(40, 60), 40, 60);
  const std::string good = (dir / "a.jpg").string(), cut = (dir / "b.jpg").string();
  std::ofstream(good, std::ios::binary).write(reinterpret_cast<const char*>(jpg.data()), jpg.size());
  std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(jpg.data()), jpg.size() / 2);
  auto p = ImagePipeline::Make({Op(ImageOp::Kind::kCenterCrop, 32, 32)}).value();
  auto ds = ImageFolderDataset({good, cut, (dir / "missing.jpg").string()}, {3, 4, 5}, p);
  ASSERT_TRUE(ds.ok()) << ds.status().ToString();
  auto& d = *ds.value();
  EXPECT_EQ(d.structure(), SampleStructure::kTuple);
  ASSERT_EQ(d.fields().size(), 2u);
  EXPECT_EQ(d.fields()[0].shape, (std::vector<int64_t>{3, 32, 32}));
  std::vector<uint8_t> img(3 * 32 * 32);
  int64_t label = 0;
  uint8_t* dst[2] = {img.data(), reinterpret_cast<uint8_t*>(&label)};
  ASSERT_TRUE(d.Read(0, dst).ok());
  EXPECT_EQ(label, 3);
  Status bad = d.Read(1, dst);
  EXPECT_TRUE(bad.IsDataLoss());
  EXPECT_NE(bad.message().find(cut), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("truncated"), std::string::npos) << bad.message();
  Status missing = d.Read(2, dst);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("missing.jpg"), std::string::npos) << missing.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace stoker
