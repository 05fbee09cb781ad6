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

void RowGroupCache::SetAhead(const std::vector<uint32_t>& group_at) {
  // (made outside the lock: an epoch's order is a position a row, and
  // readers of the epoch before may still be reading)
  const size_t k = entries_.size();
  std::vector<uint32_t> ahead, ahead_at(k, UINT32_MAX);
  std::vector<uint64_t> first(k, UINT64_MAX), last(k, UINT64_MAX);
  for (uint64_t p = 0; p < group_at.size(); ++p) {
    const uint32_t r = group_at[p];
    if (r >= k) continue;
    if (first[r] == UINT64_MAX) {
      first[r] = p;
      ahead_at[r] = static_cast<uint32_t>(ahead.size());
      ahead.push_back(r);
    }
    last[r] = p;
  }
  std::lock_guard<std::mutex> g(mu_);
  ahead_ = std::move(ahead);
  ahead_at_ = std::move(ahead_at);
  first_ = std::move(first);
  last_ = std::move(last);
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

bool RowGroupCache::MakeRoomLocked(uint64_t need, bool unfinished_too) {
  auto first = [&](const Entry& e) { return first_.empty() ? 0 : first_[&e - entries_.data()]; };
  while (stats_.decoded_bytes + loading_bytes_ + need > budget_) {
    Entry* victim = nullptr;
    auto rank = [&](const Entry& e) {  // (smaller goes first)
      if (e.finished) return std::pair<int, uint64_t>{0, e.used};
      if (e.used == 0) return std::pair<int, uint64_t>{1, UINT64_MAX - first(e)};  // decoded ahead: needed last first
      return std::pair<int, uint64_t>{2, e.used};
    };
    for (Entry& e : entries_)
      if (e.state == kReady && e.table.use_count() == 1 && (e.finished || unfinished_too) &&
          (!victim || rank(e) < rank(*victim)))
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

bool RowGroupCache::BehindLocked(uint32_t h, uint32_t g) const {
  const Entry& e = entries_[h];
  if (first_.empty())  // (positions unknown, a Mix's source: any row group begun and not finished)
    return wait_for_begun_ && h != g && e.state == kReady && !e.finished && e.used != 0;
  if (first_[g] == UINT64_MAX) return false;
  return e.state == kReady && !e.finished && last_[h] < first_[g];
}

void RowGroupCache::MakeRoomForReaderLocked(std::unique_lock<std::mutex>& l, uint64_t need, uint32_t g) {
  const auto deadline = std::chrono::steady_clock::now() + kBehindWait;
  auto any_behind = [&] {
    for (uint32_t h = 0; h < entries_.size(); ++h)
      if (BehindLocked(h, g)) return true;
    return false;
  };
  const Entry& e = entries_[g];
  while (e.state == kEmpty && !MakeRoomLocked(need, false) && any_behind() && !stop_) {
    if (cv_.wait_until(l, deadline) == std::cv_status::timeout) {
      // Not finished in time (a resumed epoch read part of them, or a row
      // was skipped): they count as finished from now on.
      for (uint32_t h = 0; h < entries_.size(); ++h)
        if (BehindLocked(h, g)) entries_[h].finished = true, entries_[h].used = 0;
      ++stats_.behind_timeouts;
    }
  }
  if (e.state == kEmpty) MakeRoomLocked(need, true);  // (else the decoder ahead took g meanwhile)
}

bool RowGroupCache::LoadLocked(std::unique_lock<std::mutex>& l, uint32_t g, bool ahead) {
  Entry& e = entries_[g];
  const uint64_t estimate = estimate_(g);
  const auto need = static_cast<uint64_t>(static_cast<double>(estimate) * size_ratio_);
  if (ahead) {
    if (!MakeRoomLocked(need, false)) return false;
    e.state = kLoading;
  } else {
    // (g is claimed after the wait: a reader that needs g meanwhile, one the
    // row groups behind wait for, decodes it itself)
    MakeRoomForReaderLocked(l, need, g);
    if (e.state != kEmpty) return true;  // (taken meanwhile: the caller looks again)
    e.state = kLoading;
  }
  loading_bytes_ += need;  // (room taken now: decodes running at once fit the budget together)
  l.unlock();
  Result<Table> t = [&] {
    StageScope decoding(Stage::kDecode);
    return decode_(g);
  }();
  const uint64_t bytes = t.ok() ? static_cast<uint64_t>(arrow::util::TotalBufferSize(*t.value())) : 0;
  l.lock();
  loading_bytes_ -= need;
  if (t.ok() && estimate > 0) size_ratio_ = std::max(size_ratio_, static_cast<double>(bytes) / estimate);
  if (t.ok()) {
    e.table = std::move(t).value();
    e.bytes = bytes;
    e.used = 0;  // (not read yet)
    e.finished = false;
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

void RowGroupCache::DropUnheld() {
  std::lock_guard<std::mutex> l(mu_);
  (void)MakeRoomLocked(uint64_t{1} << 62, true);  // (room for more than any budget: every unheld one goes)
}

void RowGroupCache::SetWaitForBegun(bool on) {
  std::lock_guard<std::mutex> l(mu_);
  wait_for_begun_ = on;
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
