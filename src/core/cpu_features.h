// What this CPU can run, read once with CPUID (<cpuid.h>: the compiler's own
// inline assembly, nothing from a runtime library).  Not
// __builtin_cpu_supports or target_clones, whose tables live in the
// compiler's runtime library: zig's (the manylinux wheel's toolchain,
// scripts/manylinux.sh) is one object that brings its own memcpy too, which
// then took the place of glibc's inside the module (4 MiB copies at 0.8x).
#ifndef STOKER_CORE_CPU_FEATURES_H_
#define STOKER_CORE_CPU_FEATURES_H_

namespace stoker {

struct CpuFeatures {
  bool sse41 = false;
  bool sse42 = false;  // (with CRC32)
  bool avx2 = false;   // and the OS saves the YMM registers
  bool bmi2 = false;   // BMI2 and LZCNT
  // AVX-512 F, BW, VL, VBMI (byte permutes) and VNNI (multiply-adds that
  // accumulate), and the OS saves the ZMM registers: Ice Lake, Sapphire
  // Rapids and Zen 4 on.
  bool avx512_vbmi_vnni = false;
};

// Read on first use; the same for the process's life.
const CpuFeatures& Cpu();

}  // namespace stoker

#endif  // STOKER_CORE_CPU_FEATURES_H_
