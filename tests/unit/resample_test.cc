// PIL's antialiased bilinear resample (src/vision/resample.cc); equality with
// Pillow itself is tested from Python.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/cpu_features.h"
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

// Every kernel this CPU runs (both passes) gives the scalar kernels' bytes:
// random pixels (the sums reach every bit of the fixed-point weights),
// downscales from 1x to 7x and upscales (tap lists of 3 to 15, odd and even),
// windows anywhere, and views holding only part of the image (the kernels'
// guards against reading past a stored row).
TEST(Resample, EveryKernelEqualsTheScalarOne) {
  std::vector<vision::RowKernel> kernels;
  if (Cpu().sse41) kernels.push_back(vision::RowKernel::kSse41);
  if (Cpu().avx2) kernels.push_back(vision::RowKernel::kAvx2);
  if (Cpu().avx512_vbmi_vnni) kernels.push_back(vision::RowKernel::kAvx512);
  if (kernels.empty()) GTEST_SKIP() << "this CPU has neither SSE4.1 nor AVX2";
  std::mt19937 rng(7);
  int compared = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int in_h = 8 + static_cast<int>(rng() % 120), in_w = 8 + static_cast<int>(rng() % 400);
    std::vector<uint8_t> rgb(static_cast<size_t>(in_h) * in_w * 3);
    for (auto& b : rgb) b = static_cast<uint8_t>(rng());
    // A stored box (left, cols) inside the image, rows all stored.
    const int left = trial % 3 == 0 ? static_cast<int>(rng() % (in_w / 2)) : 0;
    const int cols = trial % 3 == 0 ? in_w - left - static_cast<int>(rng() % ((in_w - left) / 2 + 1)) : in_w - left;
    std::vector<uint8_t> part(static_cast<size_t>(in_h) * cols * 3);
    for (int y = 0; y < in_h; ++y)
      std::copy_n(&rgb[(static_cast<size_t>(y) * in_w + left) * 3], cols * 3, &part[static_cast<size_t>(y) * cols * 3]);
    vision::RgbView v{part.data(), in_h, in_w, cols * 3, 0, left, cols};
    const int out_w = 1 + static_cast<int>(rng() % (trial % 4 == 0 ? 2 * in_w : in_w));
    const int out_h = 1 + static_cast<int>(rng() % in_h);
    // The output window whose source lies inside the stored columns.
    int64_t lo = 0, hi = 0, x0 = 0, x1 = out_w;
    while (x0 < out_w) {
      vision::SourceSpan(in_w, out_w, x0, 1, &lo, &hi);
      if (lo >= left) break;
      ++x0;
    }
    while (x1 > x0) {
      vision::SourceSpan(in_w, out_w, x1 - 1, 1, &lo, &hi);
      if (hi <= left + cols) break;
      --x1;
    }
    if (x1 <= x0) continue;
    const int64_t w = x1 - x0, top = rng() % out_h, h = 1 + rng() % (out_h - top);
    std::vector<uint8_t> want(static_cast<size_t>(h * w * 3)), got(want.size());
    vision::ResizeBilinearWith(vision::RowKernel::kScalar, v, out_h, out_w, top, x0, h, w, want.data());
    for (auto k : kernels) {
      std::fill(got.begin(), got.end(), 0);
      vision::ResizeBilinearWith(k, v, out_h, out_w, top, x0, h, w, got.data());
      ASSERT_EQ(got, want) << "kernel " << static_cast<int>(k) << ", " << in_w << "x" << in_h << " to " << out_w << "x"
                           << out_h << ", window x " << x0 << "+" << w << ", stored columns " << left << "+" << cols;
    }
    ++compared;
  }
  EXPECT_GT(compared, 200);
}

}  // namespace
}  // namespace stoker
