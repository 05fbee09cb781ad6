// Antialiased bilinear resize of 8-bit RGB, as PIL's Image.resize(...,
// BILINEAR) computes it (and so torchvision's Resize on PIL images and on
// tensors with antialias=True): a triangle filter widened by the downscale
// factor, fixed-point weights of 22 bits, the horizontal pass first and
// rounded to 8 bits, then the vertical pass.  Only a window of the output is
// computed, so resize-then-crop costs the crop's pixels only.
#ifndef STOKER_VISION_RESAMPLE_H_
#define STOKER_VISION_RESAMPLE_H_

#include <cstdint>

namespace stoker::vision {

// Rows of RGB pixels; `stride` bytes from one row to the next.
struct RgbView {
  const uint8_t* data = nullptr;
  int64_t height = 0, width = 0, stride = 0;
};

// The window [top, top + h) x [left, left + w) of `src` resized to
// out_h x out_w, written to `dst` (h x w x 3, rows of w * 3 bytes).
void ResizeBilinear(const RgbView& src, int64_t out_h, int64_t out_w, int64_t top, int64_t left, int64_t h,
                    int64_t w, uint8_t* dst);

}  // namespace stoker::vision

#endif  // STOKER_VISION_RESAMPLE_H_
