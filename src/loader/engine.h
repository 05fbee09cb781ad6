// Engine: the main-process side of a loader, the dispatcher.  Owns the arena,
// the slot pool and the supervisor; puts fill tasks on workers' rings,
// collects completed slots and worker exits, answers workers that need a
// bigger region, and serves the training loop's side (hold, release,
// fences).  The slot pool (loader/slot_pool.h) owns what a slot is: its
// state machine, its region within the budget, and the CUDA fences that keep
// a dropped batch's slot until the GPU is done with it; the Engine calls it
// under one mutex and writes the shared slot headers workers read.
//
// Memory policy (docs/design/slot_pool.md): max_memory is a hard bound on
// the arena file, control area included.  Every slot owns at most one
// region, sized from the largest batch seen so far.  A worker whose batch
// does not fit asks for more (kNeedSpace); the engine answers while it waits
// for completions: with a bigger region, with "never" (the batch exceeds the
// whole budget: the worker reports a clear error), or with "retry" (no room
// now: the worker hands the task back untouched and the scheduler sends it
// again later, sized right).  No process ever waits on memory while holding
// some, so a full pool cannot deadlock.
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
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "loader/cuda_host.h"
#include "proc/proc_memory.h"
#include "proc/supervisor.h"
#include "shm/arena.h"
#include "loader/slot_pool.h"
#include "stoker/status.h"

namespace stoker {

struct EngineOptions {
  uint32_t num_workers = 0;
  // Every byte of shared memory the loader may use: the arena file (control
  // area and batch regions) never grows past it.
  uint64_t max_memory = uint64_t{1} << 30;
  uint32_t max_slots = 1024;
  // False when every reader is a thread of this process (native datasets):
  // the arena is private memory then, quicker to back (shm/arena.h).
  bool process_shared = true;
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
  uint64_t busy_ns;       // producing batches, since the process started
  double busy_fraction;   // busy time / time since it was started
  uint64_t queued;        // tasks in its ring
  uint64_t stage_ns[kStageCount];  // busy_ns by stage (core/stage.h)
  ProcessMemory memory;   // zero unless asked for
};

// Bytes are region bytes (what batches occupy in shared memory); the five
// *_bytes by state sum to resident_bytes.
struct EngineStats {
  uint64_t max_memory;        // the budget for all shared memory
  uint64_t budget_bytes;      // of which batch regions may use this much
  uint64_t committed_bytes;   // arena file size (freed ranges are holes: not memory)
  uint64_t arena_resident_bytes;  // memory the arena file holds (<= max_memory)
  uint64_t resident_bytes;    // backed region bytes
  uint64_t in_use_bytes;      // region bytes owned by slots not free
  uint64_t free_bytes;        // backed but unused (warm free regions)
  uint64_t queued_bytes;      // dispatched, not started
  uint64_t filling_bytes;     // a worker is writing a batch
  uint64_t ready_bytes;       // finished, waiting for the training loop
  uint64_t held_bytes;        // batches the training loop holds
  uint64_t expected_batch_bytes;
  uint32_t slots_total, slots_free, slots_queued, slots_filling, slots_ready, slots_held;
  uint32_t slots_fenced;       // of the held: dropped, kept until the GPU's copies out of them are done
  uint64_t need_space_events;  // a batch outgrew its region
  uint64_t cancelled;          // ... and there was no room: the task ran again later
  uint64_t spills;             // ready batches moved to private memory for the in-order one
  uint64_t copy_outs;          // batches copied out because the training loop held too much
  uint64_t delivered_batches, delivered_bytes;
  ProcessMemory main;          // this process (zero unless asked for)
  std::vector<WorkerStats> workers;
};

// InvalidArgument when max_memory is more than this process may ever use
// (MemTotal or its cgroup's limit); Engine::Create checks it too.
Status CheckMaxMemory(uint64_t max_memory);
// The default budget: a quarter of MemTotal / the cgroup's limit (whole
// pages), at most kDefaultMaxMemory and at least 1 MiB.  stoker.DataLoader and
// stoker::Loader both use it.
// The default budget's cap (Python reads it: DataLoader's DEFAULT_MAX_MEMORY).
inline constexpr uint64_t kDefaultMaxMemory = uint64_t{1} << 30;
uint64_t DefaultMaxMemory();

class Engine : public std::enable_shared_from_this<Engine> {
 public:
  static constexpr uint64_t kMinRegion = SlotPool::kMinRegion;

  static Result<std::shared_ptr<Engine>> Create(const EngineOptions& o);
  ~Engine();

  Arena& arena() { return *arena_; }
  const EngineOptions& options() const { return opts_; }

  // Queues "fill a slot for batch_id" on `worker`'s ring with `payload`
  // copied to the start of the slot's region, and sets *slot.  Returns false
  // when the ring is full or no slot or memory is free right now (retry after
  // Wait()), and ResourceExhausted when the batch can never fit max_memory.
  Result<bool> Dispatch(uint32_t worker, uint64_t batch_id, uint64_t generation, TaskKind kind,
                        const void* payload, uint64_t payload_bytes, uint32_t* slot);
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
  // READY/HELD -> FREE.  Thread-safe.  With CUDA fences (EnableCuda) a HELD
  // slot is FREE only once a fence recorded after this call has completed.
  void Release(uint32_t slot);

  // pin_memory (loader/cuda_host.h): from now on every slot's region is
  // registered with CUDA through `api` while it belongs to the slot, and
  // held slots are fenced.  InvalidArgument when an entry point is missing.
  // Main process only.
  Status EnableCuda(const CudaRuntimeApi& api);
  // The first error registering a region (0: none; after one, regions made
  // later are not pinned: their copies to the GPU are synchronous).
  int pin_error();
  // Records a fence on `stream` (the training loop's current stream, each
  // time it asks for a batch) and frees fenced slots whose fence completed.
  // Returns the runtime's error.
  int RecordFence(void* stream);
  // Waits for every fence (one more recorded first) and frees the fenced
  // slots: the pool has no room left otherwise.  True when one was freed.
  bool DrainFences();
  // Release of a READY batch whose bytes the caller copied to private memory
  // to make room for the batch the training loop waits for (counted).
  void Evict(uint32_t slot);
  // True when handing this slot to the training loop would leave workers too
  // little of the budget: the caller should copy the batch out and Release.
  bool ShouldCopyOut(uint32_t slot);
  // The workers that take batches now (the scheduler's active count, at most
  // num_workers): ShouldCopyOut leaves room for a batch of each.
  void SetActiveWorkers(uint32_t n) { active_workers_.store(n, std::memory_order_relaxed); }
  // SlotPool::TrimIdle: at most `regions` regions stay backed (an
  // autotuner that lowered prefetch or workers gives the rest back).
  uint64_t TrimIdle(uint32_t regions);

  // In-process loading (num_workers == 0): takes a free slot with a region
  // of at least `bytes` for the caller to fill (then CompleteLocal makes it
  // READY).  False when the budget has no room now (the caller keeps the
  // batch in private memory); ResourceExhausted when it never can.
  Result<bool> AcquireLocal(uint64_t bytes, uint32_t* slot);
  uint8_t* LocalRegion(uint32_t slot, uint64_t* capacity);
  // A batch was handed out from private memory instead of the pool.
  void CountCopyOut() {
    std::lock_guard<std::mutex> g(mu_);
    ++copy_outs_;
  }
  void CompleteLocal(uint32_t slot, uint64_t used);

  // After worker `worker` died: appends the completions it published before
  // dying (still in its done ring) to *done, takes back every slot still
  // dispatched to it (FREE again, region kept), and resets its rings so a
  // replacement process can take the same id.  REQUIRES: the process is gone.
  Status ReclaimWorker(uint32_t worker, std::vector<Completion>* done);

  // Starts supervising worker `id`'s process.
  Status Watch(uint32_t worker, pid_t pid);
  void Forget(uint32_t worker);
  // Closes `worker`'s task ring and wakes it: it leaves as at a shutdown
  // (a worker retired by the autotuner; Forget it first).
  void CloseWorker(uint32_t worker);
  // The epoch workers see (WorkerPort::epoch) from their next task on: the
  // store is published by the ring push that hands them that task.
  void SetEpoch(int64_t epoch) { arena_->control()->epoch.store(epoch, std::memory_order_release); }
  // The seed all workers share for the next iteration (WorkerPort::shared_seed),
  // published to each by the resume message that starts that iteration.
  void SetSharedSeed(uint64_t seed) { arena_->control()->shared_seed.store(seed, std::memory_order_release); }
  // Closes every ring, sets the shutdown flag and wakes every waiter.
  void Shutdown();
  bool shut_down() const { return shutdown_; }

  // With process_memory, also RSS/PSS/USS of this process and each worker
  // (reads /proc: about 0.1 ms per process).
  EngineStats Stats(bool process_memory = false);
  // Bytes batch regions may occupy: max_memory less the control area.
  uint64_t budget() const { return pool_.budget(); }
  // The batch size the pool has learnt (0 before the first batch).
  uint64_t expected_batch_bytes() const { return pool_.expected(); }

 private:
  Engine(const EngineOptions& o, std::shared_ptr<Arena> a);
  void HandleNeedSpace(uint32_t slot);
  // A finished slot's header as a Completion (after the acquire of its state).
  Completion ReadCompletion(uint32_t slot, uint32_t worker) const;
  bool AnythingPending();
  void OnWorkerExit(uint32_t worker, const ExitInfo& info);

  EngineOptions opts_;
  std::shared_ptr<Arena> arena_;
  std::mutex mu_;  // guards everything below except the atomics
  SlotPool pool_;  // the slots' states, regions, budget and CUDA fences; destroyed before arena_
  uint64_t need_space_events_ = 0, cancelled_ = 0, spills_ = 0, copy_outs_ = 0;
  uint64_t delivered_batches_ = 0, delivered_bytes_ = 0;
  std::vector<int64_t> watch_ns_;       // when each worker was started (Watch)
  std::vector<uint64_t> busy_base_ns_;  // its busy_ns then
  std::mutex exits_mu_;
  std::vector<Completion> exits_;  // worker exits not yet reported
  std::atomic<bool> exits_pending_{false};
  bool shutdown_ = false;
  std::atomic<uint32_t> active_workers_;  // SetActiveWorkers (num_workers until told)
  pid_t owner_;
  std::unique_ptr<Supervisor> supervisor_;
  int trace_source_ = 0;  // the trace's counters (SampleTraceCounters)
  void SampleTraceCounters();
};

}  // namespace stoker

#endif  // STOKER_LOADER_ENGINE_H_
