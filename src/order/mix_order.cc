// MixOrder (mix_order.h).
#include "order/mix_order.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/mix.h"
#include "order/feistel_order.h"

namespace stoker {

namespace {
constexpr uint64_t kCheckpointEvery = uint64_t{1} << 16;
}  // namespace

Result<std::shared_ptr<MixOrder>> MixOrder::Make(MixSpec spec) {
  const size_t k = spec.sizes.size();
  if (k == 0) return Status::InvalidArgument("Mix: no sources");
  if (spec.weights.size() != k)
    return Status::InvalidArgument("Mix: " + std::to_string(spec.weights.size()) + " weights for " +
                                   std::to_string(k) + " sources");
  for (size_t i = 0; i < k; ++i) {
    if (spec.sizes[i] == 0) return Status::InvalidArgument("Mix: source " + std::to_string(i) + " has no samples");
    if (!(spec.weights[i] > 0) || !std::isfinite(spec.weights[i]))
      return Status::InvalidArgument("Mix: source " + std::to_string(i) + "'s weight is " +
                                     std::to_string(spec.weights[i]) + "; every weight must be > 0 (leave a "
                                     "source out to give it none)");
  }
  for (const auto* v : {&spec.keys, &spec.base})
    if (!v->empty() && v->size() != k)
      return Status::InvalidArgument("Mix: " + std::to_string(v->size()) + (v == &spec.keys ? " keys" : " base counters") +
                                     " for " + std::to_string(k) + " sources");
  if (!spec.shards.empty()) {
    if (spec.shards.size() != k)
      return Status::InvalidArgument("Mix: shards of " + std::to_string(spec.shards.size()) + " sources for " +
                                     std::to_string(k) + " sources");
    for (size_t i = 0; i < k; ++i) {
      const auto& s = spec.shards[i];
      uint64_t sum = 0;
      for (uint64_t n : s.sizes) sum += n;
      if (!s.sizes.empty() && (sum != spec.sizes[i] || s.window == 0))
        return Status::InvalidArgument("Mix: source " + std::to_string(i) + " has " + std::to_string(spec.sizes[i]) +
                                       " samples and shards of " + std::to_string(sum) + " (window " +
                                       std::to_string(s.window) + "): its shards must hold its samples, window >= 1");
    }
  }
  if (!spec.at_counts.empty()) {
    if (spec.at_counts.size() != k)
      return Status::InvalidArgument("Mix: a checkpoint of " + std::to_string(spec.at_counts.size()) +
                                     " counters for " + std::to_string(k) + " sources");
    uint64_t sum = 0;
    for (uint64_t c : spec.at_counts) sum += c;
    if (sum != spec.at)
      return Status::InvalidArgument("Mix: a checkpoint at position " + std::to_string(spec.at) + " whose counters sum to " +
                                     std::to_string(sum) + " (the state is damaged)");
  }
  auto order = std::shared_ptr<MixOrder>(new MixOrder(std::move(spec)));
  if (order->spec_.at > order->samples_)
    return Status::InvalidArgument("Mix: a checkpoint at position " + std::to_string(order->spec_.at) +
                                   " of an order of " + std::to_string(order->samples_));
  return order;
}

MixOrder::MixOrder(MixSpec spec) : spec_(std::move(spec)) {
  const size_t k = spec_.sizes.size();
  const double total = std::accumulate(spec_.weights.begin(), spec_.weights.end(), 0.0);
  w_.resize(k);
  for (size_t i = 0; i < k; ++i) w_[i] = spec_.weights[i] / total;
  offsets_.assign(k + 1, 0);
  for (size_t i = 0; i < k; ++i) offsets_[i + 1] = offsets_[i] + spec_.sizes[i];
  if (spec_.keys.empty())
    for (size_t i = 0; i < k; ++i) spec_.keys.push_back(i + 1);
  if (spec_.base.empty()) spec_.base.assign(k, 0);
  const uint64_t declared = spec_.samples ? spec_.samples : offsets_[k];
  samples_ = declared > spec_.start ? declared - spec_.start : 0;
  if (spec_.stop) {
    // Every prefix keeps c_i <= w_i * n + 1: up to n = (left_i - 1) / w_i no
    // source takes more than the left_i samples it has left.
    for (size_t i = 0; i < k; ++i) {
      const uint64_t left = spec_.sizes[i] > spec_.base[i] ? spec_.sizes[i] - spec_.base[i] : 0;
      samples_ = std::min<uint64_t>(
          samples_, left == 0 ? 0 : static_cast<uint64_t>(std::floor((left - 1) / w_[i])) + 1);
    }
  }
  counts_.assign(k, 0);
  windowed_.resize(spec_.shards.empty() ? 0 : k);
  checkpoints_.emplace(0, counts_);
  if (!spec_.at_counts.empty()) checkpoints_.emplace(spec_.at, spec_.at_counts);
  while (leaves_ < k) leaves_ *= 2;
  tree_.assign(2 * leaves_, Node{kNone, UINT64_MAX});
  for (size_t i = 0; i < k; ++i) tree_[leaves_ + i].win = static_cast<uint32_t>(i);
  Invalidate();
}

void MixOrder::Invalidate() {
  for (size_t node = 1; node < leaves_; ++node) tree_[node].until = 0;
}

bool MixOrder::Ahead(uint32_t a, uint32_t b, double n) const {
  if (a == kNone) return false;
  if (b == kNone) return true;
  const double da = w_[a] * n - static_cast<double>(counts_[a]);
  const double db = w_[b] * n - static_cast<double>(counts_[b]);
  return da > db || (da == db && a < b);
}

void MixOrder::Refresh(size_t node, uint64_t n) {
  if (tree_[node].until > n) return;  // (a leaf's never expires)
  Refresh(2 * node, n);
  Refresh(2 * node + 1, n);
  const Node& l = tree_[2 * node];
  const Node& r = tree_[2 * node + 1];
  const double at = static_cast<double>(n);
  const bool left = Ahead(l.win, r.win, at);
  const uint32_t x = left ? l.win : r.win, y = left ? r.win : l.win;
  uint64_t until = std::min(l.until, r.until);
  if (y != kNone && w_[y] > w_[x]) {
    // y's deficit grows faster: it catches x's at step t.  Check again a
    // step before (floating point), and never later than the next step.
    const double t = (static_cast<double>(counts_[y]) - static_cast<double>(counts_[x])) / (w_[y] - w_[x]);
    const double again = std::floor(t) - 1;
    until = std::min<uint64_t>(until, again <= at ? n + 1 : static_cast<uint64_t>(std::min(again, 1e18)));
  }
  tree_[node] = Node{x, until};
}

int64_t MixOrder::Step() {
  const uint64_t n = pos_ + 1;
  Refresh(1, n);
  const uint32_t best = leaves_ == 1 ? 0 : tree_[1].win;
  for (size_t node = (leaves_ + best) / 2; node >= 1; node /= 2) tree_[node].until = 0;  // its counter moves
  const uint64_t c = spec_.base[best] + counts_[best]++, size = spec_.sizes[best];
  const uint64_t source_epoch = c / size, at = c % size;
  uint64_t local = at;
  if (spec_.shuffle) {
    const uint64_t key = Mix64(FeistelOrder::SeedFor(spec_.seed, spec_.epoch) ^ Mix64(spec_.keys[best]) ^
                               Mix64((source_epoch + 1) * 0x9E3779B97F4A7C15ull));
    if (!windowed_.empty() && !spec_.shards[best].sizes.empty()) {
      Windowed& w = windowed_[best];
      if (w.source_epoch != source_epoch) {
        w.order = std::make_unique<WindowOrder>(spec_.shards[best].sizes, spec_.shards[best].window, key);
        w.source_epoch = source_epoch;
      }
      local = w.order->At(at);
    } else {
      local = FeistelOrder(size, key).At(at);
    }
  }
  ++pos_;
  if (pos_ % kCheckpointEvery == 0) checkpoints_.emplace(pos_, counts_);
  return static_cast<int64_t>(offsets_[best] + local);
}

void MixOrder::Seek(uint64_t pos) {
  if (pos == pos_) return;
  // The nearest checkpoint at or below pos (position 0 is always there),
  // when the cursor is past pos or behind that checkpoint.
  auto it = std::prev(checkpoints_.upper_bound(pos));
  if (pos < pos_ || it->first > pos_) {
    pos_ = it->first;
    counts_ = it->second;
    Invalidate();
  }
  while (pos_ < pos) (void)Step();
}

Status MixOrder::Read(uint64_t pos, uint64_t n, int64_t* out) {
  if (pos + n > samples_) return Status::InvalidArgument("order positions past its end");
  std::lock_guard<std::mutex> g(mu_);
  Seek(pos);
  for (uint64_t k = 0; k < n; ++k) out[k] = Step();
  return Status::OK();
}

Status MixOrder::ReadStrided(uint64_t first, uint64_t stride, uint64_t n, int64_t* out) {
  if (n == 0) return Status::OK();
  if (stride == 0 || first + (n - 1) * stride >= samples_) return Status::InvalidArgument("order positions past its end");
  std::lock_guard<std::mutex> g(mu_);
  for (uint64_t k = 0; k < n; ++k) {
    Seek(first + k * stride);
    out[k] = Step();
  }
  return Status::OK();
}

std::vector<uint64_t> MixOrder::Counters(uint64_t pos) {
  std::lock_guard<std::mutex> g(mu_);
  Seek(std::min(pos, samples_));
  return counts_;
}

std::pair<uint32_t, uint64_t> MixOrder::Locate(uint64_t g) const {
  const auto it = std::upper_bound(offsets_.begin(), offsets_.end(), g);
  const auto i = static_cast<uint32_t>(it - offsets_.begin() - 1);
  return {i, g - offsets_[i]};
}

}  // namespace stoker
