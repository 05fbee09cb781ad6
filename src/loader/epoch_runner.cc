// EpochRunner (epoch_runner.h).
#include "loader/epoch_runner.h"

namespace stoker {

uint64_t EpochRunner::SamplesPerRank(uint64_t n, uint32_t world_size, bool pad) {
  OrderRecipe so;
  so.world_size = world_size;
  so.pad = pad;
  return so.PerRank(n);
}

uint64_t EpochRunner::Batches(uint64_t samples, uint64_t batch_size, bool drop_last) {
  const uint64_t per = batch_size ? batch_size : 1;
  return drop_last && batch_size ? samples / per : (samples + per - 1) / per;
}

Status EpochRunner::Begin(NativeDataset& dataset, const OrderRecipe& recipe, uint64_t batch_size, bool drop_last) {
  STOKER_RETURN_IF_ERROR(dataset.BeginEpoch(recipe.epoch));
  Begin(std::make_shared<VectorOrder>(dataset.Order(recipe)), batch_size, drop_last, false);
  return Status::OK();
}

void EpochRunner::Begin(EpochSource::Order order, uint64_t batch_size, bool drop_last, bool resume_workers) {
  // The scheduler drops the last epoch's tokens before the source is reused.
  sched_->Reset(&source_, resume_workers);
  if (order && pending_ && pending_->next_worker < 0 && pending_->delivered > 0)  // not sent again
    order->NotBefore(pending_->delivered * (batch_size ? batch_size : 1));
  source_.Begin(std::move(order), batch_size, drop_last);
  active_ = &source_;
  ApplyResume();
}

void EpochRunner::Begin(IndexSource* source, bool resume_workers) {
  sched_->Reset(source, resume_workers);
  active_ = source;
  ApplyResume();
}

void EpochRunner::ApplyResume() {
  if (!pending_) return;
  const ResumePoint p = std::move(*pending_);
  pending_.reset();
  if (p.next_worker >= 0) {
    sched_->StartRoundRobinAt(static_cast<uint32_t>(p.next_worker));
  } else {
    sched_->SkipDelivered(p.delivered, p.extra);
    if (!p.schedule.empty()) sched_->SetSchedule(p.schedule);
  }
}

}  // namespace stoker
