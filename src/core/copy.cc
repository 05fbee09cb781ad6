#include "core/copy.h"

#include <cstdint>
#include <cstring>

#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace stoker {

#if defined(__x86_64__)
namespace {

// `lines` whole 64-byte lines from s to d (d line-aligned) with streaming
// stores: 32-byte ones (AVX2), or 16-byte ones (SSE2: every x86-64 CPU).
__attribute__((target("avx2"))) void StreamLinesAvx2(uint8_t* d, const uint8_t* s, size_t lines) {
  for (size_t i = 0; i < lines * 64; i += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
  }
}

void StreamLinesSse2(uint8_t* d, const uint8_t* s, size_t lines) {
  for (size_t i = 0; i < lines * 64; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + i + 48), e);
  }
}

}  // namespace
#endif

void CollateCopy(void* dst, const void* src, size_t n) {
  if (n >= kCollateCopyStreamingMin) {
    StreamCopy(dst, src, n);
    return;
  }
  std::memcpy(dst, src, n);
}

void StreamCopy(void* dst, const void* src, size_t n, StreamStores stores) {
#if defined(__x86_64__)
  if (n >= 128) {  // (a line at least, whatever the head)
    auto* d = static_cast<uint8_t*>(dst);
    const auto* s = static_cast<const uint8_t*>(src);
    // Plain stores up to a cache line's boundary of the destination,
    // streaming stores for the whole lines, plain for the tail.
    const size_t head = (64 - (reinterpret_cast<uintptr_t>(d) & 63)) & 63;
    std::memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    static const bool have_avx2 = Cpu().avx2;
    const bool avx2 = stores == StreamStores::kAvx2 || (stores == StreamStores::kBest && have_avx2);
    const size_t lines = n / 64;
    if (avx2)
      StreamLinesAvx2(d, s, lines);
    else
      StreamLinesSse2(d, s, lines);
    _mm_sfence();  // the streaming stores are visible before whatever publishes the batch
    std::memcpy(d + lines * 64, s + lines * 64, n - lines * 64);
    return;
  }
#endif
  (void)stores;  // (one kind of copy elsewhere)
  std::memcpy(dst, src, n);
}

}  // namespace stoker
