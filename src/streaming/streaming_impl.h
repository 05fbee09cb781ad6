// StreamingDataset::Impl, shared by the files that implement it:
//   streaming_dataset.cc   the facade: Open, the NativeDataset methods, stats
//   streaming_epoch.cc     epochs (which shards, their pins, the order) and
//                          the readers' path (slots opened, read, released)
//   streaming_fetchers.cc  the download threads and what they fetch next
//   stream_buffer_pool.cc  full mode's memory for shards the cache has no
//                          room for
//   fetcher_scaling.cc     how many fetchers, when the number is left to it
// Locking: `mu` guards the slots' states, the job queues, the fresh pins and
// the buffer pool; a slot's open_mu serialises opening it.
#ifndef STOKER_STREAMING_STREAMING_IMPL_H_
#define STOKER_STREAMING_STREAMING_IMPL_H_

#include <sched.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "streaming/fetcher_scaling.h"
#include "cache/shard_cache.h"
#include "streaming/shard_epoch.h"
#include "streaming/stream_buffer_pool.h"
#include "core/atomic_shared_ptr.h"
#include "core/trace.h"
#include "io/file_reader.h"
#include "stoker/streaming.h"
#include "sync/futex.h"  // MonotonicNanos

namespace stoker {

struct StreamingDataset::Impl {
  using ShardSlot = stream::ShardSlot;
  using Epoch = stream::Epoch;

  StreamingOptions o;
  StreamingDataset* self = nullptr;
  std::unique_ptr<ShardCache> cache;
  std::vector<ShardInfo> shards;
  std::map<std::string, uint32_t> by_name;
  std::vector<FieldSpec> fields;
  std::vector<TarFieldDecl> tar_decls;
  uint32_t fetchers = 0;  // running (StreamingOptions::fetchers, or as FetcherScaling chose)
  std::function<Result<std::unique_ptr<Store>>()> open_store;  // a connection for each fetcher
  std::optional<cpu_set_t> fetcher_cpu_set;                   // where the fetchers are confined (none: anywhere)
  std::vector<int> fetcher_cpus;                              // the same as a list: given, or chosen at Open
  std::string fetcher_placement;                              // why there (StreamingStats::fetcher_placement)
  std::unique_ptr<FetcherScaling> scaling;  // fetchers = 0: the number is the dataset's to choose (under mu)
  uint32_t retire = 0;                      // fetchers to stop (FetcherScaling gave one back, or SetFetchers)
  bool by_caller = false;                   // SetFetchers took the choice over from `scaling`
  uint64_t reader_waits = 0;                // times a reader waited for a shard not there yet
  uint64_t max_shard = 0, remote_bytes = 0;
  pid_t owner = getpid();

  mutable std::mutex mu;
  std::condition_variable cv;  // any state change: a fetch done, a release, an epoch, a stop
  AtomicSharedPtr<Epoch> cur;
  std::vector<int64_t> known_count;  // per shard: samples, once known (-1: not yet)
  std::map<uint32_t, ShardCache::Pin> fresh;  // growing: fetched, pinned until an epoch takes them
  // Full mode with room for the whole dataset (KeepsShardsOpen): cached
  // shards an epoch is done with stay pinned and open (mapped, record index
  // read) for the next epoch's readers, as the native datasets keep their files.
  struct KeptShard {
    ShardCache::Pin pin;
    std::unique_ptr<NativeDataset> data;
  };
  std::map<uint32_t, KeptShard> kept_open;
  size_t max_kept_open = 0;  // each holds two descriptors and a mapping: bounded (Open)
  std::vector<bool> in_flight, failed_for_good, seen;
  std::vector<uint32_t> fetch_order;
  size_t fetch_cursor = 0;
  // Growing: the remote shards found complete in the cache when it was last
  // looked at (RefreshKnownCachedLocked), so that looking for the next shard
  // to fetch is not a stat of every cached shard.  A shard another process
  // evicts meanwhile waits for the next look; one not marked is looked at
  // before it is fetched.
  std::vector<bool> known_cached;
  double known_cached_next = 0;    // when to look again (MonotonicNanos() * 1e-9, seconds)
  bool known_cached_busy = false;  // a fetcher is looking
  std::vector<std::string> use_next;  // UseShards
  bool use_pending = false;
  bool stop = false;
  uint64_t interrupts = 0;
  uint64_t releases = 0;  // shards this process stopped using (ReleaseLocked)
  std::vector<std::thread> threads;

  StreamBufferPool buffers;  // full mode (under mu)

  // Stats (under mu).
  uint64_t fetch_errors = 0, consecutive_failures = 0, snapshot_hits = 0, streamed = 0, stream_bytes = 0;
  uint64_t shards_left_out = 0;  // kCached: remote shards left out of the epochs begun, summed
  uint64_t store_requests = 0, store_retries = 0;  // the fetchers' stores' counters, added after each job
  uint64_t store_bytes_in_place = 0;
  uint64_t prefetches_dropped = 0;  // full: prefetched shards whose buffer a reader's shard needed
  std::string last_error;
  int downloading = 0;
  uint64_t bytes_in_flight = 0;
  double busy_since = 0, busy_s = 0;
  double download_s = 0;  // the downloads' seconds added up (FetcherScaling)

  std::string Describe() const;
  void Shutdown();
  // The trace's "streaming" counters (core/trace.h), sampled at 20 Hz while
  // a trace runs: cache hits, downloads, bytes fetched, shards in flight.
  int trace_source = 0;
  void SampleTraceCounters();
  // Under mu: shards served from the cache, shards downloaded (into it or
  // streamed), bytes downloaded (stats() and the trace's counters).
  uint64_t HitsLocked() const { return cache->hits() + snapshot_hits; }
  uint64_t DownloadsLocked() const { return cache->downloads() + streamed; }
  uint64_t BytesDownloadedLocked() const { return cache->bytes_downloaded() + stream_bytes; }
  ~Impl() { Shutdown(); }

  // ---- shards and readers (streaming_epoch.cc) ----
  // `verified`: the file was just downloaded and matched the index's CRC-32C,
  // so its records' own CRCs need no second check.
  // `memory`: a stream buffer (its record index is not kept on disk).
  Result<std::unique_ptr<NativeDataset>> OpenShard(uint32_t shard, FileReader file, bool verified, bool memory);
  // Opens a pinned slot (once); the readers' fast path starts here.
  Status EnsureOpen(ShardSlot& s);
  // Shards are kept open between epochs only where nothing of this dataset
  // ever evicts them: every shard fits the cache.  (Opening every shard
  // again each epoch, mapping and faulting in its pages, unmapping them,
  // cost up to half of a cached epoch: docs/streaming.md.)
  bool KeepsShardsOpen() const { return o.mode == StreamingMode::kFull && o.max_bytes >= remote_bytes; }
  // Under mu: closes and unpins a slot the epoch is done with (or keeps its
  // shard open for the next epoch).
  void ReleaseLocked(ShardSlot& s);
  // Under mu: gives `s` its shard if an earlier epoch kept it open.
  bool TakeKeptOpenLocked(ShardSlot& s);
  // The slot of `index` ready to read (opened), waiting for its download.
  Result<ShardSlot*> Ready(const std::shared_ptr<Epoch>& ep, uint64_t index);
  void DoneReading(ShardSlot& s);
  // A slot pinned (downloaded first if need be) and opened, outside the
  // readers' path (Open learning a tar dataset's fields).
  Status OpenNow(ShardSlot& s);

  // ---- epochs (streaming_epoch.cc) ----
  Status CheckDescriptorsFor(size_t to_pin, size_t epoch_shards) const;
  static bool TakePin(ShardSlot& old, ShardSlot& into);
  // This dataset's shards complete in the cache (a stat each), at one moment
  // (ShardCache::CachedAmong: under the directory lock, shared).
  std::vector<uint32_t> CachedShards() const { return cache->CachedAmong(shards); }
  Status BeginEpoch(uint64_t number);
  // This rank's part of the epoch's order; the first call also fixes the
  // order the epoch's shards are fetched and released in.
  std::vector<int64_t> Order(const OrderRecipe& so);
  std::vector<int64_t> GlobalOrder(const OrderRecipe& so);
  // Plans the epoch's fetches and releases from this rank's order (once).
  std::vector<int64_t> Plan(std::vector<int64_t> mine);

  // ---- fetchers (streaming_fetchers.cc) ----
  struct Job {
    std::shared_ptr<Epoch> ep;  // null: a growing background fetch
    ShardSlot* slot = nullptr;
    uint32_t shard = 0;
    bool speculative = false;
    int64_t place = -1;  // the slot's place in the epoch's reading order (-1: no slot)
  };
  // Under mu: the next download, or false to wait.
  bool NextJob(Job* job);
  bool FirstWindowInLocked(Epoch& ep, uint32_t places) const;
  void RefreshKnownCachedLocked(std::unique_lock<std::mutex>& l);
  void FetcherMain(std::unique_ptr<Store> store);
  // A fetcher thread on `store` (confined to fetcher_cpus); under mu, or
  // before the dataset is shared.
  Status StartFetcher(std::unique_ptr<Store> store);
  // Under mu (released meanwhile): after a download, FetcherScaling's
  // verdict carried out (a fetcher more, or one to retire).
  void ScaleFetchersLocked(std::unique_lock<std::mutex>& l);
  // Under mu (released meanwhile): one fetcher more, on a connection opened
  // outside mu (the readers take it); Closed if the dataset closed meanwhile.
  Status AddFetcherLocked(std::unique_lock<std::mutex>& l);
  // Under mu: a stream buffer for `ep`'s shard at `place` in its order, or
  // null (counted in stats).
  StreamBuffer* AcquireBufferLocked(const std::shared_ptr<Epoch>& ep, int64_t place, bool speculative);
  StreamBuffer* TakeBackBufferLocked(const Epoch* of, int64_t place);
  Status ReadIntoBuffer(Store& store, const ShardInfo& info, StreamBuffer* buf);
};

}  // namespace stoker

#endif  // STOKER_STREAMING_STREAMING_IMPL_H_
