// IndexOrder (index_order.h).
#include "order/index_order.h"

#include <algorithm>
#include <cstring>

namespace stoker {

Status VectorOrder::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > v_.size()) return Status::InvalidArgument("order positions past its end");
  if (n) std::memcpy(out, v_.data() + pos, n * sizeof(int64_t));
  return Status::OK();
}

StridedRankOrder::StridedRankOrder(std::shared_ptr<IndexOrder> base, uint64_t total, uint32_t rank, uint32_t world)
    : base_(std::move(base)), total_(total), rank_(rank), world_(std::max<uint32_t>(1, world)) {
  size_ = total_ > rank_ ? (total_ - rank_ + world_ - 1) / world_ : 0;
}

Status StridedRankOrder::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > size_) return Status::InvalidArgument("order positions past its end");
  const uint64_t len = base_->size();
  if (len == 0) return n ? Status::InvalidArgument("an empty order has no positions") : Status::OK();
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t place = rank_ + (pos + k) * world_;  // in the padded order
    STOKER_RETURN_IF_ERROR(base_->Read(place < len ? place : (place - len) % len, 1, out + k));
  }
  return Status::OK();
}

}  // namespace stoker
