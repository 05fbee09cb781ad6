// stoker::Loader: the C++ API of the engine, for programs without Python.
//
//   auto ds = stoker::OpenTFRecord({"train.tfrecord"}, {{"x", ElementType::kFloat32, {1000}}});
//   stoker::LoaderOptions o;
//   o.batch_size = 64; o.seeded_shuffle = true; o.num_workers = 4;
//   auto loader = stoker::Loader::Create(ds.value(), o);
//   for (const stoker::Batch& b : *loader.value()) use(b[0].as<float>());
//   if (!loader.value()->status().ok()) ...   // why the loop stopped early
//
// or, with an explicit status per batch:
//   stoker::Batch b; bool end;
//   while (loader->Next(&b, &end).ok() && !end) use(b);
//
// Workers are C++ threads reading the dataset (the default), or forked
// worker processes (use_processes; their deaths are reported, not fatal to
// this process).  The same guarantees as the Python package: a byte-bounded
// shared-memory pool, batches in sampler order, every sample once per epoch,
// errors naming the batch and the sample, no exceptions, shutdown in the
// destructor without hangs.
#ifndef STOKER_LOADER_H_
#define STOKER_LOADER_H_

#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "stoker/batch.h"
#include "stoker/native_dataset.h"
#include "stoker/status.h"

namespace stoker {

// (The pragmas keep the copy and move of LoaderOptions, which the compiler
// writes, from warning about the deprecated member; setting it still warns.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
struct LoaderOptions {
  uint64_t batch_size = 1;       // 0: one sample per Batch, without a batch dimension
  // Each epoch in a permutation of (seed, epoch) that stoker draws: the same on
  // every machine and in every run, but not the permutation torch's
  // shuffle=True draws (torch's comes from its generator's state).
  bool seeded_shuffle = false;
  [[deprecated("LoaderOptions::shuffle is now seeded_shuffle (it is stoker's permutation of (seed, epoch), "
               "not torch's shuffle=True order)")]] bool shuffle = false;
  uint64_t seed = 0;             // the order of epoch e is a function of (seed, e)
  uint32_t num_workers = 1;      // threads (or processes), at least 1
  bool use_processes = false;    // fork worker processes instead of threads
  uint64_t max_memory = 0;       // bytes of shared memory; 0: min(1 GiB, a quarter of RAM/cgroup)
  uint32_t prefetch_factor = 2;  // batches in flight per worker
  bool in_order = true;          // false: batches as they complete
  double timeout_s = 0;          // > 0: a batch not ready in time is an error naming it
  bool drop_last = false;
  uint32_t rank = 0, world_size = 1;  // this rank's share (DistributedSampler's order)
  bool even_split_pad = true;    // ranks get equal shares by repeating samples (false: drop the tail)
};
#pragma GCC diagnostic pop

struct LoaderStats {
  uint64_t epoch = 0;
  uint64_t batches_delivered = 0, bytes_delivered = 0;
  uint64_t max_memory = 0, arena_bytes = 0, in_use_bytes = 0;
  uint32_t slots_ready = 0, slots_held = 0;
  uint64_t skipped_records = 0;  // on_error=skip
  double wait_s = 0;             // time Next() spent waiting for data
};

// Where a loader is, to resume exactly (see Loader::state).
struct LoaderState {
  uint64_t epoch = 0;
  uint64_t seed = 0;
  uint64_t dataset_size = 0, batch_size = 0;
  uint32_t rank = 0, world_size = 1;
  uint64_t delivered_prefix = 0;          // batches 0..prefix-1 were delivered
  std::vector<uint64_t> delivered_extra;  // and these (out of order)
  std::string dataset_epoch;              // NativeDataset::EpochState (a growing streaming dataset's shards)
  std::string Serialize() const;
  static Result<LoaderState> Parse(const std::string& bytes);
};

class Loader {
 public:
  static Result<std::unique_ptr<Loader>> Create(std::shared_ptr<NativeDataset> dataset, const LoaderOptions& o);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The next batch of the current epoch, or *end_of_epoch (no batch; the
  // next call starts the next epoch).  A batch that failed is an error
  // naming it and its samples; the next call goes on with the batches after
  // it.  A worker process that died is an error for this and every later
  // call (create a new Loader).
  Status Next(Batch* out, bool* end_of_epoch);
  // Starts epoch `epoch` at the next Next() (abandoning the current one).
  void SetEpoch(uint64_t epoch);
  uint64_t epoch() const { return epoch_; }
  uint64_t batches_per_epoch() const;
  // Worker process ids (use_processes), else empty.
  std::vector<int> worker_pids() const;

  LoaderStats stats();
  // Where this loader is: restoring it in a new Loader (same dataset size,
  // batch size, rank and world size) yields exactly the batches this one
  // would yield next.
  LoaderState state() const;
  Status Restore(const LoaderState& s);

  // Range-for over the rest of the current epoch; an error ends the loop
  // early and is kept in status().
  class Iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    const Batch& operator*() const { return batch_; }
    const Batch* operator->() const { return &batch_; }
    Iterator& operator++();
    bool operator==(std::default_sentinel_t) const { return loader_ == nullptr; }

   private:
    friend class Loader;
    explicit Iterator(Loader* l) : loader_(l) { ++*this; }
    Loader* loader_;
    Batch batch_;
  };
  Iterator begin() { return Iterator(this); }
  std::default_sentinel_t end() { return {}; }
  const Status& status() const { return status_; }

  struct Impl;

 private:
  explicit Loader(std::unique_ptr<Impl> impl);
  Status StartEpoch();
  std::unique_ptr<Impl> impl_;
  uint64_t epoch_ = 0;
  bool in_epoch_ = false;
  Status status_;
};

// Native datasets for the C++ API (the Python stoker.io classes open the same).
Result<std::shared_ptr<NativeDataset>> OpenRaw(const std::string& path, ElementType dtype,
                                               std::vector<int64_t> shape);
Result<std::shared_ptr<NativeDataset>> OpenNpy(const std::string& path);  // a file, or a directory of .npy
Result<std::shared_ptr<NativeDataset>> OpenTFRecord(const std::vector<std::string>& paths,
                                                    std::vector<FieldSpec> features,
                                                    OnError on_error = OnError::kRaise);
// fields empty: inferred from the first sample.
Result<std::shared_ptr<NativeDataset>> OpenTarShards(const std::vector<std::string>& paths,
                                                     OnError on_error = OnError::kRaise);

}  // namespace stoker

#endif  // STOKER_LOADER_H_
