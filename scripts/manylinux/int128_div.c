/* 128-bit division for the manylinux build's modules (scripts/manylinux.sh).
 *
 * libc++'s std::filesystem divides 128-bit numbers, which clang lowers to
 * calls of __divti3 and friends.  zig's toolchain takes them from its
 * compiler_rt, a single object that also defines memcpy, memmove and
 * memset; once that object is in a module, the module's own calls of memcpy
 * bind to zig's generic copy instead of glibc's (4 MiB copies ran at 0.8x).
 * Defined here, before compiler_rt on the link line, they leave it out.
 * Shift and subtract: these run for file times, not in any hot loop.
 *
 * With -DSTOKER_INT128_SELF_TEST, a program that checks them against the
 * compiler's own division on edge cases and random numbers. */
typedef unsigned __int128 u128;
typedef __int128 i128;

#ifdef STOKER_INT128_SELF_TEST
#define EXPORT(name) test_##name
#else
#define EXPORT(name) name
#endif
#define HIDDEN __attribute__((visibility("hidden")))

static int clz128(u128 x) {
  const unsigned long long hi = (unsigned long long)(x >> 64), lo = (unsigned long long)x;
  return hi ? __builtin_clzll(hi) : 64 + __builtin_clzll(lo);
}

static u128 udivmod(u128 n, u128 d, u128* rem) {
  if (d == 0) __builtin_trap();  /* (what the hardware does for a 64-bit division by 0) */
  u128 q = 0;
  if (n >= d) {
    int s = clz128(d) - clz128(n);
    d <<= s;
    for (int i = 0; i <= s; ++i) {
      q <<= 1;
      if (n >= d) {
        n -= d;
        q |= 1;
      }
      d >>= 1;
    }
  }
  if (rem) *rem = n;
  return q;
}

static u128 magnitude(i128 x) { return x < 0 ? -(u128)x : (u128)x; }

HIDDEN u128 EXPORT(__udivti3)(u128 a, u128 b) { return udivmod(a, b, 0); }
HIDDEN u128 EXPORT(__umodti3)(u128 a, u128 b) {
  u128 r;
  udivmod(a, b, &r);
  return r;
}
HIDDEN i128 EXPORT(__divti3)(i128 a, i128 b) {
  const u128 q = udivmod(magnitude(a), magnitude(b), 0);
  return (a < 0) != (b < 0) ? (i128)-q : (i128)q;
}
HIDDEN i128 EXPORT(__modti3)(i128 a, i128 b) {
  u128 r;
  udivmod(magnitude(a), magnitude(b), &r);
  return a < 0 ? (i128)-r : (i128)r;
}

#ifdef STOKER_INT128_SELF_TEST
#include <stdio.h>
int main(void) {
  unsigned long long s = 88172645463325252ull;
  u128 edge[] = {0, 1, 2, 3, 7, ((u128)1 << 64) - 1, (u128)1 << 64, ((u128)1 << 127) - 1, (u128)1 << 127, ~(u128)0};
  long bad = 0, n = 0;
  for (int round = 0; round < 200000; ++round) {
    u128 a, b;
    if (round < 100) {
      a = edge[round / 10], b = edge[round % 10];
    } else {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      a = ((u128)s << 64) | (s * 2654435761u);
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      b = ((u128)(s >> (s % 64)) << (s % 3 ? 0 : 64)) | (s & 0xff);
    }
    if (b == 0) continue;
    ++n;
    bad += test___udivti3(a, b) != a / b || test___umodti3(a, b) != a % b;
    const i128 sa = (i128)a, sb = (i128)b;
    if (!(sb == -1 && sa == (i128)((u128)1 << 127)))
      bad += test___divti3(sa, sb) != sa / sb || test___modti3(sa, sb) != sa % sb;
  }
  printf("int128_div: %ld of %ld cases wrong\n", bad, n);
  return bad != 0;
}
#endif
