// Pump: drives a Scheduler from Python.  The epoch's indices come from a
// Python iterator (the sampler: its outputs become task payloads, int64
// indices on the fast path, a pickle otherwise) or from a native order
// (EpochSource: a StreamingDataset's, no Python per sample); finished slots
// come back decoded as tensors/arrays.
//
// Next() returns (PumpCode, value):
//   (kBatch, batch)                 a batch
//   (kError, (report, worker, batch_id, index))  the worker's error report (bytes)
//   (kWorkerExit, (worker, pid, exit_code, signal))  a worker died
//   (kEnd, None)                    end of epoch
//   (kTimeout, None)                timeout
//   (kBatchFlagged, (batch, flags)) a batch, with warnings to emit
//                                   (flags: 1 copied out of the pool)
// REQUIRES: the GIL; it is released while waiting.
#ifndef STOKER_PY_PUMP_H_
#define STOKER_PY_PUMP_H_

#include <Python.h>

#include <memory>
#include <vector>

#include "loader/epoch_runner.h"
#include "order/torch_randperm.h"
#include "loader/scheduler.h"

namespace stoker::glue {

enum class PumpCode : int { kBatch = 0, kError = 1, kWorkerExit = 2, kEnd = 3, kTimeout = 4, kBatchFlagged = 5 };

class PyIndexSource : public IndexSource {
 public:
  PyIndexSource(bool iterable, bool auto_collation) : iterable_(iterable), auto_(auto_collation) {}
  ~PyIndexSource() override {
    Py_XDECREF(iter_);
    for (PyObject* o : saved_) Py_XDECREF(o);
  }
  void SetIterator(PyObject* it) {
    Py_XINCREF(it);
    Py_XSETREF(iter_, it);
  }
  Result<bool> Next(TaskSpec* spec) override;
  void Drop(uint64_t token) override { Py_XDECREF(reinterpret_cast<PyObject*>(token)); }
  // Re-raises a Python exception the sampler raised in Next(), if any.
  bool RestoreError();

 private:
  Status Stash();  // moves the pending Python exception into saved_
  bool iterable_, auto_;
  PyObject* iter_ = nullptr;
  PyObject* saved_[3] = {nullptr, nullptr, nullptr};  // type, value, traceback
};

// What Python holds of an epoch's order (bound as EpochOrder:
// bind_order.cc); `randperm` is set when it is torch's randperm.
struct EpochOrderHandle {
  EpochSource::Order order;
  std::shared_ptr<TorchRandperm> randperm;
};

class Pump {
 public:
  Pump(std::shared_ptr<Engine> engine, const SchedulerOptions& o, bool auto_collation, bool numpy_mode);
  // The next epoch (Reset or ResetOrder) resumes from `point` (EpochRunner).
  void ResumeAt(ResumePoint point) { runner_.ResumeAt(std::move(point)); }
  void Reset(PyObject* sampler_iter, bool resume_workers);
  // An epoch whose order is native (batch_size 0: batch_size=None).
  void ResetOrder(EpochSource::Order order, uint64_t batch_size, bool drop_last, bool resume_workers);
  PyObject* Next(double timeout_s);
  // [(batch_id, worker, index), ...] of the tasks in flight.
  PyObject* InFlight();
  void Clear() { sched_.Clear(); }
  Scheduler::Depths QueueDepths() const { return sched_.QueueDepths(); }
  uint64_t NoRoomWaitNs() const { return sched_.NoRoomWaitNs(); }
  void Delivered(uint64_t* prefix, std::vector<uint64_t>* extra) const { sched_.Delivered(prefix, extra); }
  void DeliveredByWorker(std::vector<uint64_t>* counts, int* last) const { sched_.DeliveredByWorker(counts, last); }
  uint64_t Generation() const { return sched_.generation(); }
  void SetPrefetch(uint32_t prefetch) { sched_.SetPrefetch(prefetch); }
  uint32_t prefetch() const { return sched_.prefetch(); }
  Status Requeue(uint32_t worker) { return sched_.Requeue(worker); }
  Scheduler& scheduler() { return sched_; }

 private:
  // The Python index (a new reference) of the task holding `token`.
  PyObject* IndexOf(uint64_t token);
  void Drop(uint64_t token) { runner_.active()->Drop(token); }

  std::shared_ptr<Engine> engine_;
  PyIndexSource source_;
  bool batched_ = true;  // (the epoch source's batch_size > 0)
  Scheduler sched_;
  EpochRunner runner_{&sched_};
  bool numpy_;
  PyThreadState* saved_ = nullptr;
};

}  // namespace stoker::glue

#endif  // STOKER_PY_PUMP_H_
