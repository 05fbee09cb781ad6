#include "loader/native_workers.h"

#include "core/trace.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>
#include <latch>
#include <string>

#include "collate/native_collate.h"
#include "loader/worker_port.h"

namespace stoker {

namespace {

// A failure report in the slot: u8 status code, then the message.
void PublishError(WorkerPort& port, uint32_t slot, const Status& st) {
  uint64_t cap = 0;
  uint8_t* region = port.Region(slot, &cap);
  const std::string& m = st.message();
  const uint64_t n = std::min<uint64_t>(cap - 1, m.size());
  region[0] = static_cast<uint8_t>(st.code());
  std::memcpy(region + 1, m.data(), n);
  port.Publish(slot, SlotResult::kNativeError, n + 1);
}

}  // namespace

Result<ReaderPriority> ParseReaderPriority(const std::string& name) {
  if (name == "normal") return ReaderPriority::kNormal;
  if (name == "low") return ReaderPriority::kLow;
  if (name == "idle") return ReaderPriority::kIdle;
  return Status::InvalidArgument("reader_priority='" + name + "' is not one of 'normal', 'low', 'idle'");
}

NativeWorkers::NativeWorkers(std::shared_ptr<Engine> engine, std::shared_ptr<NativeDataset> dataset,
                             ReaderPriority priority, uint32_t start)
    : engine_(std::move(engine)), dataset_(std::move(dataset)), priority_(priority) {
  const uint32_t most = engine_->options().num_workers;
  threads_.resize(most);
  // Wait until every thread runs (its priority set): a loader is fully up
  // when the constructor returns.
  const uint32_t n = start == 0 ? most : std::min(start, most);
  std::latch started(n);
  for (uint32_t i = 0; i < n; ++i) threads_[i] = std::thread([this, i, &started] { Run(i, &started); });
  started.wait();
}

NativeWorkers::~NativeWorkers() { Stop(); }

Status NativeWorkers::Start(uint32_t id) {
  if (stopped_) return Status::Closed("the reader threads are stopped");
  if (id >= threads_.size()) return Status::InvalidArgument("no reader " + std::to_string(id));
  if (threads_[id].joinable()) return Status::OK();
  std::latch started(1);
  threads_[id] = std::thread([this, id, &started] { Run(id, &started); });
  started.wait();
  return Status::OK();
}

void NativeWorkers::Join(uint32_t id) {
  if (id < threads_.size() && threads_[id].joinable()) threads_[id].join();
}

void NativeWorkers::Stop() {
  if (stopped_) return;
  stopped_ = true;
  engine_->Shutdown();
  dataset_->Interrupt();  // a reader waiting for data (a shard downloading) gives up
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
}

void NativeWorkers::Run(uint32_t id, std::latch* started) {
  pthread_setname_np(pthread_self(), "stoker-reader");  // (top -H, py-spy, /proc/*/task/*/comm)
  // Reader threads below the training loop's threads (docs/native_io.md):
  // best effort, a refusal leaves the thread as it was.
  if (priority_ == ReaderPriority::kLow) {
    setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
  } else if (priority_ == ReaderPriority::kIdle) {
    sched_param sp{};
    sched_setscheduler(0, SCHED_IDLE, &sp);
  }
  started->count_down();
  TraceNameThread("reader " + std::to_string(id));
  RunNativeWorker(std::shared_ptr<Arena>(engine_, &engine_->arena()), *dataset_, id);
}

void RunNativeWorker(std::shared_ptr<Arena> arena, NativeDataset& dataset, uint32_t id) {
  WorkerPort port(std::move(arena), id);
  const std::vector<FieldSpec>& fields = dataset.fields();
  const size_t nf = fields.size();
  const bool variable = dataset.has_variable_fields();
  const bool skip_bad = dataset.on_error() == OnError::kSkip;
  std::vector<int64_t> indices;
  std::vector<uint8_t*> dst(nf);
  std::vector<uint8_t*> batch_dst;  // every sample's fields, for ReadBatch
  std::vector<uint64_t> sizes;
  std::vector<uint8_t> bad;      // per sample: skipped
  std::vector<uint64_t> kept;
  // A bad record: skipped and counted (on_error=skip), else the batch fails.
  auto skippable = [&](const Status& st) { return skip_bad && st.IsDataLoss(); };
  for (;;) {
    Task t;
    Status st = port.Next(&t, -1);
    if (!st.ok()) return;  // Closed: the loader is shutting down
    if (t.msg != TaskMsg::kFill) continue;
    // loader.set_epoch(): the dataset's transforms see it from this task on.
    const int64_t epoch = port.epoch();
    if (epoch >= 0 && static_cast<uint64_t>(epoch) != dataset.epoch()) dataset.SetEpoch(static_cast<uint64_t>(epoch));
    if (t.kind != TaskKind::kIndices && t.kind != TaskKind::kIndex) {
      PublishError(port, t.slot, Status::InvalidArgument(
          "a native dataset (" + dataset.Describe() + ") takes integer indices from its sampler"));
      continue;
    }
    indices.resize(t.payload_bytes / 8);
    if (!indices.empty()) std::memcpy(indices.data(), t.payload, indices.size() * 8);  // before Reserve moves it
    const uint64_t n = indices.size();
    Status failed;
    for (int64_t i : indices)
      if (i < 0) failed = Status::InvalidArgument("index " + std::to_string(i) + " is negative");
    bad.assign(n, 0);
    if (variable && failed.ok()) {
      sizes.assign(n * nf, 0);
      for (uint64_t i = 0; i < n && failed.ok(); ++i) {
        Status s = dataset.SampleBytes(static_cast<uint64_t>(indices[i]), &sizes[i * nf]);
        if (s.ok()) continue;
        if (!skippable(s)) {
          failed = s;
          break;
        }
        dataset.CountSkipped(s);
        bad[i] = 1;
        for (size_t f = 0; f < nf; ++f) sizes[i * nf + f] = 0;
      }
    }
    if (!failed.ok()) {
      PublishError(port, t.slot, failed);
      continue;
    }
    // batch_size=None (kIndex): one sample, without a batch dimension.
    NativeCollate layout(fields, n, t.kind == TaskKind::kIndices, variable ? &sizes : nullptr, dataset.structure());
    Result<uint8_t*> region = port.Reserve(t.slot, layout.total_bytes());
    if (region.status().IsCancelled()) {
      port.Publish(t.slot, SlotResult::kCancelled, 0);
      continue;
    }
    if (!region.ok()) {
      PublishError(port, t.slot, region.status());
      continue;
    }
    kept.clear();
    if (!skip_bad) {  // the batch at once: the dataset may read neighbouring records together
      batch_dst.resize(n * nf);
      for (uint64_t i = 0; i < n; ++i)
        for (size_t f = 0; f < nf; ++f) batch_dst[i * nf + f] = layout.Sample(region.value(), f, i);
      failed = dataset.ReadBatch(reinterpret_cast<const uint64_t*>(indices.data()), n, batch_dst.data());
      for (uint64_t i = 0; i < n && failed.ok(); ++i) kept.push_back(i);
    } else {  // one by one: a bad sample is left out
      for (uint64_t i = 0; i < n && failed.ok(); ++i) {
        if (bad[i]) continue;
        for (size_t f = 0; f < nf; ++f) dst[f] = layout.Sample(region.value(), f, i);
        Status s = dataset.Read(static_cast<uint64_t>(indices[i]), dst.data());
        if (s.ok()) {
          kept.push_back(i);
        } else if (skippable(s)) {
          dataset.CountSkipped(s);
        } else {
          failed = s;
        }
      }
    }
    if (failed.ok() && kept.empty() && t.kind == TaskKind::kIndex)
      failed = Status::InvalidArgument("sample " + std::to_string(indices[0]) + " of " + dataset.Describe() +
                                       " is bad and was skipped, but with batch_size=None there is no batch to "
                                       "leave it out of: " + dataset.last_skipped());
    if (!failed.ok()) {
      PublishError(port, t.slot, failed);
      continue;
    }
    layout.WriteHeader(region.value(), kept.size() == n ? nullptr : &kept);
    port.Publish(t.slot, SlotResult::kOk, layout.total_bytes());
  }
}

}  // namespace stoker
