// SlotPool: the main process's book of the slot pool (docs/design/
// slot_pool.md).  Which slots are free (a stack: the warmest on top), each
// slot's state as the main process sees it and its region in the arena's
// region heap, the byte budget those regions live in (max_memory less the
// control area), the batch size learnt so far, and the bytes the training
// loop holds.  Only the main process allocates: a worker that needs a bigger
// region asks the Engine, which asks the pool.
//
// With CUDA on (EnableCuda), every region is registered while it belongs to
// a slot and unregistered before its pages can be given back, and a dropped
// batch's slot waits for its fence (loader/cuda_host.h) before it is free.
//
// Not thread-safe: the Engine calls it under its mutex.
#ifndef STOKER_LOADER_SLOT_POOL_H_
#define STOKER_LOADER_SLOT_POOL_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "loader/cuda_host.h"
#include "shm/arena.h"
#include "shm/region_allocator.h"
#include "stoker/status.h"

namespace stoker {

class SlotPool {
 public:
  static constexpr uint64_t kMinRegion = 64 * 1024;  // room for any error report

  // A slot as the main process sees it.  Its state machine lives here alone:
  //
  //   FREE ──Acquire──► DISPATCHED (a worker's task) or FILLING (loaded here)
  //   DISPATCHED/FILLING ──Complete──► READY ──Hold──► HELD
  //   READY ──Release──► FREE
  //   HELD ──Release──► FREE, or, with CUDA on, fenced until the GPU's copies
  //                      out of it are done (a fence recorded after the
  //                      release has completed), then FREE
  //   DISPATCHED ──ReclaimFrom(its worker)──► FREE (the worker died)
  //
  // The slot's shared header (shm/arena_layout.h) is the Engine's to write,
  // except for FREE, which the pool stores there itself.
  struct Slot {
    SlotState state = SlotState::kFree;
    uint64_t offset = 0;
    uint64_t capacity = 0;
    bool fenced = false;  // HELD, dropped, waiting for its CUDA fence
  };

  // `max_memory`: the option as the user gave it (for messages).
  SlotPool(Arena* arena, uint32_t max_slots, uint64_t max_memory);
  ~SlotPool();
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  // Bytes batch regions may occupy: max_memory less the control area.
  uint64_t budget() const { return arena_->control()->max_memory - arena_->control()->data_offset; }
  uint32_t size() const { return static_cast<uint32_t>(slots_.size()); }
  const Slot& operator[](uint32_t slot) const { return slots_[slot]; }
  size_t free_count() const { return free_.size(); }

  // FREE -> `state` (DISPATCHED or FILLING): the warmest free slot, with a
  // region of at least `bytes` (or, failing that, of `at_least` when it is
  // smaller).  False when no slot or no room is free now (slots whose fences
  // completed are freed first); an error when the batch can never fit.
  Result<bool> Acquire(uint64_t bytes, uint64_t at_least, bool writer_backs, SlotState state, uint32_t* slot);
  // DISPATCHED/FILLING -> READY; `learn`: its `used` bytes size later regions.
  void Complete(uint32_t slot, uint64_t used, bool learn);
  // READY -> HELD (the training loop took it); false in any other state.
  bool Hold(uint32_t slot);
  // READY/HELD -> FREE, or fenced (HELD, CUDA on).  A second release, or one
  // of a slot in another state, does nothing.
  void Release(uint32_t slot);
  // Gives back the pages of idle free slots' regions, coldest first, so that
  // at most `regions` regions stay (those of slots in use count first; the
  // warmest free ones keep theirs), and every other free range of the
  // arena: a loader that lowered its prefetch or workers needs fewer, and
  // idle regions count in the machine's memory until given back.  Returns
  // the bytes given back.
  uint64_t TrimIdle(uint32_t regions);
  // Every slot DISPATCHED to `worker` -> FREE (regions kept): it died.
  // `worker_of(slot)` reads the worker a slot was dispatched to.
  template <typename WorkerOf>
  void ReclaimFrom(uint32_t worker, WorkerOf worker_of) {
    for (uint32_t s = 0; s < size(); ++s)
      if (slots_[s].state == SlotState::kDispatched && worker_of(s) == worker) Free(s);
  }

  // Gives `slot` a region of at least `bytes`: true when done, false when
  // there is no room now, an error when there never will be (more than the
  // budget: ResourceExhausted naming max_memory) or the arena cannot grow.
  // A new region is backed here, or, with `writer_backs`, by the worker
  // that writes it (in parallel, and not on the training loop's thread).
  // Room is made by taking regions back from idle free slots, coldest
  // first, then by giving warm free pages back to the kernel.  (A worker
  // whose batch outgrew its region gets a bigger one this way.)
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

  // Whether handing `slot` to the training loop would leave `workers` too
  // little of the budget (the caller copies the batch out instead).
  bool Crowded(uint32_t slot, uint32_t workers) const;

  // pin_memory (loader/cuda_host.h): every region is registered with CUDA
  // through `api` from now on (the ones made before too), and held slots
  // are fenced.  InvalidArgument when an entry point is missing.
  Status EnableCuda(const CudaRuntimeApi& api);
  bool cuda_on() const { return cuda_ != nullptr; }
  // The first error registering a region (kCudaSuccess: none).
  int pin_error() const;
  // Records a fence on `stream` and frees the fenced slots whose fence
  // completed.  Returns the runtime's error.
  int RecordFence(void* stream);
  // Frees the fenced slots whose fence is known complete.
  void FreeCompletedFences();
  // Waits for every fence (one more recorded first) and frees the fenced
  // slots.  True when there was one to wait for.
  bool DrainFences();
  // A forked copy of the pool: the parent's CUDA state is left alone.
  void AbandonCuda() { (void)cuda_.release(); }

  uint64_t resident_bytes() const { return alloc_.resident(); }
  uint64_t in_use_bytes() const { return alloc_.in_use(); }

 private:
  Status TooBig(uint64_t bytes) const;
  void FreeRegion(Slot& s);
  // Every warm free range of the arena gives its pages back (none: nothing
  // to do); the bytes given back.
  uint64_t DiscardWarmFree();
  // -> FREE now (its region kept, warm, on top of the free stack).
  void Free(uint32_t slot);
  void FreeFenced(uint64_t done);  // the fenced slots released before fence `done`

  Arena* arena_;
  uint64_t max_memory_;
  RegionAllocator alloc_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;   // free slot ids, LIFO (warm first)
  uint64_t expected_ = 0;        // largest batch seen
  bool variable_sizes_ = false;  // batches have changed size: add headroom
  uint64_t held_bytes_ = 0;
  std::unique_ptr<CudaHost> cuda_;  // pin_memory; destroyed before the arena is unmapped
  struct Fenced {
    uint32_t slot;
    uint64_t after;  // free once a fence numbered above this completes
  };
  std::deque<Fenced> fenced_;
};

}  // namespace stoker

#endif  // STOKER_LOADER_SLOT_POOL_H_
