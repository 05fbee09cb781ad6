// Helpers of stoker.vision's C++ tests: images made here (TurboJPEG's
// compressor for JPEG) and transform steps.
#ifndef STOKER_TESTS_UNIT_IMAGE_TEST_UTIL_H_
#define STOKER_TESTS_UNIT_IMAGE_TEST_UTIL_H_

#include <turbojpeg.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "stoker/image_transforms.h"

namespace stoker::testing {

// h x w RGB: red across, green down, blue diagonal.
inline std::vector<uint8_t> Gradient(int h, int w) {
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

inline std::vector<uint8_t> Jpeg(const std::vector<uint8_t>& rgb, int h, int w, int quality = 95) {
  tjhandle t = tjInitCompress();
  unsigned char* out = nullptr;
  unsigned long n = 0;
  EXPECT_EQ(tjCompress2(t, rgb.data(), w, 0, h, TJPF_RGB, &out, &n, TJSAMP_444, quality, 0), 0);
  std::vector<uint8_t> v(out, out + n);
  tjFree(out);
  tjDestroy(t);
  return v;
}

inline ImageOp Op(ImageOp::Kind k, int64_t h = 0, int64_t w = 0) {
  ImageOp op;
  op.kind = k;
  op.height = h;
  op.width = w;
  return op;
}

}  // namespace stoker::testing

#endif  // STOKER_TESTS_UNIT_IMAGE_TEST_UTIL_H_
