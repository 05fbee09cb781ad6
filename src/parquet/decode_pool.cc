#include "parquet/decode_pool.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace stoker {

DecodePool::DecodePool(uint64_t keep, arrow::MemoryPool* under) : under_(under), keep_(keep) {}

DecodePool::~DecodePool() = default;

void DecodePool::Close() {
  bool last;
  {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    keep_ = 0;
    TrimLocked();
    last = blocks_in_use_ == 0;
  }
  if (last) delete this;
}

void DecodePool::SetKeep(uint64_t keep) {
  std::lock_guard<std::mutex> l(mu_);
  keep_ = closed_ ? 0 : keep;
  TrimLocked();
}

uint64_t DecodePool::keep() const {
  std::lock_guard<std::mutex> l(mu_);
  return keep_;
}

int64_t DecodePool::ClassOf(int64_t n) {
  if (n < kMinKept) return n;
  // (steps of an eighth of n's power of 2)
  const int64_t step = int64_t{1} << (std::bit_width(static_cast<uint64_t>(n)) - 1 - 3);
  return (n + step - 1) / step * step;
}

void DecodePool::TrimLocked() {
  while (s_.kept > keep_) {
    auto last = std::prev(kept_.end());
    under_->Free(last->second.back(), last->first, kAlignment);
    s_.kept -= static_cast<uint64_t>(last->first);
    last->second.pop_back();
    if (last->second.empty()) kept_.erase(last);
  }
}

arrow::Status DecodePool::Allocate(int64_t size, int64_t alignment, uint8_t** out) {
  if (size == 0) return under_->Allocate(0, alignment, out);  // (Arrow's empty area, never freed)
  if (!Pooled(size, alignment)) {
    ARROW_RETURN_NOT_OK(under_->Allocate(size, alignment, out));
    std::lock_guard<std::mutex> l(mu_);
    CountLocked(0, size, true);
    return arrow::Status::OK();
  }
  const int64_t c = ClassOf(size);
  std::unique_lock<std::mutex> l(mu_);
  auto it = kept_.find(c);
  if (it != kept_.end()) {
    *out = it->second.back();
    it->second.pop_back();
    if (it->second.empty()) kept_.erase(it);
    s_.kept -= static_cast<uint64_t>(c);
    ++s_.reused;
  } else {
    l.unlock();
    ARROW_RETURN_NOT_OK(under_->Allocate(c, kAlignment, out));
    l.lock();
    ++s_.fresh;
  }
  CountLocked(0, size, true);
  return arrow::Status::OK();
}

void DecodePool::CountLocked(int64_t old_size, int64_t new_size, bool new_block) {
  ++allocations_;
  blocks_in_use_ += new_block ? 1 : 0;
  total_bytes_ += std::max<int64_t>(new_size - old_size, 0);
  bytes_ += new_size - old_size;
  max_bytes_ = std::max(max_bytes_, bytes_);
}

arrow::Status DecodePool::Reallocate(int64_t old_size, int64_t new_size, int64_t alignment, uint8_t** ptr) {
  if (old_size == 0) return Allocate(new_size, alignment, ptr);
  const bool same = Pooled(old_size, alignment) ? Pooled(new_size, alignment) && ClassOf(old_size) == ClassOf(new_size)
                                                : !Pooled(new_size, alignment) && new_size > 0;
  if (!same) {  // (to another class, or between a small block and a large one)
    uint8_t* moved;
    ARROW_RETURN_NOT_OK(Allocate(new_size, alignment, &moved));
    if (new_size > 0) std::memcpy(moved, *ptr, static_cast<size_t>(std::min(old_size, new_size)));
    Free(*ptr, old_size, alignment);
    *ptr = moved;
    return arrow::Status::OK();
  }
  // A small block is the default pool's to grow; a large one holds its class.
  if (!Pooled(old_size, alignment)) ARROW_RETURN_NOT_OK(under_->Reallocate(old_size, new_size, alignment, ptr));
  std::lock_guard<std::mutex> l(mu_);
  CountLocked(old_size, new_size, false);
  return arrow::Status::OK();
}

void DecodePool::Free(uint8_t* buffer, int64_t size, int64_t alignment) {
  if (size == 0) return under_->Free(buffer, 0, alignment);
  arrow::MemoryPool* const under = under_;  // (once unlocked, the last Free after Close may delete this)
  bool last;
  {
    std::unique_lock<std::mutex> l(mu_);
    bytes_ -= size;
    last = --blocks_in_use_ == 0 && closed_;
    const uint64_t c = static_cast<uint64_t>(ClassOf(size));
    if (Pooled(size, alignment) && s_.kept + c <= keep_) {
      kept_[static_cast<int64_t>(c)].push_back(buffer);
      s_.kept += c;
    } else {
      l.unlock();
      if (Pooled(size, alignment)) under->Free(buffer, static_cast<int64_t>(c), kAlignment);
      else under->Free(buffer, size, alignment);
    }
  }
  if (last) delete this;
}

void DecodePool::ReleaseUnused() {
  std::lock_guard<std::mutex> l(mu_);
  const uint64_t keep = keep_;
  keep_ = 0;
  TrimLocked();
  keep_ = keep;
}

int64_t DecodePool::bytes_allocated() const {
  std::lock_guard<std::mutex> l(mu_);
  return bytes_;
}

int64_t DecodePool::max_memory() const {
  std::lock_guard<std::mutex> l(mu_);
  return max_bytes_;
}

int64_t DecodePool::total_bytes_allocated() const {
  std::lock_guard<std::mutex> l(mu_);
  return total_bytes_;
}

int64_t DecodePool::num_allocations() const {
  std::lock_guard<std::mutex> l(mu_);
  return allocations_;
}

std::string DecodePool::backend_name() const { return "stoker-decode(" + under_->backend_name() + ")"; }

DecodePool::Stats DecodePool::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return s_;
}

}  // namespace stoker
