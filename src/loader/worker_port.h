// WorkerPort: the worker-process side of a loader.  Takes tasks from the
// worker's ring, hands out the slot's region to write a batch into (asking
// the main process for a bigger one when it does not fit) and publishes the
// finished slot on the done ring.
//
// Thread safety: one thread per port (the worker's main thread).
#ifndef STOKER_LOADER_WORKER_PORT_H_
#define STOKER_LOADER_WORKER_PORT_H_

#include <cstdint>
#include <memory>

#include "core/stage.h"
#include "shm/arena.h"
#include "stoker/status.h"

namespace stoker {

struct Task {
  TaskMsg msg = TaskMsg::kFill;
  uint32_t slot = 0;
  uint64_t batch_id = 0;
  uint64_t generation = 0;      // for kResume: the new generation
  TaskKind kind = TaskKind::kIndices;
  const uint8_t* payload = nullptr;  // valid until Reserve() or Publish()
  uint64_t payload_bytes = 0;
};

class WorkerPort {
 public:
  WorkerPort(std::shared_ptr<Arena> arena, uint32_t worker_id);

  // Blocks for the next task or message (timeout_ns < 0: no limit).
  // Returns Closed once the main process shut the loader down.
  Status Next(Task* t, int64_t timeout_ns);
  // Returns the slot's region, at least `bytes` long, asking the main
  // process for a bigger one if needed (blocks until it answers), and backs
  // a new region with memory before handing it out.  Returns
  // ResourceExhausted when the batch can never fit max_memory or the machine
  // has no memory to back it (the slot's region, >= 64 KiB, is still usable
  // for an error report), and Cancelled when there is no room now: publish
  // kCancelled without touching the region, and the task comes back later.
  Result<uint8_t*> Reserve(uint32_t slot, uint64_t bytes);
  uint8_t* Region(uint32_t slot, uint64_t* capacity);
  // Hands the slot back to the main process with `used` bytes of result.
  void Publish(uint32_t slot, SlotResult result, uint64_t used);
  // The task's samples are read: what follows until Publish is collation
  // (core/stage.h; stats() and the trace tell the two apart).
  void BeginCollate();

  uint32_t id() const { return id_; }
  // The loader's epoch (Engine::SetEpoch), -1 until set.
  int64_t epoch() const { return arena_->control()->epoch.load(std::memory_order_acquire); }
  // The iteration's shared seed (Engine::SetSharedSeed), read after a resume.
  uint64_t shared_seed() const { return arena_->control()->shared_seed.load(std::memory_order_acquire); }
  Arena& arena() { return *arena_; }

 private:
  // The region of `h`, backed with memory first if the engine left it to us.
  Result<uint8_t*> Backed(SlotHeader* h);

  std::shared_ptr<Arena> arena_;
  uint32_t id_;
  WorkerBlock* wb_;
  int64_t task_start_ns_ = 0;
  StageTimes task_stages_;  // this thread's stage clock when the task began
  uint64_t task_batch_ = 0, task_generation_ = 0;
  bool collating_ = false;  // BeginCollate since the task began
};

}  // namespace stoker

#endif  // STOKER_LOADER_WORKER_PORT_H_
