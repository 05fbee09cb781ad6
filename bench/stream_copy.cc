// Copying from memory to memory in 1 MiB pieces (a sample into a batch slot
// of a 64 MiB pool, its source a 1 GiB region out of the cache), by kind of
// store: StreamCopy with SSE2's 16-byte streaming stores (CollateCopy's and
// StreamCopy's before) and with AVX2's 32-byte ones (StreamCopy's where the
// CPU has them), AVX-512's 64-byte ones, `rep movsb` and glibc's memcpy.
// Three rounds.
//
//   cmake --build build/tests --target stoker_stream_copy_bench && build/tests/stoker_stream_copy_bench
#include <immintrin.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/copy.h"
#include "core/cpu_features.h"

static void sse2(void* dst, const void* src, size_t n) { stoker::StreamCopy(dst, src, n, stoker::StreamStores::kSse2); }
static void avx2(void* dst, const void* src, size_t n) { stoker::StreamCopy(dst, src, n, stoker::StreamStores::kAvx2); }
__attribute__((target("avx512f"))) static void avx512(void* dst, const void* src, size_t n) {
  auto* d = (uint8_t*)dst; auto* s = (const uint8_t*)src;
  for (size_t i = 0; i + 64 <= n; i += 64) _mm512_stream_si512((__m512i*)(d + i), _mm512_loadu_si512(s + i));
  _mm_sfence();
}
static void movsb(void* dst, const void* src, size_t n) { asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory"); }
int main() {
  if (!stoker::Cpu().avx2 || !__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr, "this CPU lacks AVX2 or AVX-512: the bench compares them\n");
    return 1;
  }
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
      std::printf("%-10s %.2f GB/s\n", f.name, total / s / 1e9);
    }
}
