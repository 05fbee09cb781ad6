// FeistelOrder (feistel_order.h).
#include "order/feistel_order.h"

#include "core/mix.h"

namespace stoker {

uint64_t FeistelOrder::SeedFor(uint64_t seed, uint64_t epoch) { return Mix64(Mix64(seed) ^ (epoch + 0x3c6ef372fe94f82bull)); }

FeistelOrder::FeistelOrder(uint64_t n, uint64_t key) : n_(n) {
  int bits = 0;
  while (bits < 64 && (n > 1 ? (n - 1) >> bits : 0) != 0) ++bits;  // bits of n - 1
  half_bits_ = bits < 2 ? 1 : (bits + 1) / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
  uint64_t k = key;
  for (int r = 0; r < kRounds; ++r) keys_[r] = k = Mix64(k + 0x9e3779b97f4a7c15ull * (r + 1));
}

uint64_t FeistelOrder::Encrypt(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (int r = 0; r < kRounds; ++r) {
    const uint64_t f = Mix64(right ^ keys_[r]) & half_mask_;
    const uint64_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t FeistelOrder::At(uint64_t pos) const {
  uint64_t x = pos;
  do {
    x = Encrypt(x);
  } while (x >= n_);  // cycle-walking: ends, since the walk from pos returns to pos < n
  return x;
}

Status FeistelOrder::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > n_) return Status::InvalidArgument("order positions past its end");
  for (uint64_t k = 0; k < n; ++k) out[k] = static_cast<int64_t>(At(pos + k));
  return Status::OK();
}

}  // namespace stoker
