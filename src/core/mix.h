// Mix64: the splitmix64 finaliser, a fast well-mixed hash of a 64-bit word
// (seeds per sample / per epoch; not for security).
#ifndef STOKER_CORE_MIX_H_
#define STOKER_CORE_MIX_H_

#include <cstdint>
#include <utility>

namespace stoker {

inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The seed of sample `index` in `epoch` under a loader's `seed`
// (stoker.DataLoader(sample_seeds=True)): a function of the three alone.
inline uint64_t SampleSeed(uint64_t seed, uint64_t epoch, uint64_t index) {
  return Mix64(Mix64(seed ^ Mix64(epoch)) ^ index);
}

// Fisher-Yates over [b, e) with Mix64 as the generator, from `state`: the
// same permutation for the same state on every machine.
template <class It>
void MixShuffle(It b, It e, uint64_t state) {
  for (uint64_t i = static_cast<uint64_t>(e - b); i > 1; --i) {
    state = Mix64(state);
    const uint64_t j = static_cast<uint64_t>((static_cast<__uint128_t>(state) * i) >> 64);  // [0, i)
    std::swap(b[i - 1], b[j]);
  }
}

}  // namespace stoker

#endif  // STOKER_CORE_MIX_H_
