// EpochRunner: how an epoch begins, in one place, for the C++ Loader and the
// Python DataLoader alike.
//
//   ResumeAt(point)            the next epoch begun skips what a saved run delivered
//   Begin(dataset, recipe,..)  a native dataset's epoch: the dataset's epoch
//                              begun, its order for the recipe served as batches
//   Begin(order, ...)          an order made natively elsewhere (a sampler's)
//   Begin(source, ...)         indices from elsewhere (a Python sampler)
// Each Begin resets the Scheduler onto the epoch's source and applies a
// pending resume point.  The counts an epoch is made of (samples per rank,
// batches) are computed here and by OrderRecipe::PerRank alone, and Python
// reads them through bindings (stoker._native.lib.samples_per_rank,
// batches_per_epoch).  What stays in Python is Python's: recognising torch's
// samplers (_sampling.py) and agreeing on a cached stream's epoch between
// ranks (torch.distributed).
#ifndef STOKER_LOADER_EPOCH_RUNNER_H_
#define STOKER_LOADER_EPOCH_RUNNER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "loader/epoch_source.h"
#include "loader/scheduler.h"
#include "stoker/native_dataset.h"
#include "stoker/order_recipe.h"

namespace stoker {

// What of an epoch a saved run had delivered.
struct ResumePoint {
  uint64_t delivered = 0;       // every batch below this one
  std::vector<uint64_t> extra;  // and these, above it (delivered out of order)
  int64_t next_worker = -1;     // an iterable dataset's: whose batch was next (-1: not saved)
  // The saved run's schedule of worker counts from the segment holding
  // `delivered` on (Scheduler::schedule; empty: not saved).
  std::vector<WorkerSegment> schedule;
};

class EpochRunner {
 public:
  explicit EpochRunner(Scheduler* sched) : sched_(sched) {}

  // Samples each of `world_size` ranks reads of `n` (padded to equal shares,
  // or the tail dropped: pad false).
  static uint64_t SamplesPerRank(uint64_t n, uint32_t world_size, bool pad);
  // Batches of `samples` (batch_size 0: one sample each, uncollated).
  static uint64_t Batches(uint64_t samples, uint64_t batch_size, bool drop_last);

  // The next epoch begun resumes from `point`; Forget() drops it.
  void ResumeAt(ResumePoint point) { pending_ = std::move(point); }
  void Forget() { pending_.reset(); }
  const std::optional<ResumePoint>& pending() const { return pending_; }

  // A native dataset's epoch `recipe.epoch`: the dataset told, its order.
  Status Begin(NativeDataset& dataset, const OrderRecipe& recipe, uint64_t batch_size, bool drop_last);
  // An epoch of `order` (batch_size 0: batch_size=None).  resume_workers:
  // this is not the iterator's first epoch (Scheduler::Reset).
  void Begin(EpochSource::Order order, uint64_t batch_size, bool drop_last, bool resume_workers);
  // An epoch whose indices come from `source` (not owned).
  void Begin(IndexSource* source, bool resume_workers);

  // The source of the epoch begun, and the native one (its batches' indices).
  IndexSource* active() const { return active_; }
  const EpochSource& source() const { return source_; }
  EpochSource& source() { return source_; }
  bool native() const { return active_ == &source_; }

 private:
  void ApplyResume();  // the pending point, once, right after the scheduler's Reset
  Scheduler* sched_;
  EpochSource source_;
  IndexSource* active_ = &source_;
  std::optional<ResumePoint> pending_;
};

}  // namespace stoker

#endif  // STOKER_LOADER_EPOCH_RUNNER_H_
