// PageCache (page_cache.h).
#include "parquet/page_cache.h"

#include <arrow/util/byte_size.h>

namespace stoker {

Result<PageCache::Page> PageCache::Get(uint64_t key, const std::function<Result<Page>()>& decode) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.at);
      return it->second.page;
    }
  }
  STOKER_ASSIGN_OR_RETURN(Page page, decode());
  const auto bytes = static_cast<uint64_t>(arrow::util::TotalBufferSize(*page->data()));
  std::lock_guard<std::mutex> l(mu_);
  ++decoded_;
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second.page;  // (decoded meanwhile by another reader)
  lru_.push_front(key);
  entries_.emplace(key, Entry{page, bytes, lru_.begin()});
  held_ += bytes;
  EvictLocked();
  return page;
}

void PageCache::EvictLocked() {
  // (the page just added stays, even past the budget: its reader needs it)
  while (held_ > budget_ && lru_.size() > 1) {
    auto it = entries_.find(lru_.back());
    held_ -= it->second.bytes;
    entries_.erase(it);
    lru_.pop_back();
  }
}

void PageCache::SetBudget(uint64_t budget) {
  std::lock_guard<std::mutex> l(mu_);
  budget_ = budget;
  EvictLocked();
}

void PageCache::Clear() {
  std::lock_guard<std::mutex> l(mu_);
  entries_.clear();
  lru_.clear();
  held_ = 0;
}

uint64_t PageCache::decoded() const {
  std::lock_guard<std::mutex> l(mu_);
  return decoded_;
}

uint64_t PageCache::held_bytes() const {
  std::lock_guard<std::mutex> l(mu_);
  return held_;
}

}  // namespace stoker
