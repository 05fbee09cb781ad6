#include "shm/region_allocator.h"

#include <iterator>

namespace stoker {

RegionAllocator::RegionAllocator(uint64_t begin, uint64_t end, uint64_t limit)
    : begin_(begin), end_(end), limit_(limit), top_(begin) {}

std::optional<uint64_t> RegionAllocator::TakeFrom(bool warm, uint64_t size) {
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second.warm != warm || it->second.size < size) continue;
    if (!warm && resident_ + size > limit_) return std::nullopt;
    const uint64_t off = it->first;
    const Range r = it->second;
    free_.erase(it);
    if (r.size > size) free_.emplace(off + size, Range{r.size - size, r.warm});
    if (warm) warm_free_ -= size; else resident_ += size;
    in_use_ += size;
    return off;
  }
  return std::nullopt;
}

std::optional<uint64_t> RegionAllocator::Allocate(uint64_t size) {
  if (size == 0 || size % 4096 != 0) return std::nullopt;
  if (auto o = TakeFrom(true, size)) return o;
  if (auto o = TakeFrom(false, size)) return o;
  if (top_ + size <= end_ && resident_ + size <= limit_) {
    const uint64_t off = top_;
    top_ += size;
    in_use_ += size;
    resident_ += size;
    return off;
  }
  return std::nullopt;
}

void RegionAllocator::Insert(uint64_t off, uint64_t size, bool warm) {
  auto next = free_.lower_bound(off);
  if (next != free_.end() && next->second.warm == warm && off + size == next->first) {
    size += next->second.size;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->second.warm == warm && prev->first + prev->second.size == off) {
      prev->second.size += size;
      return;
    }
  }
  free_.emplace(off, Range{size, warm});
}

void RegionAllocator::Free(uint64_t offset, uint64_t size) {
  in_use_ -= size;
  warm_free_ += size;
  Insert(offset, size, true);
}

std::vector<std::pair<uint64_t, uint64_t>> RegionAllocator::DiscardFree() {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  std::vector<std::pair<uint64_t, uint64_t>> cold;
  for (auto it = free_.begin(); it != free_.end();) {
    if (it->second.warm) {
      out.emplace_back(it->first, it->second.size);
      it = free_.erase(it);
    } else {
      cold.emplace_back(it->first, it->second.size);
      it = free_.erase(it);
    }
  }
  for (auto& [o, s] : out) {
    resident_ -= s;
    warm_free_ -= s;
  }
  for (auto& [o, s] : cold) Insert(o, s, false);
  for (auto& [o, s] : out) Insert(o, s, false);
  // A discarded range that ends at the top joins the untouched space above
  // it, so a region as big as all free space together can be had again.
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (!last->second.warm && last->first + last->second.size == top_) {
      top_ = last->first;
      free_.erase(last);
    }
  }
  return out;
}

}  // namespace stoker
