// stoker::Loader (include/stoker/loader.h): Engine + Scheduler + reader
// threads (NativeWorkers) or forked reader processes, and a C++ sampler with
// DistributedSampler's sharding.
#include "stoker/loader.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "api/batch_impl.h"
#include "io/record_file_dataset.h"
#include "io/tar_shard_dataset.h"
#include "io/tfrecord_dataset.h"
#include "loader/engine.h"
#include "loader/epoch_runner.h"
#include "loader/native_workers.h"
#include "loader/scheduler.h"
#include "sync/futex.h"

namespace stoker {

struct Loader::Impl {
  std::shared_ptr<NativeDataset> dataset;
  LoaderOptions o;
  std::shared_ptr<Engine> engine;
  std::unique_ptr<Scheduler> sched;
  std::unique_ptr<NativeWorkers> threads;
  std::vector<pid_t> pids;
  std::unique_ptr<EpochRunner> runner;
  Status broken;  // a worker process died: every later call says so
  uint64_t delivered = 0, delivered_bytes = 0;
  int64_t wait_ns = 0;

  ~Impl() {
    if (sched) sched->Clear();
    if (threads) threads->Stop();
    if (engine) engine->Shutdown();
    for (pid_t p : pids) {
      // Told to exit by the shutdown; a stuck one is killed after a grace.
      for (int i = 0; i < 200; ++i) {
        if (waitpid(p, nullptr, WNOHANG) != 0) goto reaped;
        usleep(10000);
      }
      kill(p, SIGKILL);
      waitpid(p, nullptr, 0);
    reaped:;
    }
  }
};

Loader::Loader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Loader::~Loader() = default;

Result<std::unique_ptr<Loader>> Loader::Create(std::shared_ptr<NativeDataset> dataset, const LoaderOptions& o) {
  if (!dataset) return Status::InvalidArgument("Loader: no dataset");
  if (o.num_workers < 1) return Status::InvalidArgument("Loader: num_workers must be at least 1");
  if (o.world_size < 1 || o.rank >= o.world_size)
    return Status::InvalidArgument("Loader: rank " + std::to_string(o.rank) + " is not below world_size " +
                                   std::to_string(o.world_size));
  if (o.prefetch_factor < 1) return Status::InvalidArgument("Loader: prefetch_factor must be at least 1");
  if (o.timeout_s < 0) return Status::InvalidArgument("Loader: timeout_s must be >= 0");
  if (o.batch_size == 0 && dataset->on_error() == OnError::kSkip)
    return Status::InvalidArgument("Loader: a dataset that skips bad records needs batch_size > 0 "
                                   "(there is no batch to leave a bad sample out of)");
  auto impl = std::make_unique<Impl>();
  impl->dataset = std::move(dataset);
  impl->dataset->SetSeed(o.seed);  // random transforms (stoker.vision) draw from the loader's seed
  impl->o = o;
  EngineOptions eo;
  eo.num_workers = o.num_workers;
  eo.max_memory = o.max_memory ? o.max_memory : DefaultMaxMemory();
  const uint32_t prefetch = o.prefetch_factor * o.num_workers;
  eo.max_slots = std::max<uint32_t>(256, 4 * prefetch + 64);
  STOKER_ASSIGN_OR_RETURN(impl->engine, Engine::Create(eo));
  SchedulerOptions so;
  so.num_workers = o.num_workers;
  so.prefetch = prefetch;
  so.in_order = o.in_order;
  impl->sched = std::make_unique<Scheduler>(impl->engine, so);
  impl->runner = std::make_unique<EpochRunner>(impl->sched.get());
  if (!o.use_processes) {
    impl->threads = std::make_unique<NativeWorkers>(impl->engine, impl->dataset);
  } else {
    const pid_t parent = getpid();
    for (uint32_t i = 0; i < o.num_workers; ++i) {
      const pid_t pid = fork();
      if (pid < 0) return Status::IOError("fork of worker process " + std::to_string(i), errno);
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the training program
        if (getppid() != parent) _exit(1);
        RunNativeWorker(std::shared_ptr<Arena>(impl->engine, &impl->engine->arena()), *impl->dataset, i);
        _exit(0);
      }
      impl->pids.push_back(pid);
      STOKER_RETURN_IF_ERROR(impl->engine->Watch(i, pid));
    }
  }
  return std::unique_ptr<Loader>(new Loader(std::move(impl)));
}

uint64_t Loader::batches_per_epoch() const {
  const LoaderOptions& o = impl_->o;
  return EpochRunner::Batches(EpochRunner::SamplesPerRank(impl_->dataset->size(), o.world_size, o.even_split_pad),
                              o.batch_size, o.drop_last);
}

std::vector<int> Loader::worker_pids() const { return std::vector<int>(impl_->pids.begin(), impl_->pids.end()); }

void Loader::SetEpoch(uint64_t epoch) {
  epoch_ = epoch;
  in_epoch_ = false;
  impl_->runner->Forget();
}

Status Loader::StartEpoch() {
  Impl& m = *impl_;
  m.engine->SetEpoch(static_cast<int64_t>(epoch_));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const bool shuffled = m.o.seeded_shuffle || m.o.shuffle;  // (the old name still works, with a warning where it is set)
#pragma GCC diagnostic pop
  const OrderRecipe recipe{epoch_, shuffled, m.o.seed, m.o.rank, m.o.world_size, m.o.even_split_pad};
  STOKER_RETURN_IF_ERROR(m.runner->Begin(*m.dataset, recipe, m.o.batch_size, m.o.drop_last));
  in_epoch_ = true;
  return Status::OK();
}

Status Loader::Next(Batch* out, bool* end_of_epoch) {
  Impl& m = *impl_;
  *end_of_epoch = false;
  *out = Batch();
  if (!m.broken.ok()) return m.broken;
  if (!in_epoch_) STOKER_RETURN_IF_ERROR(StartEpoch());
  const int64_t timeout_ns = m.o.timeout_s > 0 ? static_cast<int64_t>(m.o.timeout_s * 1e9) : -1;
  Outcome o;
  const int64_t t0 = MonotonicNanos();
  Status st = m.sched->Next(timeout_ns, &o);
  while (st.IsInterrupted()) st = m.sched->Next(timeout_ns, &o);
  m.wait_ns += MonotonicNanos() - t0;
  if (!st.ok()) return st;
  switch (o.kind) {
    case Outcome::Kind::kBatch: {
      auto impl = std::make_shared<Batch::Impl>();
      impl->id = o.batch_id;
      const uint8_t* data;
      uint64_t used;
      if (o.spilled) {
        impl->bytes = o.spilled;
      } else if (m.engine->ShouldCopyOut(o.slot)) {
        // The training loop holds most of the pool: copy this one out.
        uint64_t cap = 0;
        const uint8_t* p = m.engine->SlotRegion(o.slot, &used, &cap);
        impl->bytes = std::make_shared<const std::string>(reinterpret_cast<const char*>(p), std::min(used, cap));
        m.engine->Release(o.slot);
        m.engine->CountCopyOut();
      } else {
        uint64_t cap = 0;
        m.engine->SlotRegion(o.slot, &used, &cap);
        m.engine->MarkHeld(o.slot);
        impl->engine = m.engine;
        impl->slot = o.slot;
      }
      m.runner->source().Drop(o.token);
      if (impl->bytes) {
        data = reinterpret_cast<const uint8_t*>(impl->bytes->data());
        used = impl->bytes->size();
      } else {
        uint64_t cap = 0;
        data = m.engine->SlotRegion(o.slot, &used, &cap);
        used = std::min(used, cap);
      }
      STOKER_RETURN_IF_ERROR(ParseNativeBatch(
          data, used, impl.get(),
          m.dataset->structure() == SampleStructure::kTuple ? &m.dataset->fields() : nullptr));
      if (m.o.batch_size == 0) impl->size = 1;
      ++m.delivered;
      m.delivered_bytes += impl->nbytes;
      *out = Batch(std::move(impl));
      return Status::OK();
    }
    case Outcome::Kind::kError: {
      std::string report;
      if (o.spilled) {
        report = *o.spilled;
      } else {
        uint64_t used = 0, cap = 0;
        const uint8_t* p = m.engine->SlotRegion(o.slot, &used, &cap);
        report.assign(reinterpret_cast<const char*>(p), std::min(used, cap));
        m.engine->Release(o.slot);
      }
      const std::string indices = m.runner->source().Describe(o.token);
      m.runner->source().Drop(o.token);
      const auto code = report.empty() ? Status::Code::kInternal : static_cast<Status::Code>(report[0]);
      return Status::FromCode(code == Status::Code::kOk ? Status::Code::kInternal : code,
                              (report.size() > 1 ? report.substr(1) : "unknown error") + " (while loading batch " +
                                  std::to_string(o.batch_id) + " of epoch " + std::to_string(epoch_) + " in worker " +
                                  std::to_string(o.worker) + ", indices " + indices + ")");
    }
    case Outcome::Kind::kWorkerExit: {
      std::string how = o.exit.signal ? "was killed by signal " + std::to_string(o.exit.signal) + " (" +
                                            strsignal(o.exit.signal) + ")"
                                      : "exited with status " + std::to_string(o.exit.exit_code);
      std::string held;
      for (const InFlight& f : m.sched->InFlightTasks())
        if (f.worker == o.worker && !f.finished) held += (held.empty() ? "" : ", ") + std::to_string(f.batch_id);
      m.broken = Status::WorkerDied("worker process " + std::to_string(o.worker) + " (pid " +
                                    std::to_string(o.exit.pid) + ") " + how +
                                    (held.empty() ? "" : " while loading batch(es) " + held) +
                                    "; this loader cannot go on: create a new one");
      return m.broken;
    }
    case Outcome::Kind::kEnd:
      *end_of_epoch = true;
      in_epoch_ = false;
      ++epoch_;
      return Status::OK();
    case Outcome::Kind::kTimeout: {
      std::string flight;
      for (const InFlight& f : m.sched->InFlightTasks())
        if (!f.finished)
          flight += (flight.empty() ? "" : ", ") + std::string("batch ") + std::to_string(f.batch_id) + " on worker " +
                    std::to_string(f.worker);
      return Status::Timeout("no batch within timeout_s=" + std::to_string(m.o.timeout_s) + " s (in flight: " +
                             (flight.empty() ? "nothing" : flight) + ")");
    }
  }
  return Status::Internal("unknown outcome");
}

Loader::Iterator& Loader::Iterator::operator++() {
  bool end = false;
  Status st = loader_->Next(&batch_, &end);
  if (!st.ok() || end) {
    loader_->status_ = st;
    batch_ = Batch();
    loader_ = nullptr;
  }
  return *this;
}

LoaderStats Loader::stats() {
  EngineStats e = impl_->engine->Stats(false);
  LoaderStats s;
  s.epoch = epoch_;
  s.batches_delivered = impl_->delivered;
  s.bytes_delivered = impl_->delivered_bytes;
  s.max_memory = e.max_memory;
  s.arena_bytes = e.arena_resident_bytes;
  s.in_use_bytes = e.in_use_bytes;
  s.slots_ready = e.slots_ready;
  s.slots_held = e.slots_held;
  s.skipped_records = impl_->dataset->skipped();
  s.wait_s = static_cast<double>(impl_->wait_ns) / 1e9;
  return s;
}

LoaderState Loader::state() const {
  LoaderState s;
  s.epoch = epoch_;
  s.seed = impl_->o.seed;
  s.dataset_size = impl_->dataset->size();
  s.batch_size = impl_->o.batch_size;
  s.rank = impl_->o.rank;
  s.world_size = impl_->o.world_size;
  if (in_epoch_) {
    impl_->sched->Delivered(&s.delivered_prefix, &s.delivered_extra);
    s.dataset_epoch = impl_->dataset->EpochState();
  } else if (const auto& p = impl_->runner->pending()) {
    s.delivered_prefix = p->delivered;
    s.delivered_extra = p->extra;
  }
  return s;
}

Status Loader::Restore(const LoaderState& s) {
  const LoaderOptions& o = impl_->o;
  auto differs = [](const char* what, uint64_t saved, uint64_t now) {
    return Status::InvalidArgument(std::string("Loader::Restore: the state was saved with ") + what + " " +
                                   std::to_string(saved) + ", this loader has " + std::to_string(now));
  };
  // A dataset whose epochs differ repeats the saved one (its size is that
  // epoch's); any other must be the same size.
  if (s.dataset_epoch.empty() && s.dataset_size != impl_->dataset->size())
    return differs("a dataset of size", s.dataset_size, impl_->dataset->size());
  if (s.batch_size != o.batch_size) return differs("batch_size", s.batch_size, o.batch_size);
  if (s.rank != o.rank) return differs("rank", s.rank, o.rank);
  if (s.world_size != o.world_size) return differs("world_size", s.world_size, o.world_size);
  if (s.seed != o.seed) return differs("seed", s.seed, o.seed);
  STOKER_RETURN_IF_ERROR(impl_->dataset->RestoreEpoch(s.dataset_epoch));
  epoch_ = s.epoch;
  in_epoch_ = false;
  impl_->runner->ResumeAt(ResumePoint{s.delivered_prefix, s.delivered_extra, -1, {}});
  return Status::OK();
}

std::string LoaderState::Serialize() const {
  std::string out = "stoker-loader-state 1\n";
  out += std::to_string(epoch) + " " + std::to_string(seed) + " " + std::to_string(dataset_size) + " " +
         std::to_string(batch_size) + " " + std::to_string(rank) + " " + std::to_string(world_size) + " " +
         std::to_string(delivered_prefix) + " " + std::to_string(delivered_extra.size());
  for (uint64_t x : delivered_extra) out += " " + std::to_string(x);
  out += "\n";
  if (!dataset_epoch.empty()) out += "dataset-epoch " + std::to_string(dataset_epoch.size()) + "\n" + dataset_epoch;
  return out;
}

Result<LoaderState> LoaderState::Parse(const std::string& bytes) {
  const std::string magic = "stoker-loader-state 1\n";
  if (bytes.compare(0, magic.size(), magic) != 0)
    return Status::InvalidArgument("LoaderState::Parse: not a stoker loader state (bad header)");
  LoaderState s;
  const char* p = bytes.c_str() + magic.size();
  char* end = nullptr;
  auto num = [&](uint64_t* v) {
    errno = 0;
    *v = std::strtoull(p, &end, 10);
    const bool ok = end != p && errno == 0;
    p = end;
    return ok;
  };
  uint64_t rank, world, n;
  if (!num(&s.epoch) || !num(&s.seed) || !num(&s.dataset_size) || !num(&s.batch_size) || !num(&rank) ||
      !num(&world) || !num(&s.delivered_prefix) || !num(&n) || n > (uint64_t{1} << 32))
    return Status::InvalidArgument("LoaderState::Parse: truncated or corrupt state");
  s.rank = static_cast<uint32_t>(rank);
  s.world_size = static_cast<uint32_t>(world);
  s.delivered_extra.resize(n);
  for (uint64_t& x : s.delivered_extra)
    if (!num(&x)) return Status::InvalidArgument("LoaderState::Parse: truncated or corrupt state");
  // Optional: "\ndataset-epoch N\n" and N bytes.
  const std::string tag = "\ndataset-epoch ";
  const size_t at = static_cast<size_t>(p - bytes.c_str());
  if (bytes.compare(at, tag.size(), tag) == 0) {
    p += tag.size();
    uint64_t len = 0;
    if (!num(&len) || *p != '\n') return Status::InvalidArgument("LoaderState::Parse: corrupt dataset-epoch section");
    const size_t start = static_cast<size_t>(p - bytes.c_str()) + 1;
    if (len > bytes.size() - std::min(bytes.size(), start))
      return Status::InvalidArgument("LoaderState::Parse: truncated dataset-epoch section");
    s.dataset_epoch = bytes.substr(start, len);
  }
  return s;
}

Result<std::shared_ptr<NativeDataset>> OpenRaw(const std::string& path, ElementType dtype, std::vector<int64_t> shape) {
  STOKER_ASSIGN_OR_RETURN(auto d, RecordFileDataset::OpenRaw(path, dtype, std::move(shape)));
  return std::shared_ptr<NativeDataset>(std::move(d));
}

Result<std::shared_ptr<NativeDataset>> OpenNpy(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    STOKER_ASSIGN_OR_RETURN(auto d, NpyDirDataset::Open(path));
    return std::shared_ptr<NativeDataset>(std::move(d));
  }
  STOKER_ASSIGN_OR_RETURN(auto d, RecordFileDataset::OpenNpy(path));
  return std::shared_ptr<NativeDataset>(std::move(d));
}

Result<std::shared_ptr<NativeDataset>> OpenTFRecord(const std::vector<std::string>& paths,
                                                    std::vector<FieldSpec> features, OnError on_error) {
  TFRecordOptions o;
  o.on_error = on_error;
  STOKER_ASSIGN_OR_RETURN(auto d, TFRecordDataset::Open(paths, std::move(features), o));
  return std::shared_ptr<NativeDataset>(std::move(d));
}

Result<std::shared_ptr<NativeDataset>> OpenTarShards(const std::vector<std::string>& paths, OnError on_error) {
  TarShardOptions o;
  o.on_error = on_error;
  STOKER_ASSIGN_OR_RETURN(auto d, TarShardDataset::Open(paths, {}, o));
  return std::shared_ptr<NativeDataset>(std::move(d));
}

}  // namespace stoker
