// PIL's antialiased bilinear resample (src/vision/resample.cc); equality with
// Pillow itself is tested from Python.
#include <gtest/gtest.h>

#include <vector>

#include "image_test_util.h"
#include "vision/resample.h"

namespace stoker {
namespace {

using testing::Gradient;

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

}  // namespace
}  // namespace stoker
