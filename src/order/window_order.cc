// WindowOrder (window_order.h).
#include "order/window_order.h"

#include <algorithm>
#include <numeric>

#include "core/mix.h"
#include "order/feistel_order.h"

namespace stoker {

WindowOrder::WindowOrder(const std::vector<uint64_t>& sizes, uint32_t window, uint64_t key)
    : window_(std::max<uint32_t>(1, window)), key_(key) {
  const size_t P = sizes.size();
  first_.assign(P, 0);
  for (size_t s = 1; s < P; ++s) first_[s] = first_[s - 1] + sizes[s - 1];
  shard_.resize(P);
  std::iota(shard_.begin(), shard_.end(), uint32_t{0});
  MixShuffle(shard_.begin(), shard_.end(), Mix64(key ^ 0x6a09e667f3bcc909ull));
  cum_.assign(P + 1, 0);
  for (size_t k = 0; k < P; ++k) cum_[k + 1] = cum_[k] + sizes[shard_[k]];
}

uint64_t WindowOrder::At(uint64_t pos) const {
  // The window holding pos, its positions [begin, end), then pos's place
  // in the window's shuffle, then the shard and row that place is.
  const size_t k = static_cast<size_t>(std::upper_bound(cum_.begin(), cum_.end(), pos) - cum_.begin()) - 1;
  const size_t w0 = k / window_ * window_, w1 = std::min(shard_.size(), w0 + window_);
  const uint64_t begin = cum_[w0], end = cum_[w1];
  const uint64_t q = begin + FeistelOrder(end - begin, Mix64(key_ ^ Mix64(w0 + 1))).At(pos - begin);
  const size_t j = static_cast<size_t>(std::upper_bound(cum_.begin() + static_cast<ptrdiff_t>(w0),
                                                        cum_.begin() + static_cast<ptrdiff_t>(w1) + 1, q) -
                                       cum_.begin()) - 1;
  return first_[shard_[j]] + (q - cum_[j]);
}

Status WindowOrder::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > size()) return Status::InvalidArgument("order positions past its end");
  for (uint64_t k = 0; k < n; ++k) out[k] = static_cast<int64_t>(At(pos + k));
  return Status::OK();
}

}  // namespace stoker
