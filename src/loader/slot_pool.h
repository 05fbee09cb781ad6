// SlotPool: the main process's book of the slot pool (docs/design/
// slot_pool.md).  Which slots are free (a stack: the warmest on top), each
// slot's state as the main process sees it and its region in the arena's
// region heap, the byte budget those regions live in (max_memory less the
// control area), the batch size learnt so far, and the bytes the training
// loop holds.  Only the main process allocates: a worker that needs a bigger
// region asks the Engine, which asks the pool.
//
// With CUDA registration on (SetCuda), every region is registered while it
// belongs to a slot and unregistered before its pages can be given back.
//
// Not thread-safe: the Engine calls it under its mutex.
#ifndef STOKER_LOADER_SLOT_POOL_H_
#define STOKER_LOADER_SLOT_POOL_H_

#include <cstdint>
#include <vector>

#include "loader/cuda_host.h"
#include "shm/arena.h"
#include "shm/region_allocator.h"
#include "stoker/status.h"

namespace stoker {

class SlotPool {
 public:
  static constexpr uint64_t kMinRegion = 64 * 1024;  // room for any error report

  struct Slot {
    SlotState state = SlotState::kFree;
    uint64_t offset = 0;
    uint64_t capacity = 0;
    bool fenced = false;  // HELD, dropped, waiting for its CUDA fence
  };

  // `max_memory`: the option as the user gave it (for messages).
  SlotPool(Arena* arena, uint32_t max_slots, uint64_t max_memory);

  // Bytes batch regions may occupy: max_memory less the control area.
  uint64_t budget() const { return arena_->control()->max_memory - arena_->control()->data_offset; }
  uint32_t size() const { return static_cast<uint32_t>(slots_.size()); }
  Slot& operator[](uint32_t slot) { return slots_[slot]; }
  const Slot& operator[](uint32_t slot) const { return slots_[slot]; }

  // The free stack.
  bool any_free() const { return !free_.empty(); }
  size_t free_count() const { return free_.size(); }
  uint32_t next_free() const { return free_.back(); }  // REQUIRES: any_free()
  void TakeNextFree() { free_.pop_back(); }
  // `slot` is free again (its region kept, warm, for the next task).
  void PutFree(uint32_t slot);

  // Gives `slot` a region of at least `bytes`: true when done, false when
  // there is no room now, an error when there never will be (more than the
  // budget: ResourceExhausted naming max_memory) or the arena cannot grow.
  // A new region is backed here, or, with `writer_backs`, by the worker
  // that writes it (in parallel, and not on the training loop's thread).
  // Room is made by taking regions back from idle free slots, coldest
  // first, then by giving warm free pages back to the kernel.
  Result<bool> SizeRegion(uint32_t slot, uint64_t bytes, bool writer_backs);
  // Region size for a new task: the largest batch seen, with headroom once
  // sizes vary (never more than the budget).
  uint64_t RegionFor(uint64_t payload_bytes) const;
  // A batch of `bytes` was made (or asked for): the next regions are sized
  // for it.
  void Learn(uint64_t bytes);
  // A worker asked for a region of `bytes` (its batch did not fit): any
  // size other than the one learnt means sizes vary.
  void LearnAsked(uint64_t bytes);
  uint64_t expected() const { return expected_; }
  bool fits_budget(uint64_t bytes) const;

  // The training loop took / dropped a slot's batch.
  void Hold(uint32_t slot);
  // Whether handing `slot` to the training loop would leave `workers` too
  // little of the budget (the caller copies the batch out instead).
  bool Crowded(uint32_t slot, uint32_t workers) const;

  // Registers every region with CUDA from now on (the ones made before too).
  void SetCuda(CudaHost* cuda);

  uint64_t resident_bytes() const { return alloc_.resident(); }
  uint64_t in_use_bytes() const { return alloc_.in_use(); }

 private:
  Status TooBig(uint64_t bytes) const;
  void FreeRegion(Slot& s);

  Arena* arena_;
  uint64_t max_memory_;
  RegionAllocator alloc_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;   // free slot ids, LIFO (warm first)
  uint64_t expected_ = 0;        // largest batch seen
  bool variable_sizes_ = false;  // batches have changed size: add headroom
  uint64_t held_bytes_ = 0;
  CudaHost* cuda_ = nullptr;
};

}  // namespace stoker

#endif  // STOKER_LOADER_SLOT_POOL_H_
