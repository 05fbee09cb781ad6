// PIL's antialiased bilinear resampling (Pillow's libImaging/Resample.c
// describes the method: precomputed per-output-pixel weights over a support
// that grows with the downscale factor), written for a window of the output.
#include "vision/resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <immintrin.h>
#include <vector>

#include "core/cpu_features.h"

namespace stoker::vision {

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

// Taps of each output pixel in [first, first + count): source start, tap
// count, and `ksize` fixed-point weights.
struct Taps {
  int ksize = 0;
  std::vector<int32_t> start, len, weight;
};

// Output o's taps: the source range [lo, hi) its filter covers.
void TapRange(int64_t in_size, double scale, double support, int64_t o, int64_t* lo, int64_t* hi) {
  const double center = (static_cast<double>(o) + 0.5) * scale;
  *lo = static_cast<int64_t>(center - support + 0.5);  // truncation, as C's (int)
  if (*lo < 0) *lo = 0;
  *hi = static_cast<int64_t>(center + support + 0.5);
  if (*hi > in_size) *hi = in_size;
}

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
    int64_t lo, hi;
    TapRange(in_size, scale, support, first + o, &lo, &hi);
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

// One row of the horizontal pass, scalar.
// `in` holds the row's pixels from column `first` on, up to column `end`.
void HorizontalRowScalar(const uint8_t* in, int64_t first, int64_t /*end*/, uint8_t* out, int64_t w,
                         const int32_t* starts, const int32_t* lens, const int32_t* weights, int ks) {
  for (int64_t x = 0; x < w; ++x, out += 3) {
    const uint8_t* p = in + (starts[x] - first) * 3;
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
  }
}

// The same with SSE4.1: a pixel's three channels in the lanes of one
// register (four bytes loaded; the fourth, the next pixel's red, is
// ignored), so a tap is one widen, one 32-bit multiply, one add.  The
// arithmetic is the scalar one's, lane by lane: the results are identical.
__attribute__((target("sse4.1"))) void HorizontalRowSse41(const uint8_t* in, int64_t first, int64_t end,
                                                           uint8_t* out, int64_t w, const int32_t* starts,
                                                           const int32_t* lens, const int32_t* weights, int ks) {
  const __m128i half = _mm_set1_epi32(1 << (kPrecisionBits - 1));
  for (int64_t x = 0; x < w; ++x, out += 3) {
    const int32_t n = lens[x];
    if (starts[x] + n >= end) {  // the last pixel's fourth byte would be past the row
      HorizontalRowScalar(in, first, end, out, 1, starts + x, lens + x, weights + x * ks, ks);
      continue;
    }
    const uint8_t* p = in + (starts[x] - first) * 3;
    const int32_t* k = weights + x * ks;
    __m128i acc = half;
    for (int32_t j = 0; j < n; ++j, p += 3) {
      int32_t v;
      std::memcpy(&v, p, 4);
      const __m128i px = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(v));
      acc = _mm_add_epi32(acc, _mm_mullo_epi32(px, _mm_set1_epi32(k[j])));
    }
    acc = _mm_srai_epi32(acc, kPrecisionBits);
    const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(acc, acc), acc);  // saturates to 0..255
    const int32_t rgb = _mm_cvtsi128_si32(packed);
    std::memcpy(out, &rgb, 3);
  }
}

// One output row of the vertical pass: the sum of n source rows, all bytes
// of a row at once.  The loops vectorise; compiled for AVX2 besides the
// baseline (chosen at load time, core/cpu_features.h), eight 32-bit
// multiplies at a time against SSE2's emulated ones.
[[gnu::always_inline]] inline void VerticalRowBody(const uint8_t* in, int64_t stride, int32_t n, const int32_t* k,
                                                   int32_t* acc, int64_t row_bytes, uint8_t* out) {
  std::fill(acc, acc + row_bytes, 1 << (kPrecisionBits - 1));
  for (int32_t j = 0; j < n; ++j) {
    const uint8_t* row = in + j * stride;
    const int32_t kj = k[j];
    for (int64_t i = 0; i < row_bytes; ++i) acc[i] += row[i] * kj;
  }
  for (int64_t i = 0; i < row_bytes; ++i) out[i] = Clip8(acc[i]);
}

void VerticalRowBase(const uint8_t* in, int64_t stride, int32_t n, const int32_t* k, int32_t* acc,
                     int64_t row_bytes, uint8_t* out) {
  VerticalRowBody(in, stride, n, k, acc, row_bytes, out);
}

__attribute__((target("avx2"))) void VerticalRowAvx2(const uint8_t* in, int64_t stride, int32_t n, const int32_t* k,
                                                      int32_t* acc, int64_t row_bytes, uint8_t* out) {
  VerticalRowBody(in, stride, n, k, acc, row_bytes, out);
}

using VerticalRowFn = void (*)(const uint8_t*, int64_t, int32_t, const int32_t*, int32_t*, int64_t, uint8_t*);
const VerticalRowFn VerticalRow = Cpu().avx2 ? VerticalRowAvx2 : VerticalRowBase;

// With AVX2: two output pixels per register (lanes 0-3 and 4-7), over the
// longer of their two tap lists (the shorter one's extra weights are 0).
// Same arithmetic again.
__attribute__((target("avx2"))) void HorizontalRowAvx2(const uint8_t* in, int64_t first, int64_t end, uint8_t* out,
                                                        int64_t w, const int32_t* starts, const int32_t* lens,
                                                        const int32_t* weights, int ks) {
  const __m256i half = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
  int64_t x = 0;
  for (; x + 1 < w; x += 2, out += 6) {
    const int32_t n = std::max(lens[x], lens[x + 1]);
    if (starts[x] + n >= end || starts[x + 1] + n >= end || n > ks) break;  // the rest, one at a time
    const uint8_t* p0 = in + (starts[x] - first) * 3;
    const uint8_t* p1 = in + (starts[x + 1] - first) * 3;
    const int32_t* k0 = weights + x * ks;
    const int32_t* k1 = k0 + ks;
    __m256i acc = half;
    for (int32_t j = 0; j < n; ++j, p0 += 3, p1 += 3) {
      int32_t v0, v1;
      std::memcpy(&v0, p0, 4);
      std::memcpy(&v1, p1, 4);
      const __m256i px = _mm256_cvtepu8_epi32(_mm_unpacklo_epi32(_mm_cvtsi32_si128(v0), _mm_cvtsi32_si128(v1)));
      const __m256i kk = _mm256_set_m128i(_mm_set1_epi32(k1[j]), _mm_set1_epi32(k0[j]));
      acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(px, kk));
    }
    acc = _mm256_srai_epi32(acc, kPrecisionBits);
    const __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(acc, acc), acc);  // per 128-bit lane
    const int32_t rgb0 = _mm_cvtsi128_si32(_mm256_castsi256_si128(packed));
    const int32_t rgb1 = _mm_cvtsi128_si32(_mm256_extracti128_si256(packed, 1));
    std::memcpy(out, &rgb0, 3);
    std::memcpy(out + 3, &rgb1, 3);
  }
  if (x < w) HorizontalRowSse41(in, first, end, out, w - x, starts + x, lens + x, weights + x * ks, ks);
}

using HorizontalRowFn = void (*)(const uint8_t*, int64_t, int64_t, uint8_t*, int64_t, const int32_t*,
                                 const int32_t*, const int32_t*, int);
const HorizontalRowFn HorizontalRow = Cpu().avx2    ? HorizontalRowAvx2
                                      : Cpu().sse41 ? HorizontalRowSse41
                                                    : HorizontalRowScalar;

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
    for (int64_t y = 0; y < rows; ++y)
      HorizontalRow(src.Pixel(row0 + y, src.left), src.left, src.stored_end(), mid_data + y * w * 3, w, starts, lens,
                    weights, ks);
    hsrc = mid.data();
    hstride = w * 3;
  } else {
    hsrc = src.Pixel(row0, left);
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
    VerticalRow(hsrc + (starts[y] - row0) * hstride, hstride, lens[y], weights + y * ks, acc, row_bytes,
                dst + y * row_bytes);
  }
}

void SourceSpan(int64_t in_size, int64_t out_size, int64_t first, int64_t count, int64_t* lo, int64_t* hi) {
  if (in_size == out_size) {  // no pass along this axis
    *lo = first;
    *hi = first + count;
    return;
  }
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = std::max(scale, 1.0);
  int64_t unused;
  TapRange(in_size, scale, support, first, lo, &unused);
  TapRange(in_size, scale, support, first + count - 1, &unused, hi);
}

}  // namespace stoker::vision
