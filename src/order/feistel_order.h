// FeistelOrder: a keyed pseudo-random permutation of [0, n) with random
// access and no storage: position p's index is computed from (key, p) alone,
// in O(1) memory whatever n (10^11 is as cheap as 10^3).
//
// A balanced Feistel network over the smallest domain of 2^(2h) >= n
// values (h bits a half), six rounds whose round function is Mix64 of the
// half and the round's key, is a bijection of that domain; cycle-walking
// (encrypt again while the result is >= n) makes it one of [0, n), in under
// four steps on average since the domain is below 4n.  (Grain's
// index_shuffle is the same construction.)  The order is stoker's own, not
// torch's: docs/scaling.md says when to choose it.
#ifndef STOKER_ORDER_FEISTEL_ORDER_H_
#define STOKER_ORDER_FEISTEL_ORDER_H_

#include <cstdint>

#include "order/index_order.h"

namespace stoker {

class FeistelOrder : public IndexOrder {
 public:
  static constexpr int kRounds = 6;
  // `key`: the permutation's seed (a function of the user's seed and the
  // epoch: SeedFor).
  FeistelOrder(uint64_t n, uint64_t key);
  static uint64_t SeedFor(uint64_t seed, uint64_t epoch);
  uint64_t size() const override { return n_; }
  Status Read(uint64_t pos, uint64_t n, int64_t* out) override;
  // The index at position `pos` (< size()).
  uint64_t At(uint64_t pos) const;

 private:
  uint64_t Encrypt(uint64_t x) const;
  uint64_t n_;
  int half_bits_;
  uint64_t half_mask_;
  uint64_t keys_[kRounds];
};

}  // namespace stoker

#endif  // STOKER_ORDER_FEISTEL_ORDER_H_
