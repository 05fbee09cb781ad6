// PIL's antialiased bilinear resampling (Pillow's libImaging/Resample.c
// describes the method: precomputed per-output-pixel weights over a support
// that grows with the downscale factor), written for a window of the output.
#include "vision/resample.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace stoker::vision {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

// Taps of each output pixel in [first, first + count): source start, tap
// count, and `ksize` fixed-point weights.
struct Taps {
  int ksize = 0;
  std::vector<int32_t> start, len, weight;
};

void ComputeTaps(int64_t in_size, int64_t out_size, int64_t first, int64_t count, Taps* t) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;  // the triangle's support is 1
  t->ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t->start.resize(count);
  t->len.resize(count);
  t->weight.assign(count * t->ksize, 0);
  std::vector<double> k(t->ksize);
  const double ss = 1.0 / filterscale;
  for (int64_t o = 0; o < count; ++o) {
    const double center = (static_cast<double>(first + o) + 0.5) * scale;
    int64_t lo = static_cast<int64_t>(center - support + 0.5);  // truncation, as C's (int)
    if (lo < 0) lo = 0;
    int64_t hi = static_cast<int64_t>(center + support + 0.5);
    if (hi > in_size) hi = in_size;
    const int64_t n = std::min<int64_t>(hi - lo, t->ksize);
    double total = 0.0;
    for (int64_t x = 0; x < n; ++x) {
      const double v = std::fabs((static_cast<double>(x + lo) - center + 0.5) * ss);
      k[x] = v < 1.0 ? 1.0 - v : 0.0;
      total += k[x];
    }
    int32_t* w = &t->weight[o * t->ksize];
    for (int64_t x = 0; x < n; ++x) {
      const double v = total != 0.0 ? k[x] / total : 0.0;
      w[x] = static_cast<int32_t>(v < 0 ? -0.5 + v * (1 << kPrecisionBits) : 0.5 + v * (1 << kPrecisionBits));
    }
    t->start[o] = static_cast<int32_t>(lo);
    t->len[o] = static_cast<int32_t>(n);
  }
}

inline uint8_t Clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

}  // namespace

void ResizeBilinear(const RgbView& src, int64_t out_h, int64_t out_w, int64_t top, int64_t left, int64_t h,
                    int64_t w, uint8_t* dst) {
  thread_local Taps hx, vy;
  thread_local std::vector<uint8_t> mid;
  const bool need_h = out_w != src.width;
  const bool need_v = out_h != src.height;
  // Source rows the vertical pass reads.
  int64_t row0 = top, rows = h;
  if (need_v) {
    ComputeTaps(src.height, out_h, top, h, &vy);
    row0 = vy.start[0];
    rows = vy.start[h - 1] + vy.len[h - 1] - row0;
  }
  // Horizontal pass: rows [row0, row0 + rows) to `mid` (rows x w x 3).
  const uint8_t* hsrc;
  int64_t hstride;
  if (need_h) {
    ComputeTaps(src.width, out_w, left, w, &hx);
    mid.resize(static_cast<size_t>(rows * w * 3));
    // Plain pointers: thread_local objects cost a TLS lookup per access
    // inside a shared library.
    const int ks = hx.ksize;
    const int32_t* starts = hx.start.data();
    const int32_t* lens = hx.len.data();
    const int32_t* weights = hx.weight.data();
    uint8_t* mid_data = mid.data();
    for (int64_t y = 0; y < rows; ++y) {
      const uint8_t* in = src.data + (row0 + y) * src.stride;
      uint8_t* out = mid_data + y * w * 3;
      for (int64_t x = 0; x < w; ++x) {
        const uint8_t* p = in + static_cast<int64_t>(starts[x]) * 3;
        const int32_t* k = weights + x * ks;
        int32_t r = 1 << (kPrecisionBits - 1), g = r, b = r;
        for (int32_t j = 0, n = lens[x]; j < n; ++j, p += 3) {
          r += p[0] * k[j];
          g += p[1] * k[j];
          b += p[2] * k[j];
        }
        out[0] = Clip8(r);
        out[1] = Clip8(g);
        out[2] = Clip8(b);
        out += 3;
      }
    }
    hsrc = mid.data();
    hstride = w * 3;
  } else {
    hsrc = src.data + row0 * src.stride + left * 3;
    hstride = src.stride;
  }
  if (!need_v) {
    for (int64_t y = 0; y < h; ++y) std::copy_n(hsrc + y * hstride, w * 3, dst + y * w * 3);
    return;
  }
  // Vertical pass: every output row sums its source rows, all bytes of a
  // row at once (the inner loop vectorises).
  const int ks = vy.ksize;
  const int64_t row_bytes = w * 3;
  thread_local std::vector<int32_t> acc_buf;
  acc_buf.resize(static_cast<size_t>(row_bytes));
  int32_t* acc = acc_buf.data();
  const int32_t* starts = vy.start.data();
  const int32_t* lens = vy.len.data();
  const int32_t* weights = vy.weight.data();
  for (int64_t y = 0; y < h; ++y) {
    std::fill(acc, acc + row_bytes, 1 << (kPrecisionBits - 1));
    const int32_t* k = weights + y * ks;
    for (int32_t j = 0, n = lens[y]; j < n; ++j) {
      const uint8_t* in = hsrc + (starts[y] - row0 + j) * hstride;
      const int32_t kj = k[j];
      for (int64_t i = 0; i < row_bytes; ++i) acc[i] += in[i] * kj;
    }
    uint8_t* out = dst + y * row_bytes;
    for (int64_t i = 0; i < row_bytes; ++i) out[i] = Clip8(acc[i]);
  }
}

}  // namespace stoker::vision
