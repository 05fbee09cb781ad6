// Engine: the main-process side of a loader.  Owns the arena, the region
// allocator, the slot table and the supervisor; dispatches fill tasks to
// workers, collects completed slots, answers workers that need a bigger
// region, and takes slots back when the training loop drops a batch.
//
// Memory policy (docs/design/slot_pool.md): every slot owns at most one
// region.  Regions are sized from the largest batch seen so far; a worker
// whose batch does not fit asks for more (kNeedSpace) and the engine answers
// while it waits for completions.  Resident region bytes stay within
// max_memory; only when the alternative is a deadlock (a batch bigger than
// what can ever be freed) does a region go past it, up to the hard cap, and
// the event is counted so the caller can warn once.
//
// Thread safety: Dispatch, Wait, SendResume and Shutdown are called from one
// thread (the thread iterating the loader).  Release, MarkHeld, Stats and
// ShouldCopyOut may be called from any thread (tensor deleters).
// Lifetime: views of slot memory hold a shared_ptr<Engine>, so the arena
// stays mapped until the last batch is gone.
#ifndef STOKER_LOADER_ENGINE_H_
#define STOKER_LOADER_ENGINE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "proc/supervisor.h"
#include "shm/arena.h"
#include "shm/region_allocator.h"
#include "stoker/status.h"

namespace stoker {

struct EngineOptions {
  uint32_t num_workers = 0;
  uint64_t max_memory = uint64_t{1} << 30;  // budget for slot regions, bytes
  uint64_t hard_cap = 0;    // most region bytes ever; 0: max(2 * max_memory, max_memory + 256 MiB)
  uint32_t max_slots = 1024;
};

struct Completion {
  enum class Kind { kBatch, kWorkerExit };
  Kind kind = Kind::kBatch;
  uint32_t slot = 0;
  uint32_t worker = 0;
  uint64_t batch_id = 0;
  uint64_t generation = 0;
  SlotResult result = SlotResult::kOk;
  ExitInfo exit;  // kWorkerExit only
};

struct WorkerStats {
  int pid;
  WorkerState state;
  uint64_t batches;
  uint64_t busy_ns;
  uint64_t queued;  // tasks in its ring
};

struct EngineStats {
  uint64_t max_memory, hard_cap;
  uint64_t committed_bytes;   // arena file size
  uint64_t resident_bytes;    // backed region bytes (in use + warm free)
  uint64_t in_use_bytes;      // region bytes owned by slots
  uint64_t held_bytes;        // region bytes of batches the training loop holds
  uint64_t expected_batch_bytes;
  uint32_t slots_total, slots_free, slots_queued, slots_filling, slots_ready, slots_held;
  uint64_t over_budget_events, need_space_events, copy_outs;
  std::vector<WorkerStats> workers;
};

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  static constexpr uint64_t kMinRegion = 64 * 1024;  // room for any error report

  static Result<std::shared_ptr<Engine>> Create(const EngineOptions& o);
  ~Engine();

  Arena& arena() { return *arena_; }
  const EngineOptions& options() const { return opts_; }

  // Queues "fill a slot for batch_id" on `worker`'s ring with `payload`
  // copied to the start of the slot's region.  Returns the slot id, or
  // ResourceExhausted when the ring is full or no slot/memory is free
  // (retry after Wait()).  allow_over_budget lets a region exceed
  // max_memory, for when nothing in flight could free memory.
  Result<uint32_t> Dispatch(uint32_t worker, uint64_t batch_id, uint64_t generation,
                            TaskKind kind, const void* payload, uint64_t payload_bytes,
                            bool allow_over_budget);
  // Tells `worker` to restart its iterable dataset for `generation`.
  Status SendResume(uint32_t worker, uint64_t generation);
  bool RingFull(uint32_t worker);

  // Appends completions (finished slots, worker exits) to *out, waiting up
  // to timeout_ns (< 0: no limit) for the first.  Returns Timeout when none
  // came in time, Interrupted when a signal arrived (retry after handling
  // it).  Space requests are answered inside.
  Status Wait(int64_t timeout_ns, std::vector<Completion>* out);

  // Region bytes of a READY/HELD slot, and its used size.
  const uint8_t* SlotRegion(uint32_t slot, uint64_t* used, uint64_t* capacity) const;
  // READY -> HELD: the training loop now references the slot.
  void MarkHeld(uint32_t slot);
  // READY/HELD -> FREE.  Thread-safe.
  void Release(uint32_t slot);
  // True when handing this slot to the training loop would leave workers too
  // little of the budget: the caller should copy the batch out and Release.
  bool ShouldCopyOut(uint32_t slot);

  // In-process loading (num_workers == 0): takes a free slot with a region
  // of at least `bytes` for the caller to fill, then CompleteLocal makes it
  // READY.  The budget may be exceeded (counted) rather than fail.
  Result<uint32_t> AcquireLocal(uint64_t bytes);
  uint8_t* LocalRegion(uint32_t slot, uint64_t* capacity);
  void CompleteLocal(uint32_t slot, uint64_t used);

  // After worker `worker` died: appends the completions it published before
  // dying (still in its done ring) to *done, takes back every slot still
  // dispatched to it (FREE again, region kept), and resets its rings so a
  // replacement process can take the same id.  REQUIRES: the process is gone.
  Status ReclaimWorker(uint32_t worker, std::vector<Completion>* done);

  // Starts supervising worker `id`'s process.
  Status Watch(uint32_t worker, pid_t pid);
  void Forget(uint32_t worker);
  // Closes every ring, sets the shutdown flag and wakes every waiter.
  void Shutdown();
  bool shut_down() const { return shutdown_; }

  EngineStats Stats();
  // Cheap counters for per-batch checks (Stats() walks every slot).
  uint64_t over_budget_events() {
    std::lock_guard<std::mutex> g(mu_);
    return over_budget_events_;
  }

 private:
  Engine(const EngineOptions& o, std::shared_ptr<Arena> a);
  // REQUIRES: mu_ held.  Gives `slot` a region of at least `bytes`.
  Status SizeRegion(uint32_t slot, uint64_t bytes, bool allow_over_budget);
  void HandleNeedSpace(uint32_t slot);
  // A finished slot's header as a Completion (after the acquire of its state).
  Completion ReadCompletion(uint32_t slot, uint32_t worker) const;
  bool AnythingPending();
  void OnWorkerExit(uint32_t worker, const ExitInfo& info);

  struct LocalSlot {
    SlotState state = SlotState::kFree;
    uint64_t offset = 0;
    uint64_t capacity = 0;
  };

  EngineOptions opts_;
  std::shared_ptr<Arena> arena_;
  std::mutex mu_;  // guards everything below except the atomics
  RegionAllocator alloc_;
  std::vector<LocalSlot> slots_;
  std::vector<uint32_t> free_;   // free slot ids, LIFO (warm first)
  uint64_t expected_ = 0;        // largest batch seen
  bool variable_sizes_ = false;  // batches have changed size: add headroom
  uint64_t held_bytes_ = 0;
  uint64_t over_budget_events_ = 0, need_space_events_ = 0, copy_outs_ = 0;
  std::mutex exits_mu_;
  std::vector<Completion> exits_;  // worker exits not yet reported
  std::atomic<bool> exits_pending_{false};
  bool shutdown_ = false;
  pid_t owner_;
  std::unique_ptr<Supervisor> supervisor_;
};

}  // namespace stoker

#endif  // STOKER_LOADER_ENGINE_H_
