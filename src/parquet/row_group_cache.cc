#include "parquet/row_group_cache.h"

#include "core/trace.h"

#include <arrow/util/byte_size.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace stoker {

RowGroupCache::RowGroupCache(uint32_t row_groups, uint64_t budget, std::function<Result<Table>(uint32_t)> decode,
                             std::function<uint64_t(uint32_t)> estimate)
    : budget_(budget), decode_(std::move(decode)), estimate_(std::move(estimate)), entries_(row_groups) {}

RowGroupCache::~RowGroupCache() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (ahead_thread_ && owner_ == getpid()) {
    ahead_thread_->join();
  } else {
    (void)ahead_thread_.release();  // (a forked copy: the thread is its parent's)
  }
}

void RowGroupCache::SetAhead(std::vector<uint32_t> order) {
  std::lock_guard<std::mutex> g(mu_);
  ahead_ = std::move(order);
  ahead_at_.assign(entries_.size(), UINT32_MAX);
  for (uint32_t i = 0; i < ahead_.size(); ++i)
    if (ahead_[i] < entries_.size() && ahead_at_[ahead_[i]] == UINT32_MAX) ahead_at_[ahead_[i]] = i;
  reached_ = 0;
  owner_ = getpid();  // (the first read here starts the decoder ahead)
  cv_.notify_all();
}

void RowGroupCache::AheadMain() {
  TraceNameThread("parquet decoder");
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    // The first row group not begun from the furthest one a reader asked
    // for on, within three of it, while it fits.
    bool did = false;
    for (uint32_t i = reached_; i < ahead_.size() && i <= reached_ + 2 && !did; ++i) {
      const uint32_t g = ahead_[i];
      if (entries_[g].state != kEmpty) continue;
      if (!LoadLocked(l, g, true)) break;
      did = true;
    }
    if (!did) cv_.wait_for(l, std::chrono::milliseconds(100));
  }
}

bool RowGroupCache::MakeRoomLocked(uint64_t need, bool finished_only) {
  while (stats_.decoded_bytes + need > budget_) {
    Entry* victim = nullptr;
    for (Entry& e : entries_)
      if (e.state == kReady && e.table.use_count() == 1 && (e.finished || !finished_only) &&
          (!victim || e.used < victim->used))
        victim = &e;
    if (!victim) return false;  // every decoded row group is held by a reader (or unfinished)
    stats_.decoded_bytes -= victim->bytes;
    victim->table.reset();
    victim->bytes = 0;
    victim->state = kEmpty;
    ++stats_.evictions;
  }
  return true;
}

bool RowGroupCache::LoadLocked(std::unique_lock<std::mutex>& l, uint32_t g, bool ahead) {
  Entry& e = entries_[g];
  const uint64_t estimate = estimate_(g);
  if (!MakeRoomLocked(static_cast<uint64_t>(static_cast<double>(estimate) * size_ratio_), ahead) && ahead)
    return false;
  e.state = kLoading;
  l.unlock();
  Result<Table> t = [&] {
    StageScope decoding(Stage::kDecode);
    return decode_(g);
  }();
  const uint64_t bytes = t.ok() ? static_cast<uint64_t>(arrow::util::TotalBufferSize(*t.value())) : 0;
  l.lock();
  if (t.ok() && estimate > 0) size_ratio_ = std::max(size_ratio_, static_cast<double>(bytes) / estimate);
  if (t.ok()) {
    e.table = std::move(t).value();
    e.bytes = bytes;
    e.state = kReady;
    stats_.decoded_bytes += bytes;
    stats_.peak_decoded_bytes = std::max(stats_.peak_decoded_bytes, stats_.decoded_bytes);
    ++stats_.row_groups_decoded;
  } else {
    e.error = t.status();
    e.state = kFailed;
  }
  cv_.notify_all();
  return true;
}

Result<RowGroupCache::Table> RowGroupCache::Get(uint32_t g) {
  std::unique_lock<std::mutex> l(mu_);
  if (g < ahead_at_.size() && ahead_at_[g] != UINT32_MAX && ahead_at_[g] > reached_) {
    reached_ = ahead_at_[g];
    cv_.notify_all();  // (the decoder ahead goes on from here)
  }
  if (!ahead_thread_ && !ahead_.empty() && owner_ == getpid())
    ahead_thread_ = std::make_unique<std::thread>([this] { AheadMain(); });
  for (;;) {
    Entry& e = entries_[g];
    if (e.state == kReady) {
      e.used = ++tick_;
      e.finished = false;
      return e.table;
    }
    if (e.state == kFailed) return e.error;
    if (e.state == kEmpty) {
      LoadLocked(l, g, false);
      continue;
    }
    // Another reader decodes g: decode the next row group not begun
    // meanwhile, if it fits, else wait.
    bool helped = false;
    if (g < ahead_at_.size() && ahead_at_[g] != UINT32_MAX) {
      for (uint32_t i = ahead_at_[g] + 1; i < ahead_.size() && i <= ahead_at_[g] + 4; ++i) {
        const uint32_t h = ahead_[i];
        if (entries_[h].state != kEmpty) continue;
        helped = LoadLocked(l, h, true);
        break;
      }
    }
    if (!helped) cv_.wait(l, [&] { return entries_[g].state != kLoading; });
  }
}

void RowGroupCache::SetBudget(uint64_t budget) {
  std::lock_guard<std::mutex> l(mu_);
  budget_ = budget;
  cv_.notify_all();  // (more room for the decoder ahead, maybe)
}

void RowGroupCache::Finished(uint32_t g) {
  std::lock_guard<std::mutex> l(mu_);
  Entry& e = entries_[g];
  if (e.state != kReady) return;
  e.finished = true;
  e.used = 0;  // (dropped first)
  cv_.notify_all();  // (room for the decoder ahead)
}

ParquetStats RowGroupCache::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

}  // namespace stoker
