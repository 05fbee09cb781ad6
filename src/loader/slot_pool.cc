// SlotPool (slot_pool.h).
#include "loader/slot_pool.h"

#include <algorithm>

namespace stoker {

SlotPool::SlotPool(Arena* arena, uint32_t max_slots, uint64_t max_memory)
    : arena_(arena),
      max_memory_(max_memory),
      alloc_(arena->control()->data_offset, arena->reserve_bytes(),
             arena->control()->max_memory - arena->control()->data_offset),
      slots_(max_slots) {
  free_.reserve(max_slots);
  for (uint32_t i = max_slots; i > 0; --i) free_.push_back(i - 1);
}

SlotPool::~SlotPool() = default;  // (cuda_ first: every range unregistered while the arena is mapped)

Result<bool> SlotPool::Acquire(uint64_t bytes, uint64_t at_least, bool writer_backs, SlotState state,
                               uint32_t* slot_out) {
  FreeCompletedFences();
  if (free_.empty()) return false;
  const uint32_t slot = free_.back();
  STOKER_ASSIGN_OR_RETURN(bool sized, SizeRegion(slot, bytes, writer_backs));
  if (!sized && at_least < bytes) {
    STOKER_ASSIGN_OR_RETURN(sized, SizeRegion(slot, at_least, writer_backs));
  }
  if (!sized) return false;
  free_.pop_back();
  slots_[slot].state = state;
  *slot_out = slot;
  return true;
}

void SlotPool::Complete(uint32_t slot, uint64_t used, bool learn) {
  slots_[slot].state = SlotState::kReady;
  if (learn) Learn(used);
}

bool SlotPool::Hold(uint32_t slot) {
  Slot& s = slots_[slot];
  if (s.state != SlotState::kReady) return false;
  s.state = SlotState::kHeld;
  held_bytes_ += s.capacity;
  return true;
}

void SlotPool::Release(uint32_t slot) {
  Slot& s = slots_[slot];
  if (s.fenced || (s.state != SlotState::kHeld && s.state != SlotState::kReady)) return;  // double release
  if (cuda_ && s.state == SlotState::kHeld) {
    s.fenced = true;
    fenced_.push_back(Fenced{slot, cuda_->recorded()});
    return;
  }
  Free(slot);
}

void SlotPool::Free(uint32_t slot) {
  Slot& s = slots_[slot];
  if (s.state == SlotState::kHeld) held_bytes_ -= s.capacity;
  s.state = SlotState::kFree;
  s.fenced = false;
  free_.push_back(slot);
  arena_->slot(slot)->state.store(static_cast<uint32_t>(SlotState::kFree), std::memory_order_release);
}

void SlotPool::FreeFenced(uint64_t done) {
  while (!fenced_.empty() && fenced_.front().after < done) {
    Free(fenced_.front().slot);
    fenced_.pop_front();
  }
}

void SlotPool::FreeCompletedFences() {
  if (!fenced_.empty()) FreeFenced(cuda_->Completed());
}

Status SlotPool::EnableCuda(const CudaRuntimeApi& api) {
  if (!api.complete()) return Status::InvalidArgument("a CUDA runtime entry point is missing");
  if (cuda_) return Status::OK();
  cuda_ = std::make_unique<CudaHost>(api);
  for (const Slot& s : slots_)  // the regions made before
    if (s.capacity) (void)cuda_->Register(arena_->base() + s.offset, s.capacity);
  return Status::OK();
}

int SlotPool::pin_error() const { return cuda_ ? cuda_->pin_error() : kCudaSuccess; }

int SlotPool::RecordFence(void* stream) {
  if (!cuda_) return kCudaSuccess;
  const int err = cuda_->Record(stream);
  FreeCompletedFences();
  return err;
}

bool SlotPool::DrainFences() {
  if (!cuda_ || fenced_.empty()) return false;
  FreeFenced(cuda_->Drain());
  return true;
}

Status SlotPool::TooBig(uint64_t bytes) const {
  return Status::ResourceExhausted(
      "a batch needs " + std::to_string(bytes) + " bytes of shared memory, more than max_memory=" +
      std::to_string(max_memory_) + " allows (" + std::to_string(budget()) +
      " bytes for batches after the loader's control area); raise max_memory or lower batch_size");
}

bool SlotPool::fits_budget(uint64_t bytes) const { return AlignUp(bytes, 4096) <= budget(); }

Result<bool> SlotPool::SizeRegion(uint32_t slot, uint64_t bytes, bool writer_backs) {
  Slot& s = slots_[slot];
  if (s.capacity >= bytes) return true;
  if (AlignUp(std::max(bytes, kMinRegion), 4096) > budget()) return TooBig(bytes);
  bytes = AlignUp(std::max(bytes, kMinRegion), 4096);
  if (s.capacity) FreeRegion(s);
  auto off = alloc_.Allocate(bytes);
  // Take regions back from idle free slots, coldest (bottom of the stack) first.
  for (size_t i = 0; !off && i < free_.size(); ++i) {
    Slot& idle = slots_[free_[i]];
    if (idle.capacity == 0) continue;
    FreeRegion(idle);
    off = alloc_.Allocate(bytes);
  }
  if (!off && alloc_.warm_free() > 0) {
    (void)DiscardWarmFree();
    off = alloc_.Allocate(bytes);
  }
  if (!off) return false;  // busy: what is in flight or held must come back first
  Status backed = arena_->Grow(alloc_.top());
  if (backed.ok() && !writer_backs) backed = arena_->Populate(*off, bytes);
  if (!backed.ok()) {
    alloc_.Free(*off, bytes);
    return backed;
  }
  s.offset = *off;
  s.capacity = bytes;
  arena_->slot(slot)->region_backed = writer_backs ? 0 : 1;
  if (cuda_) (void)cuda_->Register(arena_->base() + s.offset, s.capacity);  // an error: pin_error()
  return true;
}

uint64_t SlotPool::TrimIdle(uint32_t regions) {
  uint32_t with = 0;  // regions of slots in use
  for (const Slot& s : slots_)
    if (s.capacity && s.state != SlotState::kFree) ++with;
  uint32_t keep = regions > with ? regions - with : 0;
  for (size_t i = free_.size(); i-- > 0;) {  // (the top of the stack is the warmest)
    Slot& s = slots_[free_[i]];
    if (s.capacity == 0) continue;
    if (keep > 0) {
      --keep;
      continue;
    }
    FreeRegion(s);
  }
  return DiscardWarmFree();
}

uint64_t SlotPool::DiscardWarmFree() {
  if (alloc_.warm_free() == 0) return 0;
  uint64_t given = 0;
  for (auto [o, len] : alloc_.DiscardFree()) {
    if (arena_->Discard(o, len).ok()) given += len;
  }
  return given;
}

void SlotPool::FreeRegion(Slot& s) {
  if (cuda_) cuda_->Unregister(arena_->base() + s.offset);  // before its pages can be given back
  alloc_.Free(s.offset, s.capacity);
  s.capacity = 0;
}

uint64_t SlotPool::RegionFor(uint64_t payload_bytes) const {
  uint64_t want = std::max(payload_bytes, expected_);
  if (variable_sizes_) want += want / 4;
  // Headroom never makes a batch that fits the budget not fit.
  return std::max(std::max(payload_bytes, expected_), std::min(want, budget()));
}

void SlotPool::Learn(uint64_t bytes) {
  if (bytes <= expected_) return;
  if (expected_ != 0) variable_sizes_ = true;
  expected_ = bytes;
}

void SlotPool::LearnAsked(uint64_t bytes) {
  if (expected_ != 0 && bytes != expected_) variable_sizes_ = true;
  expected_ = std::max(expected_, bytes);
}

bool SlotPool::Crowded(uint32_t slot, uint32_t workers) const {
  const uint64_t reserve = std::max<uint64_t>(expected_, kMinRegion) * std::max<uint32_t>(1, workers);
  return held_bytes_ + slots_[slot].capacity + reserve > budget() ||
         free_.size() < std::max<uint32_t>(2, workers);
}

}  // namespace stoker
