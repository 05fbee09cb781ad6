#include "loader/scheduler.h"

#include "core/trace.h"

#include <algorithm>

namespace stoker {

Scheduler::Scheduler(std::shared_ptr<Engine> engine, const SchedulerOptions& o)
    : engine_(std::move(engine)), opts_(o), outstanding_(o.num_workers, 0), active_(o.num_workers, true),
      active_workers_(std::max(1u, o.num_workers)), schedule_{WorkerSegment{0, std::max(1u, o.num_workers)}} {
  if (opts_.prefetch == 0) opts_.prefetch = 1;
}

Scheduler::~Scheduler() { Clear(); }

void Scheduler::Clear() {
  for (auto& [bid, r] : ready_in_order_)
    if (r.kind != ReadyKind::kStop && !r.spilled) engine_->Release(r.slot);
  for (auto& [bid, r] : ready_fifo_)
    if (r.kind != ReadyKind::kStop && !r.spilled) engine_->Release(r.slot);
  ready_in_order_.clear();
  ready_fifo_.clear();
  if (source_) {
    for (auto& [bid, t] : tasks_) source_->Drop(t.token);
    for (auto& r : retry_) source_->Drop(r.spec.token);
    if (have_pending_) source_->Drop(pending_.token);
  }
  tasks_.clear();
  retry_.clear();
  have_pending_ = false;
}

void Scheduler::SkipDelivered(uint64_t prefix, const std::vector<uint64_t>& extra) {
  for (uint64_t b = 0; b < prefix; ++b) skip_.insert(b);
  skip_.insert(extra.begin(), extra.end());
  for (uint64_t b : skip_) MarkDelivered(b);
}

void Scheduler::MarkDelivered(uint64_t bid) {
  if (bid < delivered_prefix_) return;
  delivered_above_.insert(bid);
  while (!delivered_above_.empty() && *delivered_above_.begin() == delivered_prefix_) {
    delivered_above_.erase(delivered_above_.begin());
    ++delivered_prefix_;
  }
}

void Scheduler::Delivered(uint64_t* prefix, std::vector<uint64_t>* extra) const {
  *prefix = delivered_prefix_;
  extra->assign(delivered_above_.begin(), delivered_above_.end());
}

void Scheduler::Reset(IndexSource* source, bool resume_workers) {
  Clear();
  deferred_ = Status::OK();
  source_ = source;
  ++generation_;
  send_idx_ = rcvd_idx_ = 0;
  skip_.clear();
  delivered_prefix_ = 0;
  delivered_above_.clear();
  delivered_by_worker_.assign(opts_.num_workers, 0);
  last_worker_ = -1;
  exhausted_ = false;
  cycle_ = 0;
  std::fill(outstanding_.begin(), outstanding_.end(), 0);
  std::fill(active_.begin(), active_.end(), true);
  schedule_.assign(1, WorkerSegment{0, active_workers_});
  if (resume_workers && opts_.iterable)
    for (uint32_t w = 0; w < opts_.num_workers; ++w) (void)engine_->SendResume(w, generation_);
}

Status Scheduler::SetActiveWorkers(uint32_t n) {
  if (n == 0 || n > opts_.num_workers)
    return Status::InvalidArgument("active workers " + std::to_string(n) + " out of 1.." +
                                   std::to_string(opts_.num_workers));
  if (opts_.iterable && n != opts_.num_workers)
    return Status::InvalidArgument("an iterable dataset's workers split its stream: their number is fixed");
  active_workers_ = n;
  engine_->SetActiveWorkers(n);  // (room left for the batches of those workers: Engine::ShouldCopyOut)
  if (!scheduled()) {
    schedule_.assign(1, WorkerSegment{0, n});
    return Status::OK();
  }
  // From the next batch never dispatched (a resumed run's saved segments
  // are kept whole: their batches go where the saved run sent them).
  const uint64_t at = std::max(send_idx_, schedule_.back().first);
  if (schedule_.back().first == at) {
    schedule_.back().workers = n;
    if (schedule_.size() > 1 && schedule_[schedule_.size() - 2].workers == n) schedule_.pop_back();
  } else if (schedule_.back().workers != n) {
    schedule_.push_back(WorkerSegment{at, n});
  }
  return Status::OK();
}

void Scheduler::SetSchedule(std::vector<WorkerSegment> segments) {
  if (segments.empty() || !scheduled()) return;
  for (WorkerSegment& s : segments) s.workers = std::clamp(s.workers, 1u, opts_.num_workers);
  schedule_ = std::move(segments);
  active_workers_ = schedule_.back().workers;
  engine_->SetActiveWorkers(active_workers_);
}

size_t Scheduler::SegmentOf(uint64_t batch_id) const {
  auto it = std::upper_bound(schedule_.begin(), schedule_.end(), batch_id,
                             [](uint64_t b, const WorkerSegment& s) { return b < s.first; });
  // (below the first segment: only a resumed run's delivered batches)
  return it == schedule_.begin() ? 0 : static_cast<size_t>(it - schedule_.begin()) - 1;
}

uint32_t Scheduler::WorkerOf(uint64_t batch_id) const {
  const WorkerSegment& s = schedule_[SegmentOf(batch_id)];
  return static_cast<uint32_t>((batch_id - std::min(batch_id, s.first)) % s.workers);
}

int64_t Scheduler::PrevBatchOf(uint32_t worker, uint64_t batch_id) const {
  if (batch_id == 0) return -1;
  uint64_t hi = batch_id - 1;  // the latest candidate
  for (size_t i = SegmentOf(hi);;) {
    const WorkerSegment& s = schedule_[i];
    const uint64_t lo = std::min(s.first, hi);
    if (worker < s.workers && hi >= lo + worker)
      return static_cast<int64_t>(lo + worker + s.workers * ((hi - lo - worker) / s.workers));
    if (i == 0 || s.first == 0) return -1;
    hi = s.first - 1;
    --i;
  }
}

bool Scheduler::Idle(uint32_t worker) const {
  if (worker >= opts_.num_workers || outstanding_[worker] != 0) return false;
  if (scheduled()) {  // batches not dispatched yet that the schedule gives it (a resumed run's saved segments)
    for (size_t i = 0; i < schedule_.size(); ++i) {
      const bool ahead = i + 1 == schedule_.size() || schedule_[i + 1].first > send_idx_;
      if (ahead && worker < schedule_[i].workers) return false;
    }
  }
  for (const Retry& r : retry_)
    if (r.worker == static_cast<int>(worker) || (r.worker < 0 && scheduled() && WorkerOf(r.batch_id) == worker))
      return false;
  return true;
}

Status Scheduler::RetireWorker(uint32_t worker) {
  if (worker < active_workers_ || worker >= opts_.num_workers)
    return Status::InvalidArgument("worker " + std::to_string(worker) + " is active (or out of range)");
  if (!Idle(worker)) return Status::InvalidArgument("worker " + std::to_string(worker) + " holds tasks");
  engine_->Forget(worker);
  engine_->CloseWorker(worker);
  return Status::OK();
}

Status Scheduler::Reclaim(uint32_t worker) {
  std::vector<Completion> done;
  STOKER_RETURN_IF_ERROR(engine_->ReclaimWorker(worker, &done));
  Collect(done);
  return Status::OK();
}

int Scheduler::PickWorker(uint64_t batch_id) {
  const uint32_t n = opts_.num_workers;
  // In order, batch k goes to worker k mod n, as torch assigns them (with a
  // schedule of worker counts, (k - s) mod n in k's segment): each worker
  // then sees the same batches in the same order in every run, so what a
  // dataset draws from the worker's random streams is reproducible.
  if (scheduled()) return static_cast<int>(WorkerOf(batch_id));
  if (opts_.in_order) {  // iterable: strict round robin over the workers with data left
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t w = cycle_;
      cycle_ = (cycle_ + 1) % n;
      if (active_[w]) return static_cast<int>(w);
    }
    return -1;
  }
  // Out of order, as torch's _try_put_index: no worker holds more than its
  // share of the batches in flight (prefetch over the active workers, at
  // least one), so a slow worker never holds every task while a free one
  // waits for work.  Iterable: round robin over those under their share;
  // map-style: the least loaded.
  if (opts_.iterable) {
    const uint32_t active = static_cast<uint32_t>(std::count(active_.begin(), active_.end(), true));
    if (active == 0) return -1;
    const uint32_t share = std::max(1u, opts_.prefetch / active);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t w = cycle_;
      cycle_ = (cycle_ + 1) % n;
      if (active_[w] && outstanding_[w] < share) return static_cast<int>(w);
    }
    return -1;
  }
  const uint32_t share = std::max(1u, opts_.prefetch / active_workers_);  // (map-style: the active workers')
  uint32_t best = 0;
  for (uint32_t w = 1; w < active_workers_; ++w)
    if (outstanding_[w] < outstanding_[best]) best = w;
  return outstanding_[best] < share ? static_cast<int>(best) : -1;
}

size_t Scheduler::InProgress() const {
  return tasks_.size() - (opts_.in_order ? ready_in_order_.size() : ready_fifo_.size());
}

bool Scheduler::SpillOne() {
  if (!opts_.in_order || ready_in_order_.count(rcvd_idx_)) return false;
  for (auto it = ready_in_order_.rbegin(); it != ready_in_order_.rend(); ++it) {
    Ready& r = it->second;
    if (r.kind == ReadyKind::kStop || r.spilled) continue;
    uint64_t used = 0, cap = 0;
    const uint8_t* p = engine_->SlotRegion(r.slot, &used, &cap);
    r.spilled = std::make_shared<const std::string>(reinterpret_cast<const char*>(p), std::min(used, cap));
    engine_->Evict(r.slot);
    return true;
  }
  return false;
}

Status Scheduler::OutOfMemory() {
  EngineStats st = engine_->Stats();
  return Status::ResourceExhausted(
      "the training loop holds " + std::to_string(st.slots_held) + " batches (" + std::to_string(st.held_bytes) +
      " bytes) of the " + std::to_string(st.budget_bytes) + " bytes that max_memory=" +
      std::to_string(st.max_memory) + " leaves for batches, and the next batch needs " +
      std::to_string(st.expected_batch_bytes) +
      " bytes: drop references to old batches (e.g. do not keep them all in a list), or raise max_memory");
}

Result<bool> Scheduler::Dispatch(uint64_t batch_id, TaskSpec& spec, int worker) {
  const int w = worker >= 0 ? worker : PickWorker(batch_id);
  if (w < 0) return false;
  bool reclaimed = false;
  for (;;) {
    uint32_t slot = 0;
    STOKER_ASSIGN_OR_RETURN(bool sent, engine_->Dispatch(static_cast<uint32_t>(w), batch_id, generation_,
                                                         spec.kind, spec.payload.data(), spec.payload.size(),
                                                         &slot));
    no_room_ = !sent;
    if (sent) {
      tasks_.emplace(batch_id, Task{static_cast<uint32_t>(w), slot, spec.token, spec.kind, std::move(spec.payload)});
      ++outstanding_[w];
      return true;
    }
    // No room now.  That is "busy" while a task in progress will give
    // memory back or a ready batch will be handed out.  When the only ready
    // batches are ones that must wait for this one (in order), they move to
    // private memory: the batch the training loop waits for goes first.
    if (InProgress() > 0) return Busy(worker, w);
    if (SpillOne()) continue;
    if (ReadyInSlots() || handing_out_) return Busy(worker, w);
    // Nothing in flight: only batches the training loop holds take memory,
    // or ones it dropped whose copies to the GPU may not be done yet.
    // (A wait for the GPU: the blocking hooks let other threads run meanwhile.)
    if (before_block_) before_block_();
    const bool drained = engine_->DrainFences();
    if (after_block_) after_block_();
    if (drained) continue;
    if (reclaim_ && !reclaimed) {
      reclaim_();
      reclaimed = true;
      continue;
    }
    return OutOfMemory();
  }
}

bool Scheduler::Busy(int worker, int picked) {
  if (opts_.iterable && worker < 0) cycle_ = static_cast<uint32_t>(picked);  // the same worker next
  return false;
}

bool Scheduler::ReadyInSlots() const {
  for (const auto& [bid, r] : ready_in_order_)
    if (r.kind != ReadyKind::kStop && !r.spilled) return true;
  for (const auto& [bid, r] : ready_fifo_)
    if (r.kind != ReadyKind::kStop && !r.spilled) return true;
  return false;
}

Status Scheduler::Fill() {
  while (!retry_.empty()) {  // tasks sent again go first, oldest first
    STOKER_ASSIGN_OR_RETURN(bool sent, Dispatch(retry_.front().batch_id, retry_.front().spec, retry_.front().worker));
    if (!sent) return Status::OK();
    retry_.pop_front();
  }
  while (tasks_.size() < opts_.prefetch && !exhausted_) {
    if (!have_pending_ && skip_.count(send_idx_)) {  // delivered before a resume: never loaded again
      Result<bool> more = source_->Skip();
      if (!more.ok()) return more.status();
      if (!more.value()) {
        exhausted_ = true;
        return Status::OK();
      }
      skip_.erase(send_idx_++);
      continue;
    }
    if (!have_pending_) {
      pending_ = TaskSpec();
      Result<bool> more = source_->Next(&pending_);
      if (!more.ok()) return more.status();
      if (!more.value()) {
        exhausted_ = true;
        return Status::OK();
      }
      have_pending_ = true;
    }
    STOKER_ASSIGN_OR_RETURN(bool sent, Dispatch(send_idx_, pending_, -1));
    if (!sent) return Status::OK();
    ++send_idx_;
    have_pending_ = false;
  }
  return Status::OK();
}

void Scheduler::QueueRetry(uint64_t batch_id, TaskSpec spec, int worker) {
  auto pos = std::upper_bound(retry_.begin(), retry_.end(), batch_id,
                              [](uint64_t b, const Retry& r) { return b < r.batch_id; });
  retry_.insert(pos, Retry{batch_id, std::move(spec), worker});
}

Status Scheduler::Requeue(uint32_t worker) {
  if (opts_.iterable) return Status::InvalidArgument("an iterable dataset's worker cannot be replaced");
  std::vector<Completion> done;
  STOKER_RETURN_IF_ERROR(engine_->ReclaimWorker(worker, &done));
  Collect(done);
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (it->second.worker != worker) {
      ++it;
      continue;
    }
    if (Finished(it->first)) {
      ++it;
      continue;
    }
    TaskSpec spec;
    spec.kind = it->second.kind;
    spec.payload = std::move(it->second.payload);
    spec.token = it->second.token;
    QueueRetry(it->first, std::move(spec), -1);
    it = tasks_.erase(it);
  }
  outstanding_[worker] = 0;
  return Status::OK();
}

void Scheduler::Collect(const std::vector<Completion>& done) {
  for (const Completion& c : done) {
    if (c.kind == Completion::Kind::kWorkerExit) {
      exits_.push_back(c);  // each is reported: two deaths in one wait are two outcomes
      continue;
    }
    auto it = tasks_.find(c.batch_id);
    if (c.generation != generation_ || it == tasks_.end() || it->second.slot != c.slot) {
      engine_->Release(c.slot);  // from an abandoned epoch
      continue;
    }
    if (outstanding_[c.worker]) --outstanding_[c.worker];
    if (c.result == SlotResult::kCancelled) {
      // No room when the batch outgrew its region: send it again (sized
      // right now) to the same worker, which kept what it had read.
      engine_->Release(c.slot);
      TaskSpec spec;
      spec.kind = it->second.kind;
      spec.payload = std::move(it->second.payload);
      spec.token = it->second.token;
      QueueRetry(c.batch_id, std::move(spec), static_cast<int>(c.worker));
      tasks_.erase(it);
      continue;
    }
    Ready r{ReadyKind::kBatch, c.slot, c.worker, nullptr};
    if (c.result == SlotResult::kStopIteration) {
      engine_->Release(c.slot);
      if (c.worker < active_.size()) active_[c.worker] = false;
      r.kind = ReadyKind::kStop;
    } else if (c.result == SlotResult::kError || c.result == SlotResult::kNativeError) {
      r.kind = ReadyKind::kError;
      r.native_error = c.result == SlotResult::kNativeError;
    }
    if (opts_.in_order) ready_in_order_.emplace(c.batch_id, r);
    else ready_fifo_.emplace_back(c.batch_id, r);
  }
}

bool Scheduler::TakeReady(uint64_t* bid, Ready* r) {
  if (opts_.in_order) {
    while (rcvd_idx_ < delivered_prefix_ || delivered_above_.count(rcvd_idx_)) {
      if (ready_in_order_.count(rcvd_idx_)) break;  // (cannot happen: skipped ids are never sent)
      ++rcvd_idx_;
    }
    auto it = ready_in_order_.find(rcvd_idx_);
    if (it == ready_in_order_.end()) return false;
    *bid = it->first;
    *r = it->second;
    ready_in_order_.erase(it);
    ++rcvd_idx_;
    return true;
  }
  if (ready_fifo_.empty()) return false;
  *bid = ready_fifo_.front().first;
  *r = ready_fifo_.front().second;
  ready_fifo_.pop_front();
  return true;
}

void Scheduler::FillOrDefer() {
  if (!deferred_.ok()) return;
  Status st = Fill();
  if (!st.ok()) {
    deferred_ = st;
    exhausted_ = true;  // pull nothing more; deliver what is in flight first
  }
}

bool Scheduler::EpochDone() const {
  if (opts_.iterable) {
    const bool any_active = std::find(active_.begin(), active_.end(), true) != active_.end();
    return (!any_active || exhausted_) && tasks_.empty() && retry_.empty();
  }
  return exhausted_ && tasks_.empty() && retry_.empty();
}

Status Scheduler::Next(int64_t timeout_ns, Outcome* out) {
  if (!source_) return Status::InvalidArgument("Scheduler::Next before Reset");
  // The training loop's "wait" slice (traced only: the loop's stall is timed
  // by its caller).
  struct TracedWait {
    bool on = TraceOn();
    TracedWait() { if (on) EnterStage(Stage::kWaitBatch); }
    ~TracedWait() { if (on) LeaveStage(); }
  } waiting;
  const int64_t deadline = timeout_ns < 0 ? -1 : MonotonicNanos() + timeout_ns;
  for (;;) {
    if (!exits_.empty()) {  // a worker's death goes before anything else
      out->kind = Outcome::Kind::kWorkerExit;
      out->worker = exits_.front().worker;
      out->exit = exits_.front().exit;
      exits_.pop_front();
      return Status::OK();
    }
    FillOrDefer();
    uint64_t bid;
    Ready r;
    while (TakeReady(&bid, &r)) {
      auto it = tasks_.find(bid);
      const uint64_t token = it != tasks_.end() ? it->second.token : 0;
      if (it != tasks_.end()) tasks_.erase(it);
      if (r.kind == ReadyKind::kStop) {
        source_->Drop(token);
        continue;
      }
      out->kind = r.kind == ReadyKind::kBatch ? Outcome::Kind::kBatch : Outcome::Kind::kError;
      out->slot = r.slot;
      out->worker = r.worker;
      out->batch_id = bid;
      out->token = token;
      out->spilled = std::move(r.spilled);
      out->native_error = r.native_error;
      MarkDelivered(bid);
      if (TraceOn() && r.kind == ReadyKind::kBatch)
        TraceFlow(/*out=*/false, BatchFlowId(engine_->arena().control()->loader_id, generation_, bid));
      if (r.worker < delivered_by_worker_.size()) ++delivered_by_worker_[r.worker];
      last_worker_ = static_cast<int>(r.worker);
      // Refill now, as torch does, so workers keep `prefetch` batches in
      // flight while the caller works on this one.  The batch being handed
      // out still occupies its slot: no room is "busy" until the next call.
      handing_out_ = true;
      FillOrDefer();
      handing_out_ = false;
      return Status::OK();
    }
    if (EpochDone()) {
      if (!deferred_.ok()) {  // the source failed: report it after what was in flight
        Status st = deferred_;
        deferred_ = Status::OK();
        return st;
      }
      out->kind = Outcome::Kind::kEnd;
      return Status::OK();
    }
    int64_t left = -1;
    if (deadline >= 0) {
      left = deadline - MonotonicNanos();
      if (left <= 0) {
        out->kind = Outcome::Kind::kTimeout;
        return Status::OK();
      }
    }
    scratch_.clear();
    const bool no_room = no_room_ && tasks_.size() < opts_.prefetch;
    const int64_t blocked = no_room ? MonotonicNanos() : 0;
    if (before_block_) before_block_();
    Status st = engine_->Wait(left, &scratch_);
    if (after_block_) after_block_();
    if (no_room) no_room_wait_ns_ += static_cast<uint64_t>(MonotonicNanos() - blocked);
    // Completions gathered before an interruption are kept, never lost.
    Collect(scratch_);
    if (!exits_.empty()) continue;  // reported at the top of the loop
    if (st.IsTimeout()) continue;
    STOKER_RETURN_IF_ERROR(st);
  }
}

Scheduler::Depths Scheduler::QueueDepths() const {
  Depths d{InProgress(), 0, 0, retry_.size()};
  auto count = [&d](const Ready& r) {
    if (r.kind == ReadyKind::kStop) return;
    ++d.ready;
    if (r.spilled) ++d.spilled;
  };
  for (const auto& [bid, r] : ready_in_order_) count(r);
  for (const auto& [bid, r] : ready_fifo_) count(r);
  return d;
}

bool Scheduler::Finished(uint64_t batch_id) const {
  return opts_.in_order ? ready_in_order_.count(batch_id) > 0
                        : std::any_of(ready_fifo_.begin(), ready_fifo_.end(),
                                      [&](const auto& r) { return r.first == batch_id; });
}

std::vector<InFlight> Scheduler::InFlightTasks() const {
  std::vector<InFlight> v;
  for (const auto& [bid, t] : tasks_) v.push_back(InFlight{bid, t.worker, t.token, Finished(bid)});
  return v;
}

}  // namespace stoker
