// Mix64: the splitmix64 finaliser, a fast well-mixed hash of a 64-bit word
// (seeds per sample / per epoch; not for security).
#ifndef STOKER_CORE_MIX_H_
#define STOKER_CORE_MIX_H_

#include <cstdint>

namespace stoker {

inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace stoker

#endif  // STOKER_CORE_MIX_H_
