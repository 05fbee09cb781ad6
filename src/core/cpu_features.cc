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
  uint32_t xcr0 = 0;
  if ((c & bit_OSXSAVE) && (c & bit_AVX)) {
    uint32_t hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0), "=d"(hi) : "c"(0));
  }
  const bool os_saves_ymm = (xcr0 & 0x06) == 0x06;  // XMM and YMM state
  const bool os_saves_zmm = (xcr0 & 0xe6) == 0xe6;  // and the opmask and ZMM state
  unsigned ext_c = 0;  // (LZCNT is in the extended leaf)
  if (__get_cpuid(0x80000001, &a, &b, &c, &d)) ext_c = c;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.bmi2 = (b & bit_BMI2) && (ext_c & bit_LZCNT);
    f.avx2 = os_saves_ymm && (b & bit_AVX2);
    f.avx512_vbmi_vnni = os_saves_zmm && (b & bit_AVX512F) && (b & bit_AVX512BW) && (b & bit_AVX512VL) &&
                         (c & bit_AVX512VBMI) && (c & bit_AVX512VNNI);
  }
#endif
  return f;
}

}  // namespace

const CpuFeatures& Cpu() {
  static const CpuFeatures f = Read();
  return f;
}

}  // namespace stoker
