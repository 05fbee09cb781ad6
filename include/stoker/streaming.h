// stoker::StreamingDataset: a dataset of TFRecord or tar shards on a remote
// store (stoker::Store: a directory or HTTP(S)), read through a local cache
// directory under a byte budget while background fetcher threads download
// shards into it.
//
// Modes:
//   kFull     (the default) each epoch is the whole remote dataset, every
//             sample exactly once: shards not cached are
//             fetched as the readers reach them, `prefetch` shards ahead
//             (a speculative fetch leaves a window's worth of buffers free);
//             while the cache has room they are kept in it, and once it is
//             full the rest stream through a few reused memory buffers
//             (stream_buffers) instead of evicting: on a pass over a dataset
//             larger than the cache, evicting would only throw away shards
//             the next epoch could have read from disk;
//   kCached   each epoch is the shards fully cached when it begins (the
//             first waits for min_shards), so an epoch may cover only part
//             of the dataset (stats(): epoch_shards_left_out); the fetchers
//             keep downloading while it runs, and once the cache is full
//             they evict shards the readers are done with (oldest or least
//             recently used) to make room for new ones, so the local set
//             turns over the whole remote dataset across epochs.
//
// Order: an epoch's samples come shard by shard (shards shuffled, and the
// samples of `shuffle_window` shards at a time shuffled together), so a
// shard is read in a short stretch of the epoch; it stays pinned (never
// evicted) from the epoch's start (kCached) or its download (kFull) until
// its last sample of the epoch has been read.  Ranks take contiguous parts
// of the epoch's order, padded or cut to equal length.
//
// Shareable: the loaders of one node (ranks) may use one cache directory;
// a shard is downloaded once (file locks), and a process that dies mid-
// download leaves nothing another cannot resume or evict.
//
// Read in the process that opened it (by threads); a forked child gets an
// error instead of a hang.
#ifndef STOKER_STREAMING_H_
#define STOKER_STREAMING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "stoker/eviction_order.h"
#include "stoker/native_dataset.h"
#include "stoker/shard_index.h"
#include "stoker/status.h"
#include "stoker/store.h"
#include "stoker/tar_fields.h"

namespace stoker {

// (kCached was called kGrowing, and was the default, in earlier builds: the
// old name still compiles, with a deprecation warning.)
enum class StreamingMode : uint8_t {
  kCached = 0,
  kFull = 1,
  kGrowing [[deprecated("StreamingMode::kGrowing is now kCached; the default is kFull")]] = kCached,
};

struct StreamingOptions {
  std::string remote;                   // the store: a directory, file://..., http(s)://...
  std::string local;                    // the cache directory (created if missing)
  uint64_t max_bytes = 0;               // the cache's budget, for complete and downloading shards
                                        // (kFull: 0 keeps nothing, every shard streams through memory)
  StreamingMode mode = StreamingMode::kFull;
  EvictionOrder eviction = EvictionOrder::kOldest;
  // Each downloaded shard fsynced (with the directory) before it is used;
  // false: stamped and checked after an unclean stop instead (ShardCache).
  bool durable = false;
  std::vector<ShardInfo> shards;        // the shards; empty: read from `index` on the store
  std::string index = "index.txt";      // "name size [crc32c [samples]]" per line (stoker index)
  ShardFormat format = ShardFormat::kTFRecord;
  std::vector<FieldSpec> features;      // TFRecord: the features to decode
  std::vector<TarFieldDecl> tar_fields; // tar: empty: inferred from the first shard
  OnError on_error = OnError::kRaise;
  uint32_t fetchers = 0;                // download threads, each with its own connection (0: chosen:
                                        // from the store's Store::PreferredConnections (2, or 8 on AWS
                                        // S3) one more at a time while the readers wait for shards and
                                        // each adds 10% to the rate, up to 4x that: FetcherScaling)
  std::vector<int> fetcher_cpus;        // the CPUs the fetchers may run on (each one this process
                                        // may use); empty: chosen (a store whose server runs on this
                                        // machine: the last quarter of this process's CPUs, else
                                        // wherever the scheduler puts them; stats() says which)
  uint32_t prefetch = 4;                // kFull: shards fetched ahead of the readers, and at least one
                                        // per fetcher (through memory: as far as the buffers go)
  uint32_t stream_buffers = 0;          // kFull: memory buffers for shards the cache has no room for
                                        // (each as large as the largest shard); 0: 2 * shuffle_window +
                                        // fetchers within a quarter of the memory limit, at least
                                        // shuffle_window + 1; over half the limit is an error at Open
  uint32_t shuffle_window = 4;          // shards whose samples are shuffled together
  uint32_t min_shards = 1;              // kCached: an epoch waits for this many cached shards
  uint64_t fetch_seed = 0;              // kCached: the order the fetchers take the remote shards in
  double wait_timeout_s = 0;            // > 0: waiting longer than this for min_shards is an error
  StoreOptions store;
  // A store of the caller's instead of the one `remote` names (a C++
  // program's own object store client; the tests' fault-injecting store):
  // called once for the index and once per fetcher, each a connection of
  // its own.  `remote` still names the dataset in messages.
  std::function<Result<std::unique_ptr<Store>>()> open_store;
};

struct StreamingStats {
  uint64_t epoch = 0, epoch_shards = 0, epoch_samples = 0;
  // kCached: the remote shards the current epoch leaves out (not cached when
  // it began), and the sum over every epoch begun so far (kFull: 0).
  uint64_t epoch_shards_left_out = 0, shards_left_out = 0;
  uint64_t cached_shards = 0, cached_bytes = 0;  // this dataset's shards complete in the cache
  uint64_t used_bytes = 0, max_bytes = 0;        // the directory: complete, downloading, left by the dead
  uint64_t hits = 0, downloads = 0;              // shards served from the cache / downloaded (either way)
  uint64_t streamed = 0;                         // kFull: downloaded into memory (no room in the cache)
  uint64_t stream_buffer_bytes = 0;              // memory those buffers hold (made as the fetchers need them)
  uint64_t stream_buffers = 0;                   // kFull: how many the pool may keep (stream_buffers, or chosen)
  bool stream_huge_pages = false;                // kFull: they take huge pages (not where the host takes free memory back)
  uint64_t prefetches_dropped = 0;               // kFull: prefetched shards whose buffer went to one a reader waited for
  double hit_rate = 0;                           // hits / (hits + downloads)
  uint64_t bytes_downloaded = 0;
  double fetch_seconds = 0;                      // wall time with at least one download running
  double fetch_bytes_per_s = 0;                  // bytes_downloaded / fetch_seconds
  uint64_t shards_in_flight = 0, bytes_in_flight = 0;
  uint64_t evictions = 0;
  uint64_t verified_shards = 0, torn_shards = 0;  // checked after an unclean stop; of those torn (fetched again)
  uint32_t fetchers = 0;                         // download threads running (chosen, or as asked)
  bool fetchers_auto = false;                    // StreamingOptions::fetchers was 0: chosen as they help
  uint32_t fetchers_most = 0;                    // the most it may run (auto: 4x the store's preference)
  uint64_t fetchers_tried = 0;                   // auto: connections added to see whether they help
  bool fetchers_by_caller = false;               // auto, and SetFetchers took the choice over (a loader's
                                                 // autotuner): FetcherScaling no longer decides
  std::vector<int> fetcher_cpus;                 // the CPUs they are confined to (empty: not confined)
  std::string fetcher_placement;                 // why: "given" (fetcher_cpus), "beside the store's server"
                                                 // (a server on this machine: the last quarter of this
                                                 // process's CPUs, leaving it the rest), or "anywhere"
  uint64_t requests = 0, retries = 0;            // the fetchers' requests to the store, and of those retried
  uint64_t bytes_in_place = 0;                   // of the bytes streamed, those received in place (Store::bytes_in_place)
  uint64_t remote_shards = 0, remote_bytes = 0;
  uint64_t seen_shards = 0, seen_bytes = 0;      // shards that have been part of an epoch
  double fraction_seen = 0;                      // seen_bytes / remote_bytes
  uint64_t fetch_errors = 0;       // failed downloads (a cache with no room to make is not one)
  std::string last_fetch_error;    // the last failure, or why a fetcher waits for room in the cache
};

class StreamingDataset : public NativeDataset {
 public:
  // Reads the index, sweeps what dead processes left in the cache, starts
  // the fetchers; kCached waits for the first epoch's min_shards.
  static Result<std::shared_ptr<StreamingDataset>> Open(const StreamingOptions& options);
  // The dataset read in a process other than the one that opened it (a
  // worker process): the epoch of kFull (every shard of options.shards, in
  // their order, each with its sample count), each shard fetched when a
  // sample of it is read, through the cache directory the processes share
  // (its file locks: one process downloads a shard, the others wait for it
  // and read it; a shard being read is never evicted); the last 8 shards
  // read stay open.  No fetcher threads.  kCached (an epoch only the opening
  // process knows) and max_bytes 0 (no directory to share) are refused,
  // saying what to do instead.
  static Result<std::shared_ptr<NativeDataset>> OpenReader(const StreamingOptions& options);
  ~StreamingDataset() override;

  uint64_t size() const override;  // samples in the current epoch
  const std::vector<FieldSpec>& fields() const override;
  Status Read(uint64_t index, uint8_t* const* dst) override;
  Status SampleBytes(uint64_t index, uint64_t* bytes) override;
  std::string Describe() const override;
  Status BeginEpoch(uint64_t epoch) override;
  std::vector<int64_t> Order(const OrderRecipe& o) override;
  // The current epoch's global order (every rank's samples, before the
  // split; `o`'s rank and world size are not used), and the epoch read in
  // `mine`, this rank's order made elsewhere (an epoch resumed on another
  // topology): the shards are fetched and released as `mine` reads them, as
  // Order() plans them for its own.
  std::vector<int64_t> GlobalOrder(const OrderRecipe& o);
  std::vector<int64_t> OrderAs(std::vector<int64_t> mine);
  void Interrupt() override;
  // kCached: the current epoch's shard names, one per line (kFull: "").
  std::string EpochState() const override;
  Status RestoreEpoch(const std::string& state) override;

  // kCached: the next BeginEpoch takes exactly these shards (downloading
  // any not cached) instead of what is cached: how the ranks of a job agree
  // on rank 0's snapshot, and how a resumed run repeats its epoch.
  void UseShards(std::vector<std::string> names);
  // The current epoch's shards, in index order.
  std::vector<std::string> epoch_shards() const;
  const std::vector<ShardInfo>& remote_shards() const;
  StreamingMode mode() const;
  StreamingStats stats() const;
  // From now on the number of fetchers is the caller's to choose (a
  // DataLoader's autotuner weighs them with its workers and prefetch), not
  // FetcherScaling's: starts fetchers, or retires some (each once its
  // download is in), until `n` run.  n from 1 to stats().fetchers_most; a
  // dataset opened with a fixed number of fetchers refuses, as does a
  // closed one.
  Status SetFetchers(uint32_t n);
  // Stops the fetchers (the destructor does too); reads of cached shards go on.
  void Close();

  struct Impl;

 private:
  explicit StreamingDataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoker

#endif  // STOKER_STREAMING_H_
