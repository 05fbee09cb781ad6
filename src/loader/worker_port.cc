#include "loader/worker_port.h"

#include <algorithm>

#include "core/trace.h"

#include "sync/doorbell.h"
#include "sync/futex.h"
#include "sync/spsc_ring.h"

namespace stoker {

WorkerPort::WorkerPort(std::shared_ptr<Arena> arena, uint32_t worker_id)
    : arena_(std::move(arena)), id_(worker_id), wb_(arena_->worker(worker_id)) {
  wb_->state.store(static_cast<uint32_t>(WorkerState::kIdle), std::memory_order_release);
}

Status WorkerPort::Next(Task* t, int64_t timeout_ns) {
  SpscRing ring(&wb_->tasks);
  ControlBlock* c = arena_->control();
  wb_->state.store(static_cast<uint32_t>(WorkerState::kIdle), std::memory_order_relaxed);
  LeaveAllStages();
  uint64_t e = 0;
  auto ready = [&] {
    return !ring.Empty() || ring.Closed() || c->shutdown.load(std::memory_order_acquire) != 0;
  };
  const int64_t deadline = timeout_ns < 0 ? -1 : MonotonicNanos() + timeout_ns;
  auto closed = [] {
    TraceFlushThread(/*now=*/true);  // (the worker exits next: what it recorded first)
    return Status::Closed("loader shut down");
  };
  for (;;) {
    if (c->shutdown.load(std::memory_order_acquire) != 0) return closed();
    if (ring.TryPop(&e)) break;
    if (ring.Closed()) return closed();
    // A trace's events this thread holds are written within 0.1 s, idle or
    // not: the wait ends for that (core/trace.h).
    const int64_t due = TraceFlushThread(/*now=*/false);
    int64_t wait = deadline < 0 ? -1 : std::max<int64_t>(0, deadline - MonotonicNanos());
    const bool for_trace = due >= 0 && (wait < 0 || due < wait);
    if (for_trace) wait = std::max<int64_t>(due, 1'000'000);
    if (!Doorbell(&wb_->task_bell).WaitUntil(ready, wait)) {
      if (for_trace) continue;
      return Status::Timeout("no task");
    }
  }
  t->msg = TaskEntryMsg(e);
  if (t->msg == TaskMsg::kResume) {
    t->generation = TaskEntryValue(e);
    return Status::OK();
  }
  if (t->msg != TaskMsg::kFill || TaskEntryValue(e) >= c->max_slots)
    return Status::Internal("corrupt task entry " + std::to_string(e) + " on worker " + std::to_string(id_));
  const auto slot = static_cast<uint32_t>(TaskEntryValue(e));
  SlotHeader* h = arena_->slot(slot);
  h->state.store(static_cast<uint32_t>(SlotState::kFilling), std::memory_order_release);
  t->slot = slot;
  t->batch_id = h->batch_id;
  t->generation = h->generation;
  t->kind = static_cast<TaskKind>(h->task_kind);
  t->payload = arena_->base() + h->region_offset;
  t->payload_bytes = h->task_bytes;
  wb_->current_slot.store(slot + 1, std::memory_order_relaxed);
  wb_->state.store(static_cast<uint32_t>(WorkerState::kBusy), std::memory_order_relaxed);
  task_batch_ = t->batch_id;
  task_generation_ = t->generation;
  TraceFlushThread(/*now=*/false);  // (one that is never idle: when due)
  task_stages_ = ThreadStageTimes();  // (in no stage: no clock read)
  collating_ = false;
  task_start_ns_ = SwitchStage(Stage::kRead);  // (the stage clock is CLOCK_MONOTONIC, as MonotonicNanos)
  return Status::OK();
}

void WorkerPort::BeginCollate() {
  if (collating_) return;  // (a collate_fn's, then the publish's: one stage)
  collating_ = true;
  SwitchStage(Stage::kCollate);
}

uint8_t* WorkerPort::Region(uint32_t slot, uint64_t* capacity) {
  SlotHeader* h = arena_->slot(slot);
  *capacity = h->region_capacity;
  return arena_->base() + h->region_offset;
}

Result<uint8_t*> WorkerPort::Reserve(uint32_t slot, uint64_t bytes) {
  SlotHeader* h = arena_->slot(slot);
  if (bytes <= h->region_capacity) return Backed(h);
  h->needed_bytes = bytes;
  h->state.store(static_cast<uint32_t>(SlotState::kNeedSpace), std::memory_order_release);
  SpscRing(&wb_->done).TryPush(slot);
  ControlBlock* c = arena_->control();
  Doorbell(&c->done_bell).Ring();
  auto answered = [&] {
    return h->state.load(std::memory_order_acquire) != static_cast<uint32_t>(SlotState::kNeedSpace) ||
           c->shutdown.load(std::memory_order_acquire) != 0;
  };
  {
    StageScope waiting(Stage::kWaitMemory);
    Doorbell(&h->bell).WaitUntil(answered, -1);
  }
  if (h->state.load(std::memory_order_acquire) == static_cast<uint32_t>(SlotState::kNeedSpace))
    return Status::Closed("loader shut down while waiting for memory");
  if (h->needed_bytes == kSpaceRetry) return Status::Cancelled("no room in the slot pool now; the task runs again later");
  if (h->needed_bytes == kSpaceNever || h->region_capacity < bytes) {
    const uint64_t budget = c->max_memory - c->data_offset;
    return Status::ResourceExhausted(
        "this batch needs " + std::to_string(bytes) + " bytes of shared memory, more than max_memory=" +
        std::to_string(c->max_memory) + " allows (" + std::to_string(budget) +
        " bytes for batches); raise max_memory or lower batch_size");
  }
  return Backed(h);
}

Result<uint8_t*> WorkerPort::Backed(SlotHeader* h) {
  if (!h->region_backed) {
    STOKER_RETURN_IF_ERROR(arena_->Populate(h->region_offset, h->region_capacity));
    h->region_backed = 1;
  }
  return arena_->base() + h->region_offset;
}

void WorkerPort::Publish(uint32_t slot, SlotResult result, uint64_t used) {
  int64_t now = LeaveAllStages();
  if (now == 0) now = MonotonicNanos();
  const StageTimes done = ThreadStageTimes();
  for (int i = 0; i < kStageCount; ++i)
    if (const uint64_t d = done.ns[i] - task_stages_.ns[i]) wb_->stage_ns[i].fetch_add(d, std::memory_order_relaxed);
  const bool tracing = TraceOn();
  if (tracing) {  // (the hand-over is a slice of the trace's, not timed otherwise: it is short)
    EnterStage(Stage::kPublish);
    TraceFlow(/*out=*/true, BatchFlowId(arena_->control()->loader_id, task_generation_, task_batch_));
  }
  SlotHeader* h = arena_->slot(slot);
  h->result = static_cast<uint32_t>(result);
  h->used_bytes = used;
  h->state.store(static_cast<uint32_t>(SlotState::kReady), std::memory_order_release);
  wb_->busy_ns.fetch_add(static_cast<uint64_t>(now - task_start_ns_), std::memory_order_relaxed);
  wb_->batches.fetch_add(1, std::memory_order_relaxed);
  wb_->current_slot.store(0, std::memory_order_relaxed);
  SpscRing(&wb_->done).TryPush(slot);
  Doorbell(&arena_->control()->done_bell).Ring();
  if (tracing) LeaveStage();
}

}  // namespace stoker
