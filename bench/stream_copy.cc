// Copying from memory to memory in 1 MiB pieces (a sample into a batch slot
// of a 64 MiB pool, its source a 1 GiB region out of the cache), by kind of
// store: SSE2's 16-byte streaming stores (CollateCopy's and StreamCopy's
// before), AVX2's 32-byte ones (StreamCopy where the CPU has them),
// AVX-512's 64-byte ones, `rep movsb` and glibc's memcpy.  Three rounds.
//
//   g++ -O2 -o /tmp/stream_copy bench/stream_copy.cc && /tmp/stream_copy
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <sys/mman.h>
static void sse2(void* dst, const void* src, size_t n) {
  auto* d = (uint8_t*)dst; auto* s = (const uint8_t*)src;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)(s + i)), b = _mm_loadu_si128((const __m128i*)(s + i + 16)),
            c = _mm_loadu_si128((const __m128i*)(s + i + 32)), e = _mm_loadu_si128((const __m128i*)(s + i + 48));
    _mm_stream_si128((__m128i*)(d + i), a); _mm_stream_si128((__m128i*)(d + i + 16), b);
    _mm_stream_si128((__m128i*)(d + i + 32), c); _mm_stream_si128((__m128i*)(d + i + 48), e);
  }
  _mm_sfence();
}
__attribute__((target("avx2"))) static void avx2(void* dst, const void* src, size_t n) {
  auto* d = (uint8_t*)dst; auto* s = (const uint8_t*)src;
  for (size_t i = 0; i + 64 <= n; i += 64) {
    __m256i a = _mm256_loadu_si256((const __m256i*)(s + i)), b = _mm256_loadu_si256((const __m256i*)(s + i + 32));
    _mm256_stream_si256((__m256i*)(d + i), a); _mm256_stream_si256((__m256i*)(d + i + 32), b);
  }
  _mm_sfence();
}
__attribute__((target("avx512f"))) static void avx512(void* dst, const void* src, size_t n) {
  auto* d = (uint8_t*)dst; auto* s = (const uint8_t*)src;
  for (size_t i = 0; i + 64 <= n; i += 64) _mm512_stream_si512((__m512i*)(d + i), _mm512_loadu_si512(s + i));
  _mm_sfence();
}
static void movsb(void* dst, const void* src, size_t n) { asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory"); }
int main() {
  const size_t total = size_t(1) << 30, piece = 1 << 20;  // 1 GiB source and destination, copied in 1 MiB pieces
  auto* src = (uint8_t*)mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  auto* dst = (uint8_t*)mmap(nullptr, 64 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  memset(src, 1, total); memset(dst, 2, 64 << 20);
  struct { const char* name; void (*f)(void*, const void*, size_t); } fs[] = {{"sse2-nt", sse2}, {"avx2-nt", avx2}, {"avx512-nt", avx512}, {"rep movsb", movsb}, {"memcpy", [](void* d, const void* s, size_t n) { memcpy(d, s, n); }}};
  for (int round = 0; round < 3; ++round)
    for (auto& f : fs) {
      auto t0 = std::chrono::steady_clock::now();
      for (size_t off = 0; off < total; off += piece) f.f(dst + (off % (64 << 20)), src + off, piece);  // dest cycles over 64 MiB (a slot pool)
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      printf("%-10s %.2f GB/s\n", f.name, total / s / 1e9);
    }
}
