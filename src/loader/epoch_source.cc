// EpochSource (epoch_source.h).
#include "loader/epoch_source.h"

#include <algorithm>

#include "loader/epoch_runner.h"

namespace stoker {

void EpochSource::Begin(Order order, uint64_t batch_size, bool drop_last) {
  order_ = std::move(order);
  bs_ = batch_size;
  batches_ = EpochRunner::Batches(order_->size(), bs_, drop_last);
  next_ = 0;
}

Result<bool> EpochSource::Next(TaskSpec* spec) {
  if (next_ >= batches_) return false;
  const uint64_t lo = next_ * per(), hi = std::min<uint64_t>(lo + per(), order_->size());
  spec->kind = bs_ ? TaskKind::kIndices : TaskKind::kIndex;
  spec->payload.resize((hi - lo) * sizeof(int64_t));
  STOKER_RETURN_IF_ERROR(order_->Read(lo, hi - lo, reinterpret_cast<int64_t*>(spec->payload.data())));
  spec->token = next_ + 1;  // 0 means "no token"
  ++next_;
  return true;
}

Result<bool> EpochSource::Skip() {
  if (next_ >= batches_) return false;
  ++next_;
  return true;
}

std::vector<int64_t> EpochSource::BatchIndices(uint64_t token) const {
  if (token == 0 || token > batches_) return {};
  const uint64_t lo = (token - 1) * per(), hi = std::min<uint64_t>(lo + per(), order_->size());
  std::vector<int64_t> out(hi - lo);
  if (!order_->Read(lo, hi - lo, out.data()).ok()) return {};
  return out;
}

std::string EpochSource::Describe(uint64_t token) const {
  const std::vector<int64_t> idx = BatchIndices(token);
  if (idx.empty()) return "?";
  std::string s = "[";
  for (size_t i = 0; i < idx.size() && i < 16; ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + (idx.size() > 16 ? ", ...]" : "]");
}

}  // namespace stoker
