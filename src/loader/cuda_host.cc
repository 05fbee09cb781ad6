#include "loader/cuda_host.h"

#include "core/stage.h"

namespace stoker {

namespace {
constexpr unsigned kHostRegisterPortable = 1;  // pinned for every CUDA context
constexpr unsigned kEventDisableTiming = 2;
}  // namespace

CudaHost::~CudaHost() {
  for (const Fence& f : pending_) Clear(api_.event_synchronize(f.event));
  Retire();
  for (const auto& [p, bytes] : ranges_) Clear(api_.host_unregister(p));
}

int CudaHost::Clear(int err) {
  if (err != kCudaSuccess) (void)api_.get_last_error();
  return err;
}

void CudaHost::Retire() {
  for (const Fence& f : pending_) Clear(api_.event_destroy(f.event));
  for (void* e : spare_) Clear(api_.event_destroy(e));
  pending_.clear();
  spare_.clear();
}

int CudaHost::Register(void* p, uint64_t bytes) {
  if (pin_error_ != kCudaSuccess) return pin_error_;
  if (bytes == 0 || ranges_.count(p)) return kCudaSuccess;
  StageScope pinning(Stage::kH2D);  // (the trace's "h2d": pinning a region for the copy)
  const int err = Clear(api_.host_register(p, bytes, kHostRegisterPortable));
  if (err != kCudaSuccess) {
    pin_error_ = err;
    return err;
  }
  ranges_.emplace(p, bytes);
  return kCudaSuccess;
}

void CudaHost::Unregister(void* p) {
  if (ranges_.erase(p)) Clear(api_.host_unregister(p));
}

int CudaHost::Record(void* stream) {
  void* ev = nullptr;
  if (!spare_.empty()) {
    ev = spare_.back();
    spare_.pop_back();
  } else if (int err = Clear(api_.event_create_with_flags(&ev, kEventDisableTiming)); err != kCudaSuccess) {
    return err;
  }
  if (int err = Clear(api_.event_record(ev, stream)); err != kCudaSuccess) {
    spare_.push_back(ev);
    return err;
  }
  last_stream_ = stream;
  have_stream_ = true;
  pending_.push_back(Fence{ev, ++seq_});
  return kCudaSuccess;
}

uint64_t CudaHost::Completed() {
  while (!pending_.empty()) {
    const int err = Clear(api_.event_query(pending_.front().event));
    if (err == kCudaErrorNotReady) break;
    completed_ = pending_.front().seq;
    spare_.push_back(pending_.front().event);
    pending_.pop_front();
  }
  return completed_;
}

uint64_t CudaHost::Drain() {
  const bool recorded = have_stream_ && Record(last_stream_) == kCudaSuccess;
  for (const Fence& f : pending_) Clear(api_.event_synchronize(f.event));
  Completed();
  // A fence that could not be recorded (no stream yet, or the runtime
  // failing) cannot be waited for: everything so far counts as complete, so
  // no slot stays out of use for good.
  if (!recorded) completed_ = ++seq_;
  return completed_;
}

}  // namespace stoker
