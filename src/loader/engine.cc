#include "loader/engine.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "sync/doorbell.h"
#include "sync/spsc_ring.h"

namespace stoker {

namespace {
uint64_t DefaultHardCap(uint64_t max_memory) {
  return std::max(2 * max_memory, max_memory + (uint64_t{256} << 20));
}
}  // namespace

Result<std::shared_ptr<Engine>> Engine::Create(const EngineOptions& o_in) {
  EngineOptions o = o_in;
  if (o.max_memory < 2 * kMinRegion)
    return Status::InvalidArgument("max_memory must be at least " + std::to_string(2 * kMinRegion) +
                                   " bytes, got " + std::to_string(o.max_memory));
  if (o.hard_cap == 0) o.hard_cap = DefaultHardCap(o.max_memory);
  if (o.hard_cap < o.max_memory)
    return Status::InvalidArgument("the hard cap (" + std::to_string(o.hard_cap) +
                                   " bytes) must not be below max_memory (" +
                                   std::to_string(o.max_memory) + " bytes)");
  ArenaGeometry g;
  g.num_workers = o.num_workers;
  g.max_slots = o.max_slots;
  // Control area plus the region heap; computed again inside Create.
  const uint64_t control = AlignUp(sizeof(ControlBlock), 4096) +
                           AlignUp(uint64_t{o.num_workers} * sizeof(WorkerBlock), 4096) +
                           AlignUp(uint64_t{o.max_slots} * sizeof(SlotHeader), 4096) + 4096;
  g.reserve_bytes = control + AlignUp(o.hard_cap, 4096);
  STOKER_ASSIGN_OR_RETURN(std::shared_ptr<Arena> arena, Arena::Create(g));
  return std::shared_ptr<Engine>(new Engine(o, std::move(arena)));
}

Engine::Engine(const EngineOptions& o, std::shared_ptr<Arena> a)
    : opts_(o),
      arena_(std::move(a)),
      alloc_(arena_->control()->data_offset, arena_->reserve_bytes(), o.max_memory),
      slots_(o.max_slots),
      owner_(getpid()) {
  free_.reserve(o.max_slots);
  for (uint32_t i = o.max_slots; i > 0; --i) free_.push_back(i - 1);
  supervisor_ = std::make_unique<Supervisor>(
      [this](uint32_t id, const ExitInfo& info) { OnWorkerExit(id, info); });
}

Engine::~Engine() {
  if (getpid() != owner_) {
    (void)supervisor_.release();  // forked copy: leave the parent's thread alone
    return;
  }
  supervisor_.reset();
}

Status Engine::SizeRegion(uint32_t slot, uint64_t bytes, bool allow_over_budget) {
  LocalSlot& s = slots_[slot];
  if (s.capacity >= bytes) return Status::OK();
  bytes = AlignUp(std::max(bytes, kMinRegion), 4096);
  if (bytes > opts_.hard_cap)
    return Status::ResourceExhausted(
        "a batch needs " + std::to_string(bytes) + " bytes, more than the slot arena's hard cap of " +
        std::to_string(opts_.hard_cap) + " bytes; raise max_memory (now " +
        std::to_string(opts_.max_memory) + ")");
  if (s.capacity) {
    alloc_.Free(s.offset, s.capacity);
    s.capacity = 0;
  }
  auto off = alloc_.Allocate(bytes, false);
  // Take regions back from idle free slots, coldest (bottom of the stack) first.
  for (size_t i = 0; !off && i < free_.size(); ++i) {
    LocalSlot& idle = slots_[free_[i]];
    if (idle.capacity == 0) continue;
    alloc_.Free(idle.offset, idle.capacity);
    idle.capacity = 0;
    off = alloc_.Allocate(bytes, false);
  }
  if (!off && alloc_.warm_free() > 0) {
    for (auto [o, len] : alloc_.DiscardFree()) (void)arena_->Discard(o, len);
    off = alloc_.Allocate(bytes, false);
  }
  if (!off && allow_over_budget) {
    off = alloc_.Allocate(bytes, true);
    if (off) ++over_budget_events_;
  }
  if (!off)
    return Status::ResourceExhausted("no " + std::to_string(bytes) + "-byte region free within max_memory=" +
                                     std::to_string(opts_.max_memory));
  STOKER_RETURN_IF_ERROR(arena_->Grow(alloc_.top()));
  s.offset = *off;
  s.capacity = bytes;
  return Status::OK();
}

Result<uint32_t> Engine::Dispatch(uint32_t worker, uint64_t batch_id, uint64_t generation,
                                  TaskKind kind, const void* payload, uint64_t payload_bytes,
                                  bool allow_over_budget) {
  if (worker >= opts_.num_workers) return Status::InvalidArgument("no worker " + std::to_string(worker));
  WorkerBlock* wb = arena_->worker(worker);
  SpscRing ring(&wb->tasks);
  if (ring.Full()) return Status::ResourceExhausted("worker " + std::to_string(worker) + "'s task ring is full");
  std::lock_guard<std::mutex> g(mu_);
  if (shutdown_) return Status::Closed("the loader is shut down");
  if (free_.empty()) return Status::ResourceExhausted("all " + std::to_string(opts_.max_slots) + " slots are in use");
  const uint32_t slot = free_.back();
  uint64_t want = std::max(payload_bytes, expected_);
  if (variable_sizes_) want += want / 4;
  Status st = SizeRegion(slot, want, allow_over_budget);
  if (!st.ok()) return st;
  free_.pop_back();
  LocalSlot& s = slots_[slot];
  s.state = SlotState::kDispatched;
  SlotHeader* h = arena_->slot(slot);
  h->worker = worker;
  h->result = static_cast<uint32_t>(SlotResult::kOk);
  h->task_kind = static_cast<uint32_t>(kind);
  h->batch_id = batch_id;
  h->generation = generation;
  h->region_offset = s.offset;
  h->region_capacity = s.capacity;
  h->task_bytes = payload_bytes;
  h->used_bytes = 0;
  h->needed_bytes = 0;
  if (payload_bytes) std::memcpy(arena_->base() + s.offset, payload, payload_bytes);
  h->state.store(static_cast<uint32_t>(SlotState::kDispatched), std::memory_order_release);
  ring.TryPush(MakeTaskEntry(TaskMsg::kFill, slot));  // cannot fail: checked Full above
  Doorbell(&wb->task_bell).Ring();
  return slot;
}

Status Engine::SendResume(uint32_t worker, uint64_t generation) {
  WorkerBlock* wb = arena_->worker(worker);
  SpscRing ring(&wb->tasks);
  if (!ring.TryPush(MakeTaskEntry(TaskMsg::kResume, generation)))
    return Status::ResourceExhausted("worker " + std::to_string(worker) + "'s task ring is full");
  Doorbell(&wb->task_bell).Ring();
  return Status::OK();
}

bool Engine::RingFull(uint32_t worker) { return SpscRing(&arena_->worker(worker)->tasks).Full(); }

void Engine::HandleNeedSpace(uint32_t slot) {
  SlotHeader* h = arena_->slot(slot);
  const uint64_t needed = h->needed_bytes;
  {
    std::lock_guard<std::mutex> g(mu_);
    ++need_space_events_;
    if (expected_ != 0 && needed != expected_) variable_sizes_ = true;
    expected_ = std::max(expected_, needed);
    // Answering is what keeps the in-order batch moving, so it may go over
    // budget (counted, and warned about by the caller).
    Status st = SizeRegion(slot, needed, /*allow_over_budget=*/true);
    LocalSlot& s = slots_[slot];
    h->region_offset = s.offset;
    h->region_capacity = s.capacity;
    // On failure the region stays as it is (>= kMinRegion) and the worker
    // reports the error there: needed_bytes = 0 tells it so.
    if (!st.ok()) h->needed_bytes = 0;
  }
  h->state.store(static_cast<uint32_t>(SlotState::kFilling), std::memory_order_release);
  Doorbell(&h->bell).Ring();
}

Completion Engine::ReadCompletion(uint32_t slot, uint32_t worker) const {
  const SlotHeader* h = arena_->slot(slot);
  Completion c;
  c.slot = slot;
  c.worker = worker;
  c.batch_id = h->batch_id;
  c.generation = h->generation;
  c.result = static_cast<SlotResult>(h->result);
  return c;
}

bool Engine::AnythingPending() {
  if (exits_pending_.load(std::memory_order_acquire)) return true;
  for (uint32_t w = 0; w < opts_.num_workers; ++w)
    if (!SpscRing(&arena_->worker(w)->done).Empty()) return true;
  return false;
}

Status Engine::Wait(int64_t timeout_ns, std::vector<Completion>* out) {
  const size_t before = out->size();
  const int64_t deadline = timeout_ns < 0 ? -1 : MonotonicNanos() + timeout_ns;
  Doorbell bell(&arena_->control()->done_bell);
  for (;;) {
    for (uint32_t w = 0; w < opts_.num_workers; ++w) {
      SpscRing ring(&arena_->worker(w)->done);
      uint64_t v;
      while (ring.TryPop(&v)) {
        const auto slot = static_cast<uint32_t>(v);
        if (slot >= opts_.max_slots) continue;  // corrupt entry from a dying worker
        SlotHeader* h = arena_->slot(slot);
        const auto st = static_cast<SlotState>(h->state.load(std::memory_order_acquire));
        if (st == SlotState::kNeedSpace) {
          HandleNeedSpace(slot);
          continue;
        }
        Completion c = ReadCompletion(slot, w);
        {
          std::lock_guard<std::mutex> g(mu_);
          slots_[slot].state = SlotState::kReady;
          if (c.result == SlotResult::kOk && h->used_bytes > expected_) {
            if (expected_ != 0) variable_sizes_ = true;
            expected_ = h->used_bytes;
          }
        }
        out->push_back(c);
      }
    }
    if (exits_pending_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> g(exits_mu_);
      out->insert(out->end(), exits_.begin(), exits_.end());
      exits_.clear();
      exits_pending_.store(false, std::memory_order_release);
    }
    if (out->size() > before) return Status::OK();
    int64_t left = -1;
    if (deadline >= 0) {
      left = deadline - MonotonicNanos();
      if (left <= 0) return Status::Timeout("no batch arrived in time");
    }
    bool interrupted = false;
    bell.WaitUntil([this] { return AnythingPending(); }, left, &interrupted);
    if (interrupted) return Status::Interrupted("a signal arrived while waiting for a batch");
  }
}

const uint8_t* Engine::SlotRegion(uint32_t slot, uint64_t* used, uint64_t* capacity) const {
  const SlotHeader* h = arena_->slot(slot);
  *used = h->used_bytes;
  *capacity = h->region_capacity;
  return arena_->base() + h->region_offset;
}

void Engine::MarkHeld(uint32_t slot) {
  std::lock_guard<std::mutex> g(mu_);
  LocalSlot& s = slots_[slot];
  if (s.state != SlotState::kReady) return;
  s.state = SlotState::kHeld;
  held_bytes_ += s.capacity;
}

void Engine::Release(uint32_t slot) {
  std::lock_guard<std::mutex> g(mu_);
  LocalSlot& s = slots_[slot];
  if (s.state == SlotState::kHeld) held_bytes_ -= s.capacity;
  else if (s.state != SlotState::kReady) return;  // double release: ignore
  s.state = SlotState::kFree;
  arena_->slot(slot)->state.store(static_cast<uint32_t>(SlotState::kFree), std::memory_order_release);
  free_.push_back(slot);
}

bool Engine::ShouldCopyOut(uint32_t slot) {
  std::lock_guard<std::mutex> g(mu_);
  const uint64_t reserve = std::max<uint64_t>(expected_, kMinRegion) * std::max<uint32_t>(1, opts_.num_workers);
  const uint64_t cap = slots_[slot].capacity;
  const bool out = held_bytes_ + cap + reserve > opts_.max_memory ||
                   free_.size() < std::max<uint32_t>(2, opts_.num_workers);
  if (out) ++copy_outs_;
  return out;
}

Result<uint32_t> Engine::AcquireLocal(uint64_t bytes) {
  std::lock_guard<std::mutex> g(mu_);
  if (free_.empty()) return Status::ResourceExhausted("all " + std::to_string(opts_.max_slots) + " slots are in use");
  const uint32_t slot = free_.back();
  STOKER_RETURN_IF_ERROR(SizeRegion(slot, std::max(bytes, expected_), /*allow_over_budget=*/true));
  free_.pop_back();
  slots_[slot].state = SlotState::kFilling;
  SlotHeader* h = arena_->slot(slot);
  h->region_offset = slots_[slot].offset;
  h->region_capacity = slots_[slot].capacity;
  h->result = static_cast<uint32_t>(SlotResult::kOk);
  h->state.store(static_cast<uint32_t>(SlotState::kFilling), std::memory_order_relaxed);
  return slot;
}

uint8_t* Engine::LocalRegion(uint32_t slot, uint64_t* capacity) {
  SlotHeader* h = arena_->slot(slot);
  *capacity = h->region_capacity;
  return arena_->base() + h->region_offset;
}

void Engine::CompleteLocal(uint32_t slot, uint64_t used) {
  std::lock_guard<std::mutex> g(mu_);
  SlotHeader* h = arena_->slot(slot);
  h->used_bytes = used;
  h->state.store(static_cast<uint32_t>(SlotState::kReady), std::memory_order_relaxed);
  slots_[slot].state = SlotState::kReady;
  if (used > expected_) {
    if (expected_ != 0) variable_sizes_ = true;
    expected_ = used;
  }
}

Status Engine::ReclaimWorker(uint32_t worker, std::vector<Completion>* done) {
  if (worker >= opts_.num_workers) return Status::InvalidArgument("no worker " + std::to_string(worker));
  WorkerBlock* wb = arena_->worker(worker);
  SpscRing ring(&wb->done);
  uint64_t v;
  while (ring.TryPop(&v)) {
    const auto slot = static_cast<uint32_t>(v);
    if (slot >= opts_.max_slots) continue;
    SlotHeader* h = arena_->slot(slot);
    if (h->state.load(std::memory_order_acquire) != static_cast<uint32_t>(SlotState::kReady)) continue;
    Completion c = ReadCompletion(slot, worker);
    std::lock_guard<std::mutex> g(mu_);
    slots_[slot].state = SlotState::kReady;
    done->push_back(c);
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    for (uint32_t s = 0; s < opts_.max_slots; ++s) {
      if (slots_[s].state != SlotState::kDispatched || arena_->slot(s)->worker != worker) continue;
      slots_[s].state = SlotState::kFree;
      arena_->slot(s)->state.store(static_cast<uint32_t>(SlotState::kFree), std::memory_order_release);
      free_.push_back(s);
    }
  }
  // Only this process touches the rings now: start them afresh.
  for (RingLayout* r : {&wb->tasks, &wb->done}) {
    r->head.store(0, std::memory_order_relaxed);
    r->tail.store(0, std::memory_order_relaxed);
    r->closed.store(0, std::memory_order_relaxed);
  }
  wb->task_bell.sleepers.store(0, std::memory_order_relaxed);
  wb->pid.store(0, std::memory_order_relaxed);
  wb->current_slot.store(0, std::memory_order_relaxed);
  wb->state.store(static_cast<uint32_t>(WorkerState::kStarting), std::memory_order_release);
  return Status::OK();
}

Status Engine::Watch(uint32_t worker, pid_t pid) {
  if (worker >= opts_.num_workers) return Status::InvalidArgument("no worker " + std::to_string(worker));
  arena_->worker(worker)->pid.store(pid, std::memory_order_release);
  return supervisor_->Watch(worker, pid);
}

void Engine::Forget(uint32_t worker) { supervisor_->Forget(worker); }

void Engine::OnWorkerExit(uint32_t worker, const ExitInfo& info) {
  {
    std::lock_guard<std::mutex> g(exits_mu_);
    Completion c;
    c.kind = Completion::Kind::kWorkerExit;
    c.worker = worker;
    c.exit = info;
    exits_.push_back(c);
    exits_pending_.store(true, std::memory_order_release);
  }
  Doorbell(&arena_->control()->done_bell).Ring();
}

void Engine::Shutdown() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (shutdown_) return;
    shutdown_ = true;
  }
  ControlBlock* c = arena_->control();
  c->shutdown.store(1, std::memory_order_seq_cst);
  for (uint32_t w = 0; w < opts_.num_workers; ++w) {
    SpscRing(&arena_->worker(w)->tasks).Close();
    Doorbell(&arena_->worker(w)->task_bell).Ring();
  }
  for (uint32_t s = 0; s < opts_.max_slots; ++s) {
    SlotHeader* h = arena_->slot(s);
    if (h->state.load(std::memory_order_acquire) == static_cast<uint32_t>(SlotState::kNeedSpace))
      Doorbell(&h->bell).Ring();
  }
}

EngineStats Engine::Stats() {
  EngineStats st {};
  std::lock_guard<std::mutex> g(mu_);
  st.max_memory = opts_.max_memory;
  st.hard_cap = opts_.hard_cap;
  st.committed_bytes = arena_->committed_bytes();
  st.resident_bytes = alloc_.resident();
  st.in_use_bytes = alloc_.in_use();
  st.held_bytes = held_bytes_;
  st.expected_batch_bytes = expected_;
  st.slots_total = opts_.max_slots;
  for (uint32_t i = 0; i < opts_.max_slots; ++i) {
    switch (slots_[i].state) {
      case SlotState::kFree: ++st.slots_free; break;
      case SlotState::kReady: ++st.slots_ready; break;
      case SlotState::kHeld: ++st.slots_held; break;
      default: {
        auto shared = static_cast<SlotState>(arena_->slot(i)->state.load(std::memory_order_acquire));
        if (shared == SlotState::kDispatched) ++st.slots_queued; else ++st.slots_filling;
      }
    }
  }
  st.over_budget_events = over_budget_events_;
  st.need_space_events = need_space_events_;
  st.copy_outs = copy_outs_;
  for (uint32_t w = 0; w < opts_.num_workers; ++w) {
    WorkerBlock* wb = arena_->worker(w);
    st.workers.push_back(WorkerStats{wb->pid.load(), static_cast<WorkerState>(wb->state.load()),
                                     wb->batches.load(), wb->busy_ns.load(),
                                     SpscRing(&wb->tasks).Size()});
  }
  return st;
}

}  // namespace stoker
