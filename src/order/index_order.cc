// IndexOrder (index_order.h).
#include "order/index_order.h"

#include <algorithm>
#include <cstring>

namespace stoker {

Status IndexOrder::ReadStrided(uint64_t first, uint64_t stride, uint64_t n, int64_t* out) {
  if (stride == 1) return Read(first, n, out);
  for (uint64_t k = 0; k < n; ++k) STOKER_RETURN_IF_ERROR(Read(first + k * stride, 1, out + k));
  return Status::OK();
}

Status VectorOrder::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > v_.size()) return Status::InvalidArgument("order positions past its end");
  if (n) std::memcpy(out, v_.data() + pos, n * sizeof(int64_t));
  return Status::OK();
}

Status IotaOrder::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > n_) return Status::InvalidArgument("order positions past its end");
  for (uint64_t k = 0; k < n; ++k) out[k] = static_cast<int64_t>(pos + k);
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
  // The places inside base at once (one walk of a Mix's order, one Read of
  // a contiguous one); the padding's, past its end, one by one.
  const uint64_t first = rank_ + pos * world_;  // in the padded order
  const uint64_t inside = first >= len ? 0 : std::min(n, (len - first + world_ - 1) / world_);
  STOKER_RETURN_IF_ERROR(base_->ReadStrided(first, world_, inside, out));
  for (uint64_t k = inside; k < n; ++k) {
    const uint64_t place = first + k * world_;
    STOKER_RETURN_IF_ERROR(base_->Read((place - len) % len, 1, out + k));
  }
  return Status::OK();
}

void StridedRankOrder::NotBefore(uint64_t pos) {
  if (pos < size_ && total_ <= base_->size()) base_->NotBefore(rank_ + pos * world_);
}

ContiguousRankOrder::ContiguousRankOrder(std::shared_ptr<IndexOrder> base, uint64_t total, uint32_t rank,
                                         uint32_t world)
    : base_(std::move(base)) {
  const uint64_t w = std::max<uint32_t>(1, world);
  per_ = total / w;
  first_ = per_ * rank;
}

Status ContiguousRankOrder::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > per_) return Status::InvalidArgument("order positions past its end");
  const uint64_t len = base_->size();
  if (len == 0) return n ? Status::InvalidArgument("an empty order has no positions") : Status::OK();
  while (n > 0) {  // runs of base's places, wrapping around for the padding
    const uint64_t place = (first_ + pos) % len, k = std::min(n, len - place);
    STOKER_RETURN_IF_ERROR(base_->Read(place, k, out));
    pos += k;
    out += k;
    n -= k;
  }
  return Status::OK();
}

void ContiguousRankOrder::NotBefore(uint64_t pos) {
  if (pos < per_ && first_ + per_ <= base_->size()) base_->NotBefore(first_ + pos);
}

RemainderOrder::RemainderOrder(std::shared_ptr<IndexOrder> base, std::vector<PlaceRange> consumed)
    : base_(std::move(base)) {
  const uint64_t len = base_->size();
  std::sort(consumed.begin(), consumed.end(),
            [](const PlaceRange& a, const PlaceRange& b) { return a.begin < b.begin; });
  for (PlaceRange r : consumed) {
    r.end = std::min(r.end, len);
    if (r.begin >= r.end) continue;
    if (!ranges_.empty() && r.begin <= ranges_.back().end) {
      ranges_.back().end = std::max(ranges_.back().end, r.end);  // overlapping or touching: one range
    } else {
      ranges_.push_back(r);
    }
  }
  uint64_t taken = 0;
  for (const PlaceRange& r : ranges_) {
    kept_before_.push_back(r.begin - taken);
    taken += r.end - r.begin;
  }
  size_ = len - taken;
  if (!ranges_.empty() && ranges_[0].begin == 0) base_->NotBefore(ranges_[0].end);
}

void RemainderOrder::NotBefore(uint64_t pos) {
  if (pos >= size_) return;  // (nothing left to read: no promise needed)
  uint64_t place = 0, run = 0;
  Locate(pos, &place, &run);
  base_->NotBefore(place);
}

void RemainderOrder::Locate(uint64_t pos, uint64_t* place, uint64_t* run) const {
  // The ranges whose kept places before them are at most pos lie before it.
  const size_t i = static_cast<size_t>(std::upper_bound(kept_before_.begin(), kept_before_.end(), pos) -
                                       kept_before_.begin());
  const uint64_t taken = i == 0 ? 0 : ranges_[i - 1].end - kept_before_[i - 1];  // places consumed before
  *place = pos + (i == 0 ? 0 : taken);
  *run = (i < ranges_.size() ? ranges_[i].begin : base_->size()) - *place;
}

Status RemainderOrder::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > size_) return Status::InvalidArgument("order positions past its end");
  while (n > 0) {
    uint64_t place = 0, run = 0;
    Locate(pos, &place, &run);
    const uint64_t k = std::min(n, run);
    STOKER_RETURN_IF_ERROR(base_->Read(place, k, out));
    pos += k;
    out += k;
    n -= k;
  }
  return Status::OK();
}

std::vector<PlaceRange> ConsumedPlaces(const std::vector<PlaceRange>& read, uint32_t world, bool strided,
                                       uint64_t total) {
  const uint64_t w = std::max<uint32_t>(1, world);
  std::vector<PlaceRange> out;
  for (const PlaceRange& r : read) {
    if (r.begin >= r.end) continue;
    if (strided) {
      out.push_back({r.begin * w, r.end * w});
    } else {
      const uint64_t per = total / w;
      for (uint64_t rank = 0; rank < w; ++rank) out.push_back({rank * per + r.begin, rank * per + r.end});
    }
  }
  return out;
}

}  // namespace stoker
