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
// count, and `ksize` fixed-point weights.  `pair_hi` and `pair_lo` hold the
// same weights split at bit 11 (weight = hi * 2048 + lo, each part at most
// 2^11), two taps' parts packed as the 16-bit halves of one int32, `kpairs`
// per output pixel: what _mm256_madd_epi16 multiplies by (HorizontalRowsAvx2).
struct Taps {
  int ksize = 0, kpairs = 0;
  std::vector<int32_t> start, len, weight, pair_hi, pair_lo;
};

constexpr int kSplitBits = 11;

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
  // The weights lie in [0, 2^22] (a triangle's, normalised), so each part
  // fits in a signed 16-bit lane.
  t->kpairs = (t->ksize + 1) / 2;
  t->pair_hi.assign(count * t->kpairs, 0);
  t->pair_lo.assign(count * t->kpairs, 0);
  const int32_t low_mask = (1 << kSplitBits) - 1;
  for (int64_t o = 0; o < count; ++o) {
    const int32_t* w = &t->weight[o * t->ksize];
    for (int j = 0; j < t->ksize; ++j) {
      const int shift = (j & 1) * 16;
      t->pair_hi[o * t->kpairs + j / 2] |= static_cast<int32_t>(static_cast<uint32_t>(w[j] >> kSplitBits) << shift);
      t->pair_lo[o * t->kpairs + j / 2] |= static_cast<int32_t>(static_cast<uint32_t>(w[j] & low_mask) << shift);
    }
  }
}

inline uint8_t Clip8(int32_t v) {
  v >>= kPrecisionBits;
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// One output row of the vertical pass: the sum of n source rows, all bytes
// of a row at once, through `acc`.  The loops vectorise (SSE2, the
// baseline); VerticalRowAvx2 below takes its place where the CPU has AVX2
// (chosen at load time, core/cpu_features.h) and leaves it a row's last
// bytes.
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

void VerticalRowBase(const uint8_t* in, int64_t stride, int32_t n, const int32_t* k, const int32_t* /*pair_hi*/,
                     const int32_t* /*pair_lo*/, int32_t* acc, int64_t row_bytes, uint8_t* out) {
  VerticalRowBody(in, stride, n, k, acc, row_bytes, out);
}

// The AVX2 kernels' sums, put back together: (sum by the weights' high
// parts << 11) + sum by the low parts (which holds the rounding half), then
// the fixed point's shift.  The scalar pass's value exactly.
__attribute__((target("avx2"))) inline __m256i FromParts(__m256i hi, __m256i lo) {
  return _mm256_srai_epi32(_mm256_add_epi32(_mm256_slli_epi32(hi, kSplitBits), lo), kPrecisionBits);
}

// With AVX2: sixteen bytes of the row at a time, two source rows per step,
// the sums kept in registers across the taps.  The two rows' bytes are
// interleaved as 16-bit pairs and _mm256_madd_epi16 multiplies them by the
// taps' split weights, as in HorizontalRowsAvx2; the same integers again.
__attribute__((target("avx2"))) void VerticalRowAvx2(const uint8_t* in, int64_t stride, int32_t n, const int32_t* k,
                                                      const int32_t* pair_hi, const int32_t* pair_lo, int32_t* acc,
                                                      int64_t row_bytes, uint8_t* out) {
  const __m256i half = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
  int64_t i = 0;
  for (; i + 16 <= row_bytes; i += 16) {
    // a: bytes 0-3 and 8-11 of the sixteen; b: 4-7 and 12-15 (unpack's lane order).
    __m256i a_hi = _mm256_setzero_si256(), b_hi = a_hi, a_lo = half, b_lo = half;
    for (int32_t j = 0; j < n; j += 2) {
      const __m256i r0 = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + j * stride + i)));
      const __m256i r1 = j + 1 < n ? _mm256_cvtepu8_epi16(
                                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + (j + 1) * stride + i)))
                                   : _mm256_setzero_si256();  // (no row past the taps is read)
      const __m256i lo = _mm256_unpacklo_epi16(r0, r1), hi = _mm256_unpackhi_epi16(r0, r1);
      const __m256i wh = _mm256_set1_epi32(pair_hi[j / 2]), wl = _mm256_set1_epi32(pair_lo[j / 2]);
      a_hi = _mm256_add_epi32(a_hi, _mm256_madd_epi16(lo, wh));
      b_hi = _mm256_add_epi32(b_hi, _mm256_madd_epi16(hi, wh));
      a_lo = _mm256_add_epi32(a_lo, _mm256_madd_epi16(lo, wl));
      b_lo = _mm256_add_epi32(b_lo, _mm256_madd_epi16(hi, wl));
    }
    const __m256i words = _mm256_packs_epi32(FromParts(a_hi, a_lo), FromParts(b_hi, b_lo));           // bytes 0-7 | 8-15, as 16-bit
    const __m256i bytes = _mm256_packus_epi16(words, words);  // saturates to 0..255, per lane
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm256_castsi256_si128(_mm256_permute4x64_epi64(bytes, 0x08)));  // lanes' low halves
  }
  if (i < row_bytes) VerticalRowBody(in + i, stride, n, k, acc, row_bytes - i, out + i);
}

using VerticalRowFn = void (*)(const uint8_t*, int64_t, int32_t, const int32_t*, const int32_t*, const int32_t*,
                               int32_t*, int64_t, uint8_t*);

// The horizontal taps as plain pointers (a thread_local object costs a TLS
// lookup per access inside a shared library).
struct RowTaps {
  const int32_t *start, *len, *weight, *pair_hi, *pair_lo;
  int ksize, kpairs;
};

// Outputs [x0, x1) of one row of the horizontal pass, scalar, to out + 3 * x.
// `in` holds the row's pixels from column `first` on, up to column `end`.
void HorizontalRowScalar(const uint8_t* in, int64_t first, int64_t /*end*/, uint8_t* out, int64_t x0, int64_t x1,
                         const RowTaps& t) {
  for (int64_t x = x0; x < x1; ++x) {
    const uint8_t* p = in + (t.start[x] - first) * 3;
    const int32_t* k = t.weight + x * t.ksize;
    int32_t r = 1 << (kPrecisionBits - 1), g = r, b = r;
    for (int32_t j = 0, n = t.len[x]; j < n; ++j, p += 3) {
      r += p[0] * k[j];
      g += p[1] * k[j];
      b += p[2] * k[j];
    }
    out[3 * x] = Clip8(r);
    out[3 * x + 1] = Clip8(g);
    out[3 * x + 2] = Clip8(b);
  }
}

// The same with SSE4.1: a pixel's three channels in the lanes of one
// register (four bytes loaded; the fourth, the next pixel's red, is
// ignored), so a tap is one widen, one 32-bit multiply, one add.  The
// arithmetic is the scalar one's, lane by lane: the results are identical.
__attribute__((target("sse4.1"))) void HorizontalRowSse41(const uint8_t* in, int64_t first, int64_t end,
                                                           uint8_t* out, int64_t x0, int64_t x1, const RowTaps& t) {
  const __m128i half = _mm_set1_epi32(1 << (kPrecisionBits - 1));
  for (int64_t x = x0; x < x1; ++x) {
    const int32_t n = t.len[x];
    if (t.start[x] + n >= end) {  // the last pixel's fourth byte would be past the row
      HorizontalRowScalar(in, first, end, out, x, x + 1, t);
      continue;
    }
    const uint8_t* p = in + (t.start[x] - first) * 3;
    const int32_t* k = t.weight + x * t.ksize;
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
    std::memcpy(out + 3 * x, &rgb, 3);
  }
}

// With AVX2: two output pixels per register (one per 128-bit lane), two
// taps per step, R rows at once (the rows share the taps, so each step's
// weights are loaded once for all of them).  Eight bytes from a tap pair's
// first pixel are shuffled to 16-bit (r0 r1 g0 g1 b0 b1 0 0), and
// _mm256_madd_epi16 multiplies them by the pair's weights and adds each
// channel's two products: once by the weights' high parts, once by the low
// ones (Taps: weight = hi * 2048 + lo).  Then sum = (sum_hi << 11) + sum_lo,
// which is the scalar sum exactly (every partial sum stays below 2^31), so
// the pixels are the same.  Two outputs with tap lists of different lengths
// run over the longer one (the other's extra weights are 0).
// Two outputs' packed weights for one tap pair, w[0] (the first output's)
// in every 32-bit lane of the low 128 bits, w[next] (the second's) in the
// high 128 bits.
__attribute__((target("avx2"))) inline __m256i TwoOutputs(const int32_t* w, int next) {
  return _mm256_permutevar8x32_epi32(
      _mm256_castsi128_si256(_mm_unpacklo_epi32(_mm_cvtsi32_si128(w[0]), _mm_cvtsi32_si128(w[next]))),
      _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

template <int R>
__attribute__((target("avx2"))) inline void HorizontalRowsAvx2(const uint8_t* in, int64_t in_stride, int64_t first,
                                                               int64_t end, uint8_t* out, int64_t out_stride,
                                                               int64_t x0, int64_t x1, const RowTaps& t) {
  const __m256i half = _mm256_set1_epi32(1 << (kPrecisionBits - 1));
  const __m256i spread = _mm256_broadcastsi128_si256(
      _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1));
  int64_t x = x0;
  for (; x + 1 < x1; x += 2) {
    const int32_t pairs = (std::max(t.len[x], t.len[x + 1]) + 1) / 2;
    // Eight bytes from the last pair's first pixel must lie inside the row.
    if (t.start[x] + 2 * pairs >= end || t.start[x + 1] + 2 * pairs >= end || pairs > t.kpairs) break;
    const uint8_t* p0 = in + (t.start[x] - first) * 3;
    const uint8_t* p1 = in + (t.start[x + 1] - first) * 3;
    const int32_t* hi = t.pair_hi + x * t.kpairs;
    const int32_t* lo = t.pair_lo + x * t.kpairs;
    __m256i acc_hi[R], acc_lo[R];
    for (int r = 0; r < R; ++r) acc_hi[r] = _mm256_setzero_si256(), acc_lo[r] = half;
    for (int32_t j = 0; j < pairs; ++j, p0 += 6, p1 += 6) {
      const __m256i wh = TwoOutputs(hi + j, t.kpairs), wl = TwoOutputs(lo + j, t.kpairs);
      for (int r = 0; r < R; ++r) {
        int64_t v0, v1;
        std::memcpy(&v0, p0 + r * in_stride, 8);
        std::memcpy(&v1, p1 + r * in_stride, 8);
        const __m256i px = _mm256_shuffle_epi8(
            _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_cvtsi64_si128(v0)), _mm_cvtsi64_si128(v1), 1), spread);
        acc_hi[r] = _mm256_add_epi32(acc_hi[r], _mm256_madd_epi16(px, wh));
        acc_lo[r] = _mm256_add_epi32(acc_lo[r], _mm256_madd_epi16(px, wl));
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256i acc = FromParts(acc_hi[r], acc_lo[r]);
      const __m256i packed = _mm256_packus_epi16(_mm256_packs_epi32(acc, acc), acc);  // per 128-bit lane
      const int32_t rgb0 = _mm_cvtsi128_si32(_mm256_castsi256_si128(packed));
      const int32_t rgb1 = _mm_cvtsi128_si32(_mm256_extracti128_si256(packed, 1));
      std::memcpy(out + r * out_stride + 3 * x, &rgb0, 3);
      std::memcpy(out + r * out_stride + 3 * x + 3, &rgb1, 3);
    }
  }
  for (int r = 0; r < R && x < x1; ++r)  // the rest, one at a time
    HorizontalRowSse41(in + r * in_stride, first, end, out + r * out_stride, x, x1, t);
}

__attribute__((target("avx2"))) void HorizontalRowAvx2(const uint8_t* in, int64_t in_stride, int64_t first,
                                                        int64_t end, uint8_t* out, int64_t out_stride, int64_t rows,
                                                        int64_t x0, int64_t x1, const RowTaps& t) {
  int64_t y = 0;
  for (; y + 4 <= rows; y += 4)
    HorizontalRowsAvx2<4>(in + y * in_stride, in_stride, first, end, out + y * out_stride, out_stride, x0, x1, t);
  for (; y < rows; ++y)
    HorizontalRowsAvx2<1>(in + y * in_stride, in_stride, first, end, out + y * out_stride, out_stride, x0, x1, t);
}

// With AVX-512 (BW, VL, VBMI, VNNI): four outputs per register, one per
// 128-bit lane in HorizontalRowsAvx2's layout.  Where a group of four
// consecutive outputs reads at most 21 source pixels (downscales up to about
// 4x), a row's 64 bytes from the group's first pixel are loaded once, and
// for each tap pair one byte permute (vpermb, indices made once per resize,
// the rows share them) lays the four outputs' pixels out as 16-bit values;
// vpdpwssd multiplies them by the split weights and adds them to the sums.
// A group that reads more pixels goes to HorizontalRowsAvx2.  The same
// integers again.
#define STOKER_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi,avx512vnni")))

constexpr int kGroupPixels = 21;  // 63 bytes: what one 64-byte load holds

// FromParts for sixteen sums.  (Masked forms with every lane on: GCC 12
// warns that the plain ones' undefined source "may be used uninitialized".)
STOKER_AVX512 inline __m512i FromParts512(__m512i hi, __m512i lo) {
  const __m512i sum = _mm512_add_epi32(_mm512_mask_slli_epi32(lo, 0xffff, hi, kSplitBits), lo);
  return _mm512_mask_srai_epi32(sum, 0xffff, sum, kPrecisionBits);
}

// One group's tap pair: the byte indices into the 64 loaded bytes (the
// even bytes of a lane's first twelve: r0 r1 g0 g1 b0 b1; the permute's
// mask, pair_bytes, zeroes the rest), and the four outputs' packed weights,
// each in its lane's four dwords.  An output with fewer taps than the group
// has weights of 0 past its own, so whatever byte its indices pick there
// adds nothing.
struct alignas(64) GroupPair {
  uint8_t idx[64];
  int32_t hi[16], lo[16];
};

// A group of four outputs: its first source pixel, its tap pairs in
// `pairs`, or count 0 where it reads more than kGroupPixels pixels.
struct Group {
  int32_t base = 0, first_pair = 0, count = 0;
};

// The groups of outputs [x0, x0 + 4 * groups), from the taps.
void MakeGroups(const RowTaps& t, int64_t x0, int64_t groups, std::vector<Group>* out,
                std::vector<GroupPair>* pairs) {
  out->assign(static_cast<size_t>(groups), Group{});
  pairs->clear();
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t x = x0 + 4 * g;
    const int32_t base = t.start[x];
    int32_t count = 0, span = 0;
    for (int o = 0; o < 4; ++o) {
      count = std::max(count, (t.len[x + o] + 1) / 2);
      span = std::max(span, t.start[x + o] - base + 2 * ((t.len[x + o] + 1) / 2));
    }
    Group& gr = (*out)[static_cast<size_t>(g)];
    gr.base = base;
    if (span > kGroupPixels || count > t.kpairs) continue;  // left to HorizontalRowsAvx2
    gr.first_pair = static_cast<int32_t>(pairs->size());
    gr.count = count;
    for (int32_t j = 0; j < count; ++j) {
      GroupPair p{};
      for (int o = 0; o < 4; ++o) {
        const int32_t px = t.start[x + o] - base + 2 * j;  // the pair's first pixel
        for (int c = 0; c < 3; ++c)
          for (int k = 0; k < 2; ++k) p.idx[16 * o + 4 * c + 2 * k] = static_cast<uint8_t>(3 * (px + k) + c);
        for (int d = 0; d < 4; ++d) {
          p.hi[4 * o + d] = t.pair_hi[(x + o) * t.kpairs + j];
          p.lo[4 * o + d] = t.pair_lo[(x + o) * t.kpairs + j];
        }
      }
      pairs->push_back(p);
    }
  }
}

template <int R>
STOKER_AVX512 inline void HorizontalGroups512(const uint8_t* in, int64_t in_stride, int64_t first, int64_t end,
                                              uint8_t* out, int64_t out_stride, int64_t x0, const Group* groups,
                                              int64_t n, const GroupPair* pairs, const RowTaps& t) {
  const __m512i half = _mm512_set1_epi32(1 << (kPrecisionBits - 1));
  const __mmask64 pair_bytes = 0x0555055505550555ull;  // each lane's bytes 0, 2, .., 10
  // Each lane's dword 0 (R, G, B, 0 as bytes) to twelve bytes.
  const __m128i pack = _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1);
  for (int64_t g = 0; g < n; ++g) {
    const int64_t x = x0 + 4 * g;
    const Group& gr = groups[g];
    if (gr.count == 0) {
      HorizontalRowsAvx2<R>(in, in_stride, first, end, out, out_stride, x, x + 4, t);
      continue;
    }
    const uint8_t* p = in + (gr.base - first) * 3;
    const int64_t stored = (end - gr.base) * 3;  // bytes of the row from p on
    const __mmask64 load = stored >= 64 ? ~0ull : (1ull << stored) - 1;  // (masked bytes are not read)
    __m512i src[R], acc_hi[R], acc_lo[R];
    for (int r = 0; r < R; ++r) {
      src[r] = _mm512_maskz_loadu_epi8(load, p + r * in_stride);
      acc_hi[r] = _mm512_setzero_si512();
      acc_lo[r] = half;
    }
    for (const GroupPair* q = pairs + gr.first_pair; q < pairs + gr.first_pair + gr.count; ++q) {
      const __m512i idx = _mm512_load_si512(q->idx), wh = _mm512_load_si512(q->hi), wl = _mm512_load_si512(q->lo);
      for (int r = 0; r < R; ++r) {
        const __m512i px = _mm512_maskz_permutexvar_epi8(pair_bytes, idx, src[r]);
        acc_hi[r] = _mm512_dpwssd_epi32(acc_hi[r], px, wh);
        acc_lo[r] = _mm512_dpwssd_epi32(acc_lo[r], px, wl);
      }
    }
    for (int r = 0; r < R; ++r) {
      // Sums are never negative (the weights are not), so an unsigned
      // saturation is Clip8.
      const __m128i bytes = _mm_shuffle_epi8(
          _mm512_mask_cvtusepi32_epi8(_mm_setzero_si128(), 0xffff, FromParts512(acc_hi[r], acc_lo[r])), pack);
      _mm_mask_storeu_epi8(out + r * out_stride + 3 * x, 0x0fff, bytes);
    }
  }
}

// The vertical pass the same way with AVX-512: thirty-two bytes of the row
// per step (each 128-bit lane holds eight, as 16-bit values), the rest
// through VerticalRowAvx2.
STOKER_AVX512 void VerticalRowAvx512(const uint8_t* in, int64_t stride, int32_t n, const int32_t* k,
                                     const int32_t* pair_hi, const int32_t* pair_lo, int32_t* acc, int64_t row_bytes,
                                     uint8_t* out) {
  const __m512i half = _mm512_set1_epi32(1 << (kPrecisionBits - 1));
  int64_t i = 0;
  for (; i + 32 <= row_bytes; i += 32) {
    // a: each lane's first four bytes of its eight; b: the last four.
    __m512i a_hi = _mm512_setzero_si512(), b_hi = a_hi, a_lo = half, b_lo = half;
    for (int32_t j = 0; j < n; j += 2) {
      const __m512i r0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + j * stride + i)));
      const __m512i r1 = j + 1 < n ? _mm512_cvtepu8_epi16(
                                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + (j + 1) * stride + i)))
                                   : _mm512_setzero_si512();  // (no row past the taps is read)
      const __m512i lo = _mm512_unpacklo_epi16(r0, r1), hi = _mm512_unpackhi_epi16(r0, r1);
      const __m512i wh = _mm512_set1_epi32(pair_hi[j / 2]), wl = _mm512_set1_epi32(pair_lo[j / 2]);
      a_hi = _mm512_dpwssd_epi32(a_hi, lo, wh);
      b_hi = _mm512_dpwssd_epi32(b_hi, hi, wh);
      a_lo = _mm512_dpwssd_epi32(a_lo, lo, wl);
      b_lo = _mm512_dpwssd_epi32(b_lo, hi, wl);
    }
    const __m512i words = _mm512_packs_epi32(FromParts512(a_hi, a_lo), FromParts512(b_hi, b_lo));  // in order
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        _mm512_mask_cvtusepi16_epi8(_mm256_setzero_si256(), ~0u, words));  // saturates to 0..255
  }
  if (i < row_bytes) VerticalRowAvx2(in + i, stride, n, k, pair_hi, pair_lo, acc, row_bytes - i, out + i);
}

STOKER_AVX512 void HorizontalRowAvx512(const uint8_t* in, int64_t in_stride, int64_t first, int64_t end,
                                       uint8_t* out, int64_t out_stride, int64_t rows, int64_t x0, int64_t x1,
                                       const RowTaps& t) {
  thread_local std::vector<Group> groups;
  thread_local std::vector<GroupPair> pairs;
  const int64_t n = (x1 - x0) / 4, xr = x0 + 4 * n;  // groups, and the outputs after them
  MakeGroups(t, x0, n, &groups, &pairs);
  const Group* g = groups.data();
  const GroupPair* q = pairs.data();
  int64_t y = 0;
  for (; y + 4 <= rows; y += 4) {
    HorizontalGroups512<4>(in + y * in_stride, in_stride, first, end, out + y * out_stride, out_stride, x0, g, n, q, t);
    if (xr < x1)
      HorizontalRowsAvx2<4>(in + y * in_stride, in_stride, first, end, out + y * out_stride, out_stride, xr, x1, t);
  }
  for (; y < rows; ++y) {
    HorizontalGroups512<1>(in + y * in_stride, in_stride, first, end, out + y * out_stride, out_stride, x0, g, n, q, t);
    if (xr < x1)
      HorizontalRowsAvx2<1>(in + y * in_stride, in_stride, first, end, out + y * out_stride, out_stride, xr, x1, t);
  }
}

// The scalar and SSE4.1 passes over `rows` rows.
template <void (*Row)(const uint8_t*, int64_t, int64_t, uint8_t*, int64_t, int64_t, const RowTaps&)>
void EachRow(const uint8_t* in, int64_t in_stride, int64_t first, int64_t end, uint8_t* out, int64_t out_stride,
             int64_t rows, int64_t x0, int64_t x1, const RowTaps& t) {
  for (int64_t y = 0; y < rows; ++y) Row(in + y * in_stride, first, end, out + y * out_stride, x0, x1, t);
}

// The horizontal pass over `rows` rows `in_stride` bytes apart, outputs
// [x0, x1) of each to out + y * out_stride + 3 * x.
using HorizontalRowFn = void (*)(const uint8_t*, int64_t, int64_t, int64_t, uint8_t*, int64_t, int64_t, int64_t,
                                 int64_t, const RowTaps&);

// The two passes' implementations for `k`.
struct Kernels {
  HorizontalRowFn horizontal;
  VerticalRowFn vertical;
};

Kernels KernelsOf(RowKernel k) {
  switch (k) {
    case RowKernel::kScalar: return {EachRow<HorizontalRowScalar>, VerticalRowBase};
    case RowKernel::kSse41: return {EachRow<HorizontalRowSse41>, VerticalRowBase};
    case RowKernel::kAvx2: return {HorizontalRowAvx2, VerticalRowAvx2};
    case RowKernel::kAvx512: return {HorizontalRowAvx512, VerticalRowAvx512};
    case RowKernel::kBest: break;
  }
  return Cpu().avx512_vbmi_vnni ? KernelsOf(RowKernel::kAvx512)
         : Cpu().avx2           ? KernelsOf(RowKernel::kAvx2)
         : Cpu().sse41          ? KernelsOf(RowKernel::kSse41)
                                : KernelsOf(RowKernel::kScalar);
}

void ResizeWith(const Kernels& kernels, const RgbView& src, int64_t out_h, int64_t out_w, int64_t top,
                int64_t left, int64_t h, int64_t w, uint8_t* dst) {
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
    const RowTaps taps{hx.start.data(), hx.len.data(), hx.weight.data(), hx.pair_hi.data(),
                       hx.pair_lo.data(), hx.ksize,      hx.kpairs};
    kernels.horizontal(src.Pixel(row0, src.left), src.stride, src.left, src.stored_end(), mid.data(), w * 3, rows, 0, w,
                   taps);
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
  const int32_t* pair_hi = vy.pair_hi.data();
  const int32_t* pair_lo = vy.pair_lo.data();
  const int kp = vy.kpairs;
  for (int64_t y = 0; y < h; ++y) {
    kernels.vertical(hsrc + (starts[y] - row0) * hstride, hstride, lens[y], weights + y * ks, pair_hi + y * kp,
                     pair_lo + y * kp, acc, row_bytes, dst + y * row_bytes);
  }
}

}  // namespace

void ResizeBilinear(const RgbView& src, int64_t out_h, int64_t out_w, int64_t top, int64_t left, int64_t h,
                    int64_t w, uint8_t* dst) {
  static const Kernels best = KernelsOf(RowKernel::kBest);
  ResizeWith(best, src, out_h, out_w, top, left, h, w, dst);
}

void ResizeBilinearWith(RowKernel kernel, const RgbView& src, int64_t out_h, int64_t out_w, int64_t top, int64_t left,
                        int64_t h, int64_t w, uint8_t* dst) {
  ResizeWith(KernelsOf(kernel), src, out_h, out_w, top, left, h, w, dst);
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
