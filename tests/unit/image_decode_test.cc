// stoker.vision decoding (src/vision/image_decode.cc); equality with PIL is
// tested from Python (tests/python/test_vision.py), where PIL is.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "image_test_util.h"
#include "stoker/image.h"

namespace stoker {
namespace {

using testing::Gradient;
using testing::Jpeg;

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

}  // namespace
}  // namespace stoker
