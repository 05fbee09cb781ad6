#include "loader/native_workers.h"

#include <cstring>
#include <string>

#include "loader/native_batch.h"
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

NativeWorkers::NativeWorkers(std::shared_ptr<Engine> engine, std::shared_ptr<NativeDataset> dataset)
    : engine_(std::move(engine)), dataset_(std::move(dataset)) {
  for (uint32_t i = 0; i < engine_->options().num_workers; ++i) threads_.emplace_back([this, i] { Run(i); });
}

NativeWorkers::~NativeWorkers() { Stop(); }

void NativeWorkers::Stop() {
  if (threads_.empty()) return;
  engine_->Shutdown();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void NativeWorkers::Run(uint32_t id) {
  WorkerPort port(std::shared_ptr<Arena>(engine_, &engine_->arena()), id);
  const std::vector<FieldSpec>& fields = dataset_->fields();
  std::vector<int64_t> indices;
  std::vector<uint8_t*> dst(fields.size());
  for (;;) {
    Task t;
    Status st = port.Next(&t, -1);
    if (!st.ok()) return;  // Closed: the loader is shutting down
    if (t.msg != TaskMsg::kFill) continue;
    if (t.kind != TaskKind::kIndices && t.kind != TaskKind::kIndex) {
      PublishError(port, t.slot, Status::InvalidArgument(
          "a native dataset (" + dataset_->Describe() + ") takes integer indices from its sampler"));
      continue;
    }
    indices.resize(t.payload_bytes / 8);
    if (!indices.empty()) std::memcpy(indices.data(), t.payload, indices.size() * 8);  // before Reserve moves it
    // batch_size=None (kIndex): one sample, without a batch dimension.
    NativeBatchLayout layout(fields, indices.size(), t.kind == TaskKind::kIndices);
    Result<uint8_t*> region = port.Reserve(t.slot, layout.total_bytes());
    if (region.status().IsCancelled()) {
      port.Publish(t.slot, SlotResult::kCancelled, 0);
      continue;
    }
    if (!region.ok()) {
      PublishError(port, t.slot, region.status());
      continue;
    }
    layout.WriteHeader(region.value());
    Status failed;
    for (uint64_t i = 0; i < indices.size() && failed.ok(); ++i) {
      if (indices[i] < 0) {
        failed = Status::InvalidArgument("index " + std::to_string(indices[i]) + " is negative");
        break;
      }
      for (size_t f = 0; f < fields.size(); ++f) dst[f] = layout.Sample(region.value(), f, i);
      failed = dataset_->Read(static_cast<uint64_t>(indices[i]), dst.data());
    }
    if (!failed.ok()) {
      PublishError(port, t.slot, failed);
      continue;
    }
    port.Publish(t.slot, SlotResult::kOk, layout.total_bytes());
  }
}

}  // namespace stoker
