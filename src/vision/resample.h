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

// An image of height x width RGB pixels of which rows of `cols` pixels
// from pixel (top, left) on are in memory at `data`, `stride` bytes apart
// (all of it by default).  A partial decode stores only part of an image.
struct RgbView {
  const uint8_t* data = nullptr;
  int64_t height = 0, width = 0, stride = 0;
  int64_t top = 0, left = 0, cols = -1;  // cols < 0: width - left
  const uint8_t* Pixel(int64_t y, int64_t x) const { return data + (y - top) * stride + (x - left) * 3; }
  int64_t stored_end() const { return left + (cols < 0 ? width - left : cols); }  // one past the last column
};

// The window [top, top + h) x [left, left + w) of `src` resized to
// out_h x out_w, written to `dst` (h x w x 3, rows of w * 3 bytes).  Reads
// only the source pixels SourceSpan names.
void ResizeBilinear(const RgbView& src, int64_t out_h, int64_t out_w, int64_t top, int64_t left, int64_t h,
                    int64_t w, uint8_t* dst);

// The two passes' implementations, for tests that hold each to the scalar
// ones (all compute the same integers): kScalar and kSse41 run the vertical
// pass as the compiler vectorises it for the baseline, kAvx2 both passes
// with AVX2, kAvx512 both with AVX-512 (BW, VBMI, VNNI).  kBest: the fastest this CPU runs, which ResizeBilinear uses;
// naming one the CPU lacks is undefined.
enum class RowKernel { kScalar, kSse41, kAvx2, kAvx512, kBest };
void ResizeBilinearWith(RowKernel kernel, const RgbView& src, int64_t out_h, int64_t out_w, int64_t top, int64_t left,
                        int64_t h, int64_t w, uint8_t* dst);

// The source pixels [*lo, *hi) along one axis that outputs [first,
// first + count) of a resize from in_size to out_size read.
void SourceSpan(int64_t in_size, int64_t out_size, int64_t first, int64_t count, int64_t* lo, int64_t* hi);

}  // namespace stoker::vision

#endif  // STOKER_VISION_RESAMPLE_H_
