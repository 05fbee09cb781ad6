// float16 / bfloat16 <-> float conversions (round to nearest even).
#ifndef STOKER_IO_HALF_H_
#define STOKER_IO_HALF_H_

#include <cmath>
#include <cstdint>
#include <cstring>

namespace stoker {

inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero
    const float a = std::fabs(f) * 16777216.0f;  // 2^24
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a)));
  }
  const uint32_t r = absx + 0xfffu + ((absx >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) x = sign | 0x7f800000u | (man << 13);
  else x = sign | ((exp + 112) << 23) | (man << 13);
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float BFloat16ToFloat(uint16_t b) {
  const uint32_t x = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

}  // namespace stoker

#endif  // STOKER_IO_HALF_H_
