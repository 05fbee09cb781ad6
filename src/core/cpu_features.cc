#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstdint>

namespace stoker {

namespace {

CpuFeatures Read() {
  CpuFeatures f;
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  f.sse41 = c & bit_SSE4_1;
  f.sse42 = c & bit_SSE4_2;
  const bool os_saves_ymm = [&] {
    if (!(c & bit_OSXSAVE) || !(c & bit_AVX)) return false;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;  // XMM and YMM state
  }();
  if (os_saves_ymm && __get_cpuid_count(7, 0, &a, &b, &c, &d)) f.avx2 = b & bit_AVX2;
#endif
  return f;
}

}  // namespace

const CpuFeatures& Cpu() {
  static const CpuFeatures f = Read();
  return f;
}

}  // namespace stoker
