#include "loader/engine.h"

#include "core/trace.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "proc/proc_memory.h"
#include "sync/doorbell.h"
#include "sync/spsc_ring.h"

namespace stoker {

Status CheckMaxMemory(uint64_t max_memory) {
  if (Result<uint64_t> limit = MemoryLimitBytes(); limit.ok() && max_memory > limit.value())
    return Status::InvalidArgument("max_memory=" + std::to_string(max_memory) +
                                   " bytes is more than this machine can hold: its memory (MemTotal, or the "
                                   "memory limit of this process's cgroup) is " + std::to_string(limit.value()) +
                                   " bytes; lower max_memory");
  return Status::OK();
}

uint64_t DefaultMaxMemory() {
  constexpr uint64_t kFloor = uint64_t{1} << 20;
  Result<uint64_t> limit = MemoryLimitBytes();
  if (!limit.ok()) return kDefaultMaxMemory;
  return std::max(kFloor, std::min(kDefaultMaxMemory, limit.value() / 4 / 4096 * 4096));
}

Result<std::shared_ptr<Engine>> Engine::Create(const EngineOptions& o) {
  STOKER_RETURN_IF_ERROR(CheckMaxMemory(o.max_memory));
  ArenaGeometry g;
  g.num_workers = o.num_workers;
  g.max_slots = o.max_slots;
  g.max_memory = o.max_memory;          // control area included
  g.reserve_bytes = 2 * o.max_memory;   // address space only: room against fragmentation
  g.process_shared = o.process_shared;
  Result<std::shared_ptr<Arena>> arena = Arena::Create(g);
  if (!arena.ok()) {
    if (arena.status().code() != Status::Code::kInvalidArgument) return arena.status();
    return Status::InvalidArgument("max_memory=" + std::to_string(o.max_memory) + " bytes: " +
                                   arena.status().message() + "; raise max_memory");
  }
  return std::shared_ptr<Engine>(new Engine(o, std::move(arena).value()));
}

Engine::Engine(const EngineOptions& o, std::shared_ptr<Arena> a)
    : opts_(o),
      arena_(std::move(a)),
      pool_(arena_.get(), o.max_slots, o.max_memory),
      active_workers_(o.num_workers),
      owner_(getpid()) {
  watch_ns_.assign(o.num_workers, 0);
  busy_base_ns_.assign(o.num_workers, 0);
  supervisor_ = std::make_unique<Supervisor>(
      [this](uint32_t id, const ExitInfo& info) { OnWorkerExit(id, info); });
  trace_source_ = AddTraceCounterSource([this] { SampleTraceCounters(); });
}

void Engine::SampleTraceCounters() {
  const EngineStats st = Stats(false);
  auto d = [](uint64_t v) { return static_cast<double>(v); };
  TraceCounter("slot pool bytes", {{"free", d(st.free_bytes)}, {"queued", d(st.queued_bytes)},
                                   {"filling", d(st.filling_bytes)}, {"ready", d(st.ready_bytes)},
                                   {"held", d(st.held_bytes)}});
  TraceCounter("batches", {{"queued", d(st.slots_queued)}, {"filling", d(st.slots_filling)},
                           {"ready", d(st.slots_ready)}, {"held", d(st.slots_held)}});
  std::vector<std::string> names;
  std::vector<std::pair<const char*, double>> rss;
  names.reserve(st.workers.size());
  for (size_t w = 0; w < st.workers.size(); ++w) {
    const WorkerStats& ws = st.workers[w];
    if (ws.pid <= 0 || ws.pid == owner_ || ws.state == WorkerState::kExited) continue;  // (threads: the main's)
    Result<uint64_t> r = ReadResidentBytes(ws.pid);
    if (!r.ok() || r.value() == 0) continue;  // (gone, or a zombie not yet reaped)
    names.push_back("worker " + std::to_string(w));
    rss.emplace_back(nullptr, d(r.value()));
  }
  for (size_t i = 0; i < rss.size(); ++i) rss[i].first = names[i].c_str();
  if (!rss.empty()) TraceCounterValues("worker rss bytes", rss.data(), rss.size());
}

Engine::~Engine() {
  RemoveTraceCounterSource(trace_source_);
  if (getpid() != owner_) {
    (void)supervisor_.release();  // forked copy: leave the parent's thread alone
    pool_.AbandonCuda();          // ... and its CUDA state
    return;
  }
  supervisor_.reset();
}

Result<bool> Engine::Dispatch(uint32_t worker, uint64_t batch_id, uint64_t generation, TaskKind kind,
                              const void* payload, uint64_t payload_bytes, uint32_t* slot_out) {
  if (worker >= opts_.num_workers) return Status::InvalidArgument("no worker " + std::to_string(worker));
  WorkerBlock* wb = arena_->worker(worker);
  SpscRing ring(&wb->tasks);
  if (ring.Full()) return false;
  std::lock_guard<std::mutex> g(mu_);
  if (shutdown_) return Status::Closed("the loader is shut down");
  uint32_t slot = 0;
  const uint64_t bytes = pool_.RegionFor(payload_bytes);
  STOKER_ASSIGN_OR_RETURN(bool got, pool_.Acquire(bytes, bytes, true, SlotState::kDispatched, &slot));
  if (!got) return false;
  const SlotPool::Slot& s = pool_[slot];
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
  *slot_out = slot;
  return true;
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
    Result<bool> sized = pool_.SizeRegion(slot, needed, true);
    // Learn the size (even when it cannot be had now) so the next dispatch
    // sizes its region right and needs no second round trip.
    if (sized.ok() && pool_.fits_budget(needed)) pool_.LearnAsked(needed);
    const SlotPool::Slot& s = pool_[slot];
    h->region_offset = s.offset;
    h->region_capacity = s.capacity;
    if (!sized.ok()) {
      h->needed_bytes = kSpaceNever;  // the worker reports it in its current region
    } else if (!sized.value()) {
      // No room now.  Nobody waits on memory while holding work: the worker
      // hands the task back untouched and it is dispatched again, sized
      // right, once batches come back (Scheduler).
      h->needed_bytes = kSpaceRetry;
      ++cancelled_;
    }
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
          pool_.Complete(slot, h->used_bytes, c.result == SlotResult::kOk);
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
  if (!pool_.Hold(slot)) return;
  ++delivered_batches_;
  delivered_bytes_ += arena_->slot(slot)->used_bytes;
}

void Engine::Evict(uint32_t slot) {
  {
    std::lock_guard<std::mutex> g(mu_);
    ++spills_;
  }
  Release(slot);
}

uint64_t Engine::TrimIdle(uint32_t regions) {
  std::lock_guard<std::mutex> g(mu_);
  return pool_.TrimIdle(regions);
}

void Engine::Release(uint32_t slot) {
  std::lock_guard<std::mutex> g(mu_);
  pool_.Release(slot);
}

Status Engine::EnableCuda(const CudaRuntimeApi& api) {
  std::lock_guard<std::mutex> g(mu_);
  return pool_.EnableCuda(api);
}

int Engine::pin_error() {
  std::lock_guard<std::mutex> g(mu_);
  return pool_.pin_error();
}

int Engine::RecordFence(void* stream) {
  std::lock_guard<std::mutex> g(mu_);
  return pool_.RecordFence(stream);
}

bool Engine::DrainFences() {
  std::lock_guard<std::mutex> g(mu_);
  return pool_.DrainFences();
}

bool Engine::ShouldCopyOut(uint32_t slot) {
  std::lock_guard<std::mutex> g(mu_);
  pool_.FreeCompletedFences();
  const bool out = pool_.Crowded(slot, active_workers_.load(std::memory_order_relaxed));
  if (out) ++copy_outs_;
  return out;
}

Result<bool> Engine::AcquireLocal(uint64_t bytes, uint32_t* slot_out) {
  std::lock_guard<std::mutex> g(mu_);
  uint32_t slot = 0;
  STOKER_ASSIGN_OR_RETURN(bool got,
                          pool_.Acquire(std::max(bytes, pool_.RegionFor(0)), bytes, false, SlotState::kFilling, &slot));
  if (!got) return false;
  SlotHeader* h = arena_->slot(slot);
  h->region_offset = pool_[slot].offset;
  h->region_capacity = pool_[slot].capacity;
  h->result = static_cast<uint32_t>(SlotResult::kOk);
  h->state.store(static_cast<uint32_t>(SlotState::kFilling), std::memory_order_relaxed);
  *slot_out = slot;
  return true;
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
  pool_.Complete(slot, used, true);
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
    pool_.Complete(slot, 0, false);
    done->push_back(c);
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    pool_.ReclaimFrom(worker, [this](uint32_t s) { return arena_->slot(s)->worker; });
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
  WorkerBlock* wb = arena_->worker(worker);
  wb->pid.store(pid, std::memory_order_release);
  {
    std::lock_guard<std::mutex> g(mu_);
    watch_ns_[worker] = MonotonicNanos();
    busy_base_ns_[worker] = wb->busy_ns.load(std::memory_order_relaxed);
  }
  return supervisor_->Watch(worker, pid);
}

void Engine::Forget(uint32_t worker) { supervisor_->Forget(worker); }

void Engine::CloseWorker(uint32_t worker) {
  if (worker >= opts_.num_workers) return;
  SpscRing(&arena_->worker(worker)->tasks).Close();
  Doorbell(&arena_->worker(worker)->task_bell).Ring();
}

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
  for (uint32_t w = 0; w < opts_.num_workers; ++w) CloseWorker(w);
  for (uint32_t s = 0; s < opts_.max_slots; ++s) {
    SlotHeader* h = arena_->slot(s);
    if (h->state.load(std::memory_order_acquire) == static_cast<uint32_t>(SlotState::kNeedSpace))
      Doorbell(&h->bell).Ring();
  }
}

EngineStats Engine::Stats(bool process_memory) {
  EngineStats st{};
  std::vector<pid_t> pids;
  {
    std::lock_guard<std::mutex> g(mu_);
    st.max_memory = opts_.max_memory;
    st.budget_bytes = budget();
    st.committed_bytes = arena_->committed_bytes();
    st.arena_resident_bytes = arena_->ResidentBytes();
    st.resident_bytes = pool_.resident_bytes();
    st.in_use_bytes = pool_.in_use_bytes();
    st.free_bytes = pool_.resident_bytes() - pool_.in_use_bytes();
    st.expected_batch_bytes = pool_.expected();
    st.slots_total = opts_.max_slots;
    for (uint32_t i = 0; i < opts_.max_slots; ++i) {
      const uint64_t cap = pool_[i].capacity;
      switch (pool_[i].state) {
        case SlotState::kFree: ++st.slots_free; st.free_bytes += cap; break;
        case SlotState::kReady: ++st.slots_ready; st.ready_bytes += cap; break;
        case SlotState::kHeld:
          ++st.slots_held;
          st.held_bytes += cap;
          if (pool_[i].fenced) ++st.slots_fenced;
          break;
        default: {
          auto shared = static_cast<SlotState>(arena_->slot(i)->state.load(std::memory_order_acquire));
          if (shared == SlotState::kDispatched) {
            ++st.slots_queued;
            st.queued_bytes += cap;
          } else {
            ++st.slots_filling;
            st.filling_bytes += cap;
          }
        }
      }
    }
    st.need_space_events = need_space_events_;
    st.cancelled = cancelled_;
    st.spills = spills_;
    st.copy_outs = copy_outs_;
    st.delivered_batches = delivered_batches_;
    st.delivered_bytes = delivered_bytes_;
    const int64_t now = MonotonicNanos();
    for (uint32_t w = 0; w < opts_.num_workers; ++w) {
      WorkerBlock* wb = arena_->worker(w);
      WorkerStats ws{};
      ws.pid = wb->pid.load();
      ws.state = static_cast<WorkerState>(wb->state.load());
      ws.batches = wb->batches.load();
      ws.busy_ns = wb->busy_ns.load();
      ws.queued = SpscRing(&wb->tasks).Size();
      for (int i = 0; i < kStageCount; ++i) ws.stage_ns[i] = wb->stage_ns[i].load(std::memory_order_relaxed);
      const int64_t alive = watch_ns_[w] ? now - watch_ns_[w] : 0;
      ws.busy_fraction = alive > 0 ? std::min(1.0, double(ws.busy_ns - busy_base_ns_[w]) / double(alive)) : 0.0;
      st.workers.push_back(ws);
    }
  }
  if (process_memory) {  // outside the lock: /proc reads take a while
    if (auto m = ReadProcessMemory(getpid()); m.ok()) st.main = m.value();
    for (WorkerStats& w : st.workers)
      if (w.pid > 0 && w.state != WorkerState::kExited)
        if (auto m = ReadProcessMemory(w.pid); m.ok()) w.memory = m.value();
  }
  return st;
}

}  // namespace stoker
