// core/cpu_features: CPUID read by hand agrees with the compiler's own
// detection (__builtin_cpu_supports, which the library itself avoids).
#include "core/cpu_features.h"

#include <gtest/gtest.h>

namespace stoker {
namespace {

TEST(CpuFeatures, AgreeWithTheCompilersDetection) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  EXPECT_EQ(Cpu().sse41, static_cast<bool>(__builtin_cpu_supports("sse4.1")));
  EXPECT_EQ(Cpu().sse42, static_cast<bool>(__builtin_cpu_supports("sse4.2")));
  EXPECT_EQ(Cpu().avx2, static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(&Cpu(), &Cpu());  // read once
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

}  // namespace
}  // namespace stoker
