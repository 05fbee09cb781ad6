// StreamingDataset (include/stoker/streaming.h): ShardCache + fetcher
// threads + one Epoch object per epoch (its shards, where each one's samples
// sit in the epoch's index space, and each shard's state).
//
// A shard of an epoch (a Slot) goes
//   kWaiting -> kFetching -> kPinned -> kOpen -> kReleased
// (kGrowing epochs start at kPinned: their shards are cached), or to kFailed
// with the fetch's error.  kOpen is the readers' fast path (no lock).  A
// slot is released (closed, unpinned, evictable) once every read the
// epoch's order has for it is done; a read of a released slot fetches it
// again.  Locking: mu_ guards the states, the job queues and the fresh pins;
// a slot's open_mu serialises opening it.
#include "stoker/streaming.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <climits>
#include <condition_variable>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "cache/shard_cache.h"
#include "core/cpu_affinity.h"
#include "core/mix.h"
#include "core/time_slice.h"
#include "core/unique_fd.h"
#include "io/crc32c.h"
#include "io/file_reader.h"
#include "io/tar_shard_dataset.h"
#include "io/tfrecord_dataset.h"
#include "proc/proc_memory.h"

namespace stoker {

namespace {

enum SlotState : int { kWaiting, kFetching, kPinned, kOpen, kReleased, kFailed };

// The longest a fetcher waits before it looks again for room in a cache full
// of shards in use (another process sharing the directory may have released
// some; this process's own releases wake it at once).
constexpr double kFullWaitMaxS = 5.0;

// kFull: a shard the cache has no room for lives in one of these from its
// download until the readers are done with it.  Anonymous memory in huge
// pages where the kernel has them, reused from shard to shard: no page is
// allocated, mapped or freed per shard, and the readers read it in place.
struct Epoch;
struct StreamBuffer {
  uint8_t* map = nullptr;
  uint64_t capacity = 0;
  uint64_t size = 0;  // of the shard in it
  bool busy = false;
  // The epoch whose shard it holds.  An epoch left before its end (a loop
  // that breaks, an error) never releases the shards it had: once no reader
  // and no fetcher holds that epoch, its buffers are free again.
  std::weak_ptr<Epoch> owner;
  bool Free() const { return !busy || owner.expired(); }
  ~StreamBuffer() {
    if (map) munmap(map, capacity);
  }
};

struct Slot {
  uint32_t shard = 0;  // in the remote list
  uint64_t first = 0, count = 0;
  std::atomic<int> state{kWaiting};
  std::atomic<int64_t> remaining{INT64_MAX};  // reads left in the epoch's order
  bool demanded = false;
  bool touched = false;  // a reader has come for it (under mu; kFull: its buffer is not taken back)
  ShardCache::Pin pin;
  StreamBuffer* mem = nullptr;  // instead of a pin: the shard is in memory
  std::unique_ptr<NativeDataset> data;
  std::mutex open_mu;
  Status error;
};

struct Epoch {
  uint64_t number = 0;
  std::vector<std::unique_ptr<Slot>> slots;  // by position (index order of their shards)
  std::vector<uint64_t> firsts{0};           // prefix sums of counts
  std::vector<uint32_t> seq;                 // positions in the order this rank reads them
  std::vector<uint32_t> seq_of;              // position -> place in seq
  std::atomic<int64_t> frontier{-1};         // the furthest place in seq read so far (kFull: 0 once ordered)
  std::atomic<bool> reads_started{false};
  bool ordered = false;
  bool first_window_in = false;              // (FirstWindowInLocked, under mu)
  uint64_t samples() const { return firsts.back(); }
  uint32_t PositionOf(uint64_t index) const {
    return static_cast<uint32_t>(std::upper_bound(firsts.begin(), firsts.end(), index) - firsts.begin()) - 1;
  }
};

bool SameFields(const std::vector<FieldSpec>& a, const std::vector<FieldSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].dtype != b[i].dtype || a[i].shape != b[i].shape || a[i].variable != b[i].variable)
      return false;
  return true;
}

std::string FieldsString(const std::vector<FieldSpec>& f) {
  std::string s;
  for (const FieldSpec& x : f)
    s += (s.empty() ? "" : ", ") + x.name + ": " + DTypeNameOf(x.dtype) + (x.variable ? " (variable)" : ShapeString(x.shape));
  return "{" + s + "}";
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

struct StreamingDataset::Impl {
  StreamingOptions o;
  StreamingDataset* self = nullptr;
  std::unique_ptr<ShardCache> cache;
  std::vector<ShardInfo> shards;
  std::map<std::string, uint32_t> by_name;
  std::vector<FieldSpec> fields;
  std::vector<TarFieldDecl> tar_decls;
  uint64_t max_shard = 0, remote_bytes = 0;
  pid_t owner = getpid();

  mutable std::mutex mu;
  std::condition_variable cv;  // any state change: a fetch done, a release, an epoch, a stop
  std::atomic<std::shared_ptr<Epoch>> cur;
  std::vector<int64_t> known_count;  // per shard: samples, once known (-1: not yet)
  std::map<uint32_t, ShardCache::Pin> fresh;  // kGrowing: fetched, pinned until an epoch takes them
  // kFull with room for the whole dataset (KeepsShardsOpen): cached shards
  // an epoch is done with stay pinned and open (mapped, record index read)
  // for the next epoch's readers, as the native datasets keep their files.
  struct KeptShard {
    ShardCache::Pin pin;
    std::unique_ptr<NativeDataset> data;
  };
  std::map<uint32_t, KeptShard> kept_open;
  size_t max_kept_open = 0;  // each holds two descriptors and a mapping: bounded (Open)
  size_t buffer_count = 0;   // kFull: stream buffers at most (SizeBuffers)
  std::vector<bool> in_flight, failed_for_good, seen;
  std::vector<uint32_t> fetch_order;
  size_t fetch_cursor = 0;
  // kGrowing: the remote shards found complete in the cache when it was last
  // looked at (RefreshKnownCachedLocked), so that looking for the next shard
  // to fetch is not a stat of every cached shard.  A shard another process
  // evicts meanwhile waits for the next look; one not marked is looked at
  // before it is fetched.
  std::vector<bool> known_cached;
  double known_cached_next = 0;  // when to look again (Now())
  bool known_cached_busy = false;  // a fetcher is looking
  std::vector<std::string> use_next;  // UseShards
  bool use_pending = false;
  bool stop = false;
  uint64_t interrupts = 0;
  uint64_t releases = 0;  // shards this process stopped using (ReleaseLocked)
  std::vector<std::thread> threads;

  std::vector<std::unique_ptr<StreamBuffer>> buffers;  // kFull (under mu)

  // Stats (under mu).
  uint64_t fetch_errors = 0, consecutive_failures = 0, snapshot_hits = 0, streamed = 0, stream_bytes = 0;
  uint64_t prefetches_dropped = 0;  // kFull: prefetched shards whose buffer a reader's shard needed
  std::string last_error;
  int downloading = 0;
  uint64_t bytes_in_flight = 0;
  double busy_since = 0, busy_s = 0;

  std::string Describe() const {
    return std::string(o.mode == StreamingMode::kFull ? "streaming (full)" : "streaming (growing)") + " dataset " +
           o.remote + " cached in " + o.local;
  }

  // ---- shards -------------------------------------------------------------

  // `verified`: the file was just downloaded and matched the index's CRC-32C,
  // so its records' own CRCs need no second check.
  // `memory`: a stream buffer (its record index is not kept on disk).
  Result<std::unique_ptr<NativeDataset>> OpenShard(uint32_t shard, FileReader file, bool verified, bool memory) {
    std::unique_ptr<NativeDataset> d;
    std::vector<FileReader> files;
    files.push_back(std::move(file));
    if (o.format == ShardFormat::kTFRecord) {
      TFRecordOptions to;
      to.index_dir = cache->index_dir();  // (swept by the cache as it evicts)
      to.index_cache = !memory;
      to.on_error = o.on_error;
      to.verify_crc = !verified;
      STOKER_ASSIGN_OR_RETURN(auto t, TFRecordDataset::OpenFiles(std::move(files), o.features, to));
      d = std::move(t);
    } else {
      TarShardOptions to;
      to.on_error = o.on_error;
      STOKER_ASSIGN_OR_RETURN(auto t, TarShardDataset::OpenFiles(std::move(files), tar_decls, to));
      std::lock_guard<std::mutex> g(mu);
      if (tar_decls.empty()) {  // the first shard opened says what the fields are
        tar_decls = t->decls();
        fields = t->fields();
      }
      d = std::move(t);
    }
    if (!SameFields(d->fields(), fields))
      return Status::DataLoss("shard " + shards[shard].name + " has fields " + FieldsString(d->fields()) +
                              ", the dataset's are " + FieldsString(fields));
    for (uint64_t i = 0; i < d->skipped(); ++i) self->CountSkipped(Status::DataLoss(d->last_skipped()));
    const uint64_t n = d->size(), want = shards[shard].samples;
    if (shards[shard].has_samples && n != want && o.on_error == OnError::kRaise)
      return Status::DataLoss("shard " + shards[shard].name + " has " + std::to_string(n) + " samples, the index says " +
                              std::to_string(want) + " (the index is stale: write it again with `stoker index`)");
    std::lock_guard<std::mutex> g(mu);
    known_count[shard] = static_cast<int64_t>(n);
    return d;
  }

  // Opens a pinned slot (once); the readers' fast path starts here.
  Status EnsureOpen(Slot& s) {
    std::lock_guard<std::mutex> g(s.open_mu);
    if (s.state.load() == kOpen) return Status::OK();
    Result<std::unique_ptr<NativeDataset>> d = Status::OK();
    if (s.mem) {
      d = OpenShard(s.shard, FileReader::OverMemory(o.remote + "/" + shards[s.shard].name + " (streamed into memory)",
                                                     s.mem->map, s.mem->size),
                    shards[s.shard].has_crc, true);
    } else {
      // Mapped (TFRecord) or read with pread (tar), as the native datasets do.
      const IoMode io = o.format == ShardFormat::kTFRecord ? TFRecordOptions{}.io : TarShardOptions{}.io;
      Status pinned;
      if (!s.pin.valid()) {  // a later epoch took its pin (TakePin): pinned again for this read
        Result<ShardCache::Pin> p = cache->PinCached(shards[s.shard]);
        if (p.ok()) s.pin = std::move(p).value();
        else pinned = p.status();
      }
      Result<FileReader> f = pinned.ok() ? FileReader::Open(s.pin.path(), {io, true}) : Result<FileReader>(pinned);
      d = f.ok() ? OpenShard(s.shard, std::move(f).value(), s.pin.downloaded() && shards[s.shard].has_crc, false)
                 : Result<std::unique_ptr<NativeDataset>>(f.status());
    }
    if (!d.ok()) {
      std::lock_guard<std::mutex> l(mu);
      s.error = d.status();
      s.state = kFailed;
      cv.notify_all();
      return s.error;
    }
    s.data = std::move(d).value();
    s.state = kOpen;
    return Status::OK();
  }

  // Shards are kept open between epochs only where nothing of this dataset
  // ever evicts them: every shard fits the cache.  (Opening every shard
  // again each epoch, mapping and faulting in its pages, unmapping them,
  // cost 14-60 ms per GB, up to half of a cached epoch: docs/streaming.md.)
  bool KeepsShardsOpen() const { return o.mode == StreamingMode::kFull && o.max_bytes >= remote_bytes; }

  // Under mu: closes and unpins a slot the epoch is done with (or keeps its
  // shard open for the next epoch).
  void ReleaseLocked(Slot& s) {
    const int st = s.state.load();
    if (st != kOpen && st != kPinned) return;
    ShardCache::MarkUsed(s.pin);
    if (st == kOpen && !s.mem && s.pin.valid() && s.data && KeepsShardsOpen() &&
        kept_open.size() < max_kept_open)
      kept_open[s.shard] = KeptShard{std::move(s.pin), std::move(s.data)};
    s.data.reset();
    s.pin = ShardCache::Pin();
    if (s.mem) {
      ReturnBufferLocked(s.mem);
      s.mem = nullptr;
    }
    s.state = kReleased;
    ++releases;  // (a shard the cache may evict now: fetchers waiting for room look again)
    cv.notify_all();
  }

  // Under mu: gives `s` its shard if an earlier epoch kept it open.
  bool TakeKeptOpenLocked(Slot& s) {
    auto k = kept_open.find(s.shard);
    if (k == kept_open.end()) return false;
    s.pin = std::move(k->second.pin);
    s.data = std::move(k->second.data);
    kept_open.erase(k);
    ++snapshot_hits;
    s.state = kOpen;
    return true;
  }

  // ---- readers --------------------------------------------------------------

  // The slot of `index` ready to read (opened), waiting for its download.
  Result<Slot*> Ready(const std::shared_ptr<Epoch>& ep, uint64_t index) {
    if (getpid() != owner)
      return Status::InvalidArgument(Describe() + " is read in the process that opened it (by stoker's reader "
                                     "threads): this is a forked child; use stoker.DataLoader without a Python "
                                     "collate_fn or transform, or num_workers=0");
    if (index >= ep->samples())
      return Status::InvalidArgument("index " + std::to_string(index) + " is out of range for " + Describe() +
                                     " (epoch " + std::to_string(ep->number) + " has " +
                                     std::to_string(ep->samples()) + " samples)");
    const uint32_t pos = ep->PositionOf(index);
    Slot& s = *ep->slots[pos];
    ep->reads_started = true;
    if (!ep->seq_of.empty() && ep->seq_of[pos] != UINT32_MAX) {
      const int64_t place = ep->seq_of[pos];
      int64_t f = ep->frontier.load();
      while (place > f && !ep->frontier.compare_exchange_weak(f, place)) {
      }
      if (place > f && o.mode == StreamingMode::kFull) cv.notify_all();  // the prefetch window moved
    }
    if (s.state.load(std::memory_order_acquire) == kOpen) return &s;
    std::unique_lock<std::mutex> l(mu);
    const uint64_t gen = interrupts;
    for (;;) {
      const int st = s.state.load();
      if (st == kOpen) return &s;
      if (st == kFailed) return s.error;
      if (st == kPinned) {
        s.touched = true;  // (its buffer is the readers' now: TakeBackBufferLocked)
        l.unlock();
        STOKER_RETURN_IF_ERROR(EnsureOpen(s));
        return &s;
      }
      if (st == kReleased) {  // read again after its release: fetch it again
        if (TakeKeptOpenLocked(s)) return &s;
        s.state = kWaiting;
      }
      if (!s.demanded) {  // a reader waits for it: fetched before anything speculative
        s.demanded = true;
        cv.notify_all();
      }
      if (stop) return Status::Cancelled(Describe() + " is closed");
      if (interrupts != gen) return Status::Cancelled("the loader stopped while waiting for shard " + shards[s.shard].name);
      cv.wait(l);
    }
  }

  void DoneReading(Slot& s) {
    if (s.remaining.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> g(mu);
      ReleaseLocked(s);
    }
  }

  // A slot pinned (downloaded first if need be) and opened, outside the
  // readers' path (Open learning a tar dataset's fields).
  Status OpenNow(Slot& s) {
    std::unique_lock<std::mutex> l(mu);
    while (s.state.load() < kPinned) {
      if (stop) return Status::Cancelled(Describe() + " is closed");
      s.demanded = true;
      cv.notify_all();
      cv.wait_for(l, std::chrono::milliseconds(50));
    }
    if (s.state.load() == kFailed) return s.error;
    l.unlock();
    return EnsureOpen(s);
  }

  void Shutdown() {
    {
      std::lock_guard<std::mutex> g(mu);
      stop = true;
      kept_open.clear();
      cv.notify_all();
    }
    if (getpid() != owner) {
      // A forked child has none of these threads: leave them be.
      new std::vector<std::thread>(std::move(threads));
      return;
    }
    for (std::thread& t : threads) t.join();
    threads.clear();
  }
  ~Impl() { Shutdown(); }

  // ---- fetchers -------------------------------------------------------------

  struct Job {
    std::shared_ptr<Epoch> ep;  // null: a kGrowing background fetch
    Slot* slot = nullptr;
    uint32_t shard = 0;
    bool speculative = false;
  };

  // Under mu: the next download, or false to wait.
  bool NextJob(Job* job) {
    std::shared_ptr<Epoch> ep = cur.load();
    if (ep) {
      // Shards a reader (or BeginEpoch) waits for, earliest in the order first.
      Slot* best = nullptr;
      uint32_t best_place = UINT32_MAX;
      for (size_t p = 0; p < ep->slots.size(); ++p) {
        Slot& s = *ep->slots[p];
        if (!s.demanded || s.state.load() != kWaiting) continue;
        const uint32_t place = ep->seq_of.empty() ? static_cast<uint32_t>(p) : ep->seq_of[p];
        if (!best || place < best_place) best = &s, best_place = place;
      }
      if (best) {
        *job = Job{ep, best, best->shard, false};
        return true;
      }
      // kFull: the next shards in the order, `prefetch` ahead of the readers.
      if (o.mode == StreamingMode::kFull && ep->frontier.load() >= 0) {
        const int64_t f = ep->frontier.load();
        const uint32_t places = ep->seq.empty() ? static_cast<uint32_t>(ep->slots.size()) : static_cast<uint32_t>(ep->seq.size());
        int64_t last = f + static_cast<int64_t>(o.prefetch);
        if (!FirstWindowInLocked(*ep, places))
          last = std::min<int64_t>(last, static_cast<int64_t>(o.shuffle_window) - 1);
        for (int64_t k = f; k <= last && k < places; ++k) {
          Slot& s = *ep->slots[ep->seq.empty() ? k : ep->seq[k]];
          if (s.state.load() == kWaiting) {
            *job = Job{ep, &s, s.shard, true};
            return true;
          }
        }
      }
    }
    if (o.mode != StreamingMode::kGrowing) return false;
    // kGrowing: the next remote shard not cached yet, in fetch order.
    for (size_t tried = 0; tried < fetch_order.size(); ++tried) {
      const uint32_t sh = fetch_order[fetch_cursor];
      fetch_cursor = (fetch_cursor + 1) % fetch_order.size();
      if (in_flight[sh] || failed_for_good[sh] || fresh.count(sh) || known_cached[sh]) continue;
      if (cache->IsCached(shards[sh])) {
        known_cached[sh] = true;
        continue;
      }
      *job = Job{nullptr, nullptr, sh, true};
      return true;
    }
    return false;
  }

  // Under mu: whether the shards of the epoch's first window (in reading
  // order) are all fetched.  Until then the fetchers take no shard past it:
  // the first batch needs every shard of that window, and a shard read
  // later would take bandwidth from them (with 3 fetchers and a window of
  // 2, the window came in after 3 shards' time instead of 2).
  bool FirstWindowInLocked(Epoch& ep, uint32_t places) const {
    if (ep.first_window_in) return true;
    for (uint32_t k = 0; k < std::min<uint32_t>(places, o.shuffle_window); ++k)
      if (ep.slots[ep.seq.empty() ? k : ep.seq[k]]->state.load() < kPinned) return false;
    return ep.first_window_in = true;
  }

  // kGrowing, under mu (released meanwhile): which remote shards the cache
  // has complete, a stat each.  NextJob used to stat every cached shard on
  // its way to one that is not, on every wake-up, and the fetchers wake for
  // each shard a reader is done with: with every shard cached, an epoch of
  // N shards cost N * N stats under mu (10,000 tiny shards: 289 s for an
  // epoch).  Now a look every second, or less often where a look takes
  // longer than a tenth of that.
  void RefreshKnownCachedLocked(std::unique_lock<std::mutex>& l) {
    known_cached_busy = true;
    l.unlock();
    const double t0 = Now();
    std::vector<bool> now(shards.size());
    for (size_t i = 0; i < shards.size(); ++i) now[i] = cache->IsCached(shards[i]);
    const double took = Now() - t0;
    l.lock();
    known_cached.swap(now);
    known_cached_next = Now() + std::max(1.0, 10 * took);
    known_cached_busy = false;
  }

  void FetcherMain(std::unique_ptr<Store> store) {
    // Woken for each piece that arrives, a little work each time: short
    // slices, so as not to wait behind the readers (core/time_slice.h).
    RequestTimeSlice(kFetcherTimeSliceNs);
    std::unique_lock<std::mutex> l(mu);
    double backoff = 0, full_wait = 0;
    while (!stop) {
      if (o.mode == StreamingMode::kGrowing && !known_cached_busy && Now() >= known_cached_next) {
        RefreshKnownCachedLocked(l);
        continue;
      }
      Job job;
      if (!NextJob(&job)) {
        // Nothing to do now; look again after a change, or in a while (the
        // other processes sharing the directory evict and download too).
        cv.wait_for(l, std::chrono::seconds(1));
        continue;
      }
      const ShardInfo& info = shards[job.shard];
      const bool cached = cache->IsCached(info);
      if (job.slot) job.slot->state = kFetching;
      in_flight[job.shard] = true;
      // kFull with no room left in the cache: into a memory buffer instead
      // of evicting shards a later epoch would read.  Whether there is room
      // is a scan of the cache directory (a stat per file: milliseconds for
      // thousands of shards), done without mu, which the readers take to
      // release a shard they are done with; the job is claimed meanwhile.
      StreamBuffer* buf = nullptr;
      if (o.mode == StreamingMode::kFull && job.slot && !cached) {
        l.unlock();
        const bool room = cache->HasRoomFor(info);  // (max_bytes and the disk)
        l.lock();
        if (!room && !(buf = AcquireBufferLocked(job.ep, job.speculative))) {
          in_flight[job.shard] = false;
          job.slot->state = kWaiting;  // unclaimed (its readers wait on either state alike)
          cv.wait_for(l, std::chrono::milliseconds(200));  // the readers hold them all: wait for a release
          continue;
        }
      }
      if (!cached && ++downloading == 1) busy_since = Now();
      if (!cached) bytes_in_flight += info.size;
      l.unlock();
      Result<ShardCache::Pin> pin = Status::OK();
      Status streamed_st;
      if (buf) {
        streamed_st = ReadIntoBuffer(*store, info, buf);
      } else {
        // (kFull never evicts: what the cache has no room for streams.)
        pin = cache->Fetch(*store, info, /*may_evict=*/o.mode != StreamingMode::kFull);
      }
      l.lock();
      if (buf) {
        if (streamed_st.ok()) {
          ++streamed;
          pin = ShardCache::Pin();  // (none: the slot holds the buffer)
        } else {
          ReturnBufferLocked(buf);
          pin = streamed_st;
        }
      }
      in_flight[job.shard] = false;
      if (!cached) {
        bytes_in_flight -= info.size;
        if (--downloading == 0) busy_s += Now() - busy_since;
      }
      if (pin.ok()) {
        consecutive_failures = 0;
        backoff = full_wait = 0;
        if (job.slot) {
          seen[job.shard] = true;
          job.slot->pin = std::move(pin).value();
          job.slot->mem = buf;
          job.slot->state = kPinned;
        } else {
          fresh.emplace(job.shard, std::move(pin).value());
        }
        cv.notify_all();
        continue;
      }
      const Status& err = pin.status();
      if (job.slot) {
        job.slot->state = kWaiting;
        cv.notify_all();  // its readers see it waiting again (and ask for it)
      }
      if (err.code() == Status::Code::kResourceExhausted && o.mode == StreamingMode::kFull && job.slot && !buf)
        continue;  // the room went to another download meanwhile (or the disk filled): through memory, at once
      if (err.code() == Status::Code::kResourceExhausted) {
        // Full of shards in use, or a disk full of other files; stats() says
        // why.  Each look is a scan of the directory (a stat, and for each
        // shard a lock attempt: a large cache at an epoch's start, every
        // shard in use, took a core polling every 200 ms), so: at once after
        // a release here, and for another process's release or freed disk
        // space after a wait that doubles from 0.2 s to kFullWaitMaxS.
        last_error = err.message();
        full_wait = std::min(kFullWaitMaxS, full_wait ? 2 * full_wait : 0.2);
        const uint64_t seen_releases = releases;
        cv.wait_for(l, std::chrono::duration<double>(full_wait), [&] { return stop || releases != seen_releases; });
        continue;
      }
      ++fetch_errors;
      ++consecutive_failures;
      last_error = err.message();
      const bool transient = err.code() == Status::Code::kIOError;
      if (job.slot) {
        job.slot->error = err;
        job.slot->state = kFailed;  // its readers get the error
      } else if (!transient) {
        failed_for_good[job.shard] = true;  // corrupt or missing on the store: left out from now on
      }
      cv.notify_all();
      if (transient) {
        // The store already retried; wait before the next shard.
        backoff = std::min(5.0, backoff ? 2 * backoff : o.store.backoff_s);
        cv.wait_for(l, std::chrono::duration<double>(backoff), [&] { return stop; });
      }
    }
  }

  size_t BufferCount() const { return buffer_count; }

  // Bytes of one stream buffer: whole huge pages for shards of one or more,
  // whole pages below that.
  uint64_t BufferCapacity() const {
    const uint64_t unit = max_shard >= (2 << 20) ? (2 << 20) : 4096;
    return std::max<uint64_t>(unit, (max_shard + unit - 1) / unit * unit);
  }

  // How many stream buffers (Open).  Default: the window being read, as
  // many again kept for the readers' next shards (AcquireBufferLocked), and
  // per fetcher one buffer in flight and one ready, so that fetchers
  // finishing at different times do not wait for each other's readers; but
  // no more than a quarter of the memory this process may use (large
  // shards), and never fewer than a window and one more.  Whatever the
  // count, more than half of that memory is an error here, not the OOM
  // killer in the middle of an epoch (`needed`: some shards are sure to
  // stream; otherwise the buffers are only for a disk with less room than
  // max_bytes, and made when first wanted).
  Status SizeBuffers(bool needed) {
    const uint64_t each = BufferCapacity();
    const Result<uint64_t> limit = MemoryLimitBytes();
    const size_t least = size_t{o.shuffle_window} + 1;
    buffer_count = o.stream_buffers ? o.stream_buffers : 2 * size_t{o.shuffle_window} + 2 * size_t{o.fetchers};
    if (!o.stream_buffers && limit.ok())
      buffer_count = std::max(least, std::min<size_t>(buffer_count, limit.value() / 4 / each));
    if (needed && limit.ok() && buffer_count * each > limit.value() / 2)
      return Status::ResourceExhausted(
          Describe() + " streams the shards its cache has no room for through memory: " +
          std::to_string(buffer_count) + " buffers (stream_buffers" + (o.stream_buffers ? "" : ", at least shuffle_window + 1") +
          ") of " + std::to_string(each) + " bytes (the largest shard) would take " +
          std::to_string(buffer_count * each) + " bytes, more than half of the " + std::to_string(limit.value()) +
          " bytes this process may use (MemTotal or its cgroup's limit); lower " +
          (o.stream_buffers ? "stream_buffers or " : "") + "shuffle_window, give the cache room on disk (max_bytes), "
          "or use smaller shards");
    return Status::OK();
  }

  // Under mu (or before the fetchers start): one more stream buffer, its
  // pages allocated now (an error here, not a fault in the middle of an epoch).
  Status AddBufferLocked() {
    auto b = std::make_unique<StreamBuffer>();
    const uint64_t capacity = BufferCapacity();
    const std::string what = Describe() + ": a stream buffer of " + std::to_string(capacity) + " bytes (" +
                             std::to_string(BufferCount()) + " of them: stream_buffers; lower it or shuffle_window)";
    void* p = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Status::ResourceExhausted("no memory for " + what);
    b->map = static_cast<uint8_t*>(p);
    b->capacity = capacity;
    if (capacity >= (2 << 20)) madvise(p, capacity, MADV_HUGEPAGE);  // (advice: fine where the kernel has none)
    if (madvise(p, capacity, MADV_POPULATE_WRITE) != 0 && errno != EINVAL)  // EINVAL: a kernel before 5.14
      return Status::ResourceExhausted("no memory for " + what + ": " + std::strerror(errno));
    buffers.push_back(std::move(b));
    return Status::OK();
  }

  // Under mu: a free stream buffer, or null.  A speculative fetch leaves a
  // shuffle window of them for the shards the readers ask for.  A shard a
  // reader waits for always gets one: a buffer prefetched for a shard no
  // reader has come to yet is taken back (the shard furthest ahead in the
  // order), and where the readers hold every buffer, one more is made,
  // unmapped again when it comes back.  Readers that each work through a
  // different part of the order (batches of many small shards: a batch of
  // 100 samples of 2-sample shards spans 12 windows of 4) can need more shards
  // at once than there are buffers; waiting for a release then waited
  // forever, the fetchers' prefetches holding the buffers the readers'
  // shards needed.
  StreamBuffer* AcquireBufferLocked(const std::shared_ptr<Epoch>& ep, bool speculative) {
    const size_t cap = BufferCount();
    size_t free = cap - std::min(cap, buffers.size());
    for (const auto& b : buffers) free += b->Free();
    if (speculative && free <= o.shuffle_window) return nullptr;
    StreamBuffer* got = nullptr;
    if (free > 0) {
      for (auto& b : buffers)
        if (b->Free()) {
          got = b.get();
          break;
        }
    } else {
      got = TakeBackBufferLocked();
    }
    if (!got) {
      Status st = AddBufferLocked();
      if (!st.ok()) {  // seen in stats(); the fetcher waits for a buffer to come free
        ++fetch_errors;
        last_error = st.message();
        return nullptr;
      }
      got = buffers.back().get();
    }
    got->busy = true;
    got->owner = ep;
    return got;
  }

  // Under mu: the buffer of the current epoch's prefetched shard that the
  // order reads last, of those no reader has come for; that shard waits to
  // be fetched again.  Null if there is none.
  StreamBuffer* TakeBackBufferLocked() {
    std::shared_ptr<Epoch> ep = cur.load();
    if (!ep) return nullptr;
    Slot* best = nullptr;
    uint32_t best_place = 0;
    for (size_t p = 0; p < ep->slots.size(); ++p) {
      Slot& s = *ep->slots[p];
      if (!s.mem || s.touched || s.demanded || s.state.load() != kPinned) continue;
      const uint32_t place = ep->seq_of.empty() ? static_cast<uint32_t>(p) : ep->seq_of[p];
      if (!best || place > best_place) best = &s, best_place = place;
    }
    if (!best) return nullptr;
    StreamBuffer* b = best->mem;
    best->mem = nullptr;
    best->state = kWaiting;
    ++prefetches_dropped;
    return b;
  }

  // Under mu: a buffer back to the pool; one made past the count is unmapped.
  void ReturnBufferLocked(StreamBuffer* b) {
    b->busy = false;
    b->owner.reset();
    if (buffers.size() <= BufferCount()) return;
    auto it = std::find_if(buffers.begin(), buffers.end(), [&](const auto& x) { return x.get() == b; });
    if (it != buffers.end()) buffers.erase(it);
  }

  // Downloads `info` into `buf` (range reads, the store's retries) and
  // checks it against the index's CRC-32C.
  Status ReadIntoBuffer(Store& store, const ShardInfo& info, StreamBuffer* buf) {
    buf->size = info.size;  // its readers see exactly the shard
    const uint64_t before = store.bytes_received();
    uint32_t crc = 0;  // (0 for an empty shard) computed as the bytes arrive
    Status st = info.size ? store.Read(info.name, 0, info.size, buf->map, info.has_crc ? &crc : nullptr) : Status::OK();
    {
      std::lock_guard<std::mutex> g(mu);
      stream_bytes += store.bytes_received() - before;
    }
    if (!st.ok()) return Status::FromCode(st.code(), "shard " + info.name + ": " + st.message());
    if (info.has_crc && crc != info.crc32c) return ShardCrcMismatch(info, store.Locate(info.name), crc);
    return Status::OK();
  }

  // ---- epochs -----------------------------------------------------------------

  // A growing epoch holds each of its shards open (pinned: a descriptor
  // each, so that no process evicts it while the epoch may read it).  More
  // than the process may open, less a reserve for everything else, is a
  // clear error here, not EMFILE in whatever opens a file next (the epoch
  // would have left out the shards it could not open, and the process would
  // be out of descriptors).
  Status CheckDescriptorsFor(size_t to_pin, size_t epoch_shards) const {
    rlimit nofile{};
    if (getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur == RLIM_INFINITY) return Status::OK();
    size_t open_now = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
      while (dirent* e = readdir(d)) open_now += e->d_name[0] != '.';
      closedir(d);
    }
    const size_t limit = static_cast<size_t>(nofile.rlim_cur);
    const size_t reserve = std::max<size_t>(256, limit / 8);
    if (open_now + to_pin + reserve <= limit) return Status::OK();
    return Status::IOError(
        Describe() + ": the epoch would read the " + std::to_string(epoch_shards) +
            " shards cached now and holds each one open while it may read it (a file descriptor each, so that no "
            "process evicts it); this process has " + std::to_string(open_now) + " open, may have " +
            std::to_string(limit) + " (`ulimit -n`, raised to the hard limit `ulimit -Hn` where it was lower), and keeps " +
            std::to_string(reserve) +
            " for everything else. Raise the limit of open files (ulimit -Hn; LimitNOFILE= for a systemd "
            "service; --ulimit nofile= for docker), or cache fewer, larger shards (max_bytes / shard size)",
        EMFILE);
  }

  // Moves an earlier epoch's pin of a shard to `into` (the shard's
  // protection from eviction goes on; what a reader opened stays open in the
  // old slot, and a read of it not opened yet pins it again: EnsureOpen),
  // unless a reader is opening it right now.
  static bool TakePin(Slot& old, Slot& into) {
    std::unique_lock<std::mutex> g(old.open_mu, std::try_to_lock);
    if (!g.owns_lock() || !old.pin.valid()) return false;
    into.pin = std::move(old.pin);
    return true;
  }

  // This dataset's shards complete in the cache (a stat each), at one moment
  // (ShardCache::CachedAmong: under the directory lock, shared).
  std::vector<uint32_t> CachedShards() const { return cache->CachedAmong(shards); }

  Status BeginEpoch(uint64_t number) {
    auto ep = std::make_shared<Epoch>();
    ep->number = number;
    std::unique_lock<std::mutex> l(mu);
    const uint64_t gen = interrupts;
    auto gave_up = [&]() -> Status {
      if (stop) return Status::Cancelled(Describe() + " is closed");
      if (interrupts != gen) return Status::Cancelled(Describe() + ": interrupted while waiting for shards");
      return Status::OK();
    };
    std::vector<uint32_t> members;
    bool repeat = false;  // UseShards: exactly these, downloaded if need be
    if (o.mode == StreamingMode::kFull) {
      members.resize(shards.size());
      std::iota(members.begin(), members.end(), 0u);
    } else if (use_pending) {
      use_pending = false;
      repeat = true;
      for (const std::string& n : use_next) {
        auto it = by_name.find(n);
        if (it == by_name.end())
          return Status::InvalidArgument(Describe() + ": shard '" + n + "' (of the epoch to repeat, or of rank 0's "
                                         "epoch) is not in the index");
        members.push_back(it->second);
      }
      std::sort(members.begin(), members.end());
      members.erase(std::unique(members.begin(), members.end()), members.end());
    } else {
      // The shards cached now, once there are min_shards of them.
      const double deadline = o.wait_timeout_s > 0 ? Now() + o.wait_timeout_s : 0;
      const size_t need = std::min<size_t>(std::max<uint32_t>(1, o.min_shards), shards.size());
      for (;;) {
        l.unlock();  // (the listing waits for the cache's directory lock, which another process may hold a while)
        members = CachedShards();
        l.lock();
        for (const auto& f : fresh)
          if (!std::binary_search(members.begin(), members.end(), f.first)) members.push_back(f.first);
        std::sort(members.begin(), members.end());
        if (members.size() >= need) break;
        STOKER_RETURN_IF_ERROR(gave_up());
        bool all_failed = true;
        for (uint32_t i = 0; i < shards.size(); ++i) all_failed = all_failed && failed_for_good[i];
        const std::string have = std::to_string(members.size()) + " of the " + std::to_string(need) +
                                 " shards an epoch waits for (min_shards) are cached";
        if (all_failed || consecutive_failures >= 2 * std::max<uint32_t>(1, o.fetchers))
          return Status::IOError(Describe() + ": " + have + ", and fetching fails: " + last_error, EIO);
        if (deadline && Now() > deadline)
          return Status::Timeout(Describe() + ": " + have + " after " + std::to_string(o.wait_timeout_s) +
                                 " s (wait_timeout_s); " +
                                 (last_error.empty() ? "downloads are slow" : "the last fetch failed: " + last_error));
        cv.wait_for(l, std::chrono::milliseconds(50));
      }
    }
    // Growing: shards the previous epoch still holds pass their pins on (a
    // new epoch begun before the last one let go of its shards would hold
    // every shard open twice).
    std::shared_ptr<Epoch> last = cur.load();  // (keeps the slots `held` points into)
    std::map<uint32_t, Slot*> held;
    if (o.mode == StreamingMode::kGrowing) {
      if (last)
        for (auto& s : last->slots) held[s->shard] = s.get();
      size_t to_pin = 0;
      for (uint32_t sh : members) to_pin += fresh.count(sh) || held.count(sh) ? 0 : 1;
      STOKER_RETURN_IF_ERROR(CheckDescriptorsFor(to_pin, members.size()));
    }
    bool missing = false;
    for (uint32_t sh : members) {
      auto slot = std::make_unique<Slot>();
      slot->shard = sh;
      if (o.mode == StreamingMode::kFull) TakeKeptOpenLocked(*slot);
      if (o.mode == StreamingMode::kGrowing) {
        auto f = fresh.find(sh);
        auto h = held.find(sh);
        if (f != fresh.end()) {
          slot->pin = std::move(f->second);
          fresh.erase(f);
        } else if (h != held.end() && TakePin(*h->second, *slot)) {
          ++snapshot_hits;
        } else if (Result<ShardCache::Pin> p = cache->PinCached(shards[sh]); p.ok()) {
          slot->pin = std::move(p).value();
          ++snapshot_hits;
        } else if (p.status().code() == Status::Code::kIOError) {
          return p.status();  // (not "evicted since": it could not be opened)
        }
        if (slot->pin.valid()) {
          slot->state = kPinned;
        } else if (repeat) {
          slot->demanded = true;  // the fetchers bring it back
          missing = true;
        } else {
          continue;  // evicted (by another process) since it was listed
        }
        seen[sh] = true;
      }
      ep->slots.push_back(std::move(slot));
    }
    if (missing) {
      cur.store(ep);  // the fetchers serve the demanded slots of the current epoch
      cv.notify_all();
      for (bool waiting = true; waiting;) {
        waiting = false;
        for (auto& s : ep->slots) {
          if (s->state.load() == kFailed) return s->error;
          waiting = waiting || s->state.load() < kPinned;
        }
        if (waiting) {
          STOKER_RETURN_IF_ERROR(gave_up());
          cv.wait_for(l, std::chrono::milliseconds(50));
        }
      }
    }
    // Sample counts: from the index, from an earlier open, or by opening.
    for (auto& s : ep->slots) {
      // The index's count first: every rank must agree on it.
      const ShardInfo& info = shards[s->shard];
      uint64_t n = info.has_samples ? info.samples : static_cast<uint64_t>(std::max<int64_t>(0, known_count[s->shard]));
      if (!info.has_samples && known_count[s->shard] < 0) {
        l.unlock();
        Status st = EnsureOpen(*s);
        l.lock();
        if (!st.ok()) return st;
        n = s->data->size();
      }
      s->first = ep->firsts.back();
      s->count = n;
      ep->firsts.push_back(ep->firsts.back() + n);
    }
    cur.store(ep);
    cv.notify_all();
    return Status::OK();
  }
};

// ---- StreamingDataset ---------------------------------------------------------

StreamingDataset::StreamingDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) { impl_->self = this; }
StreamingDataset::~StreamingDataset() { Close(); }
void StreamingDataset::Close() { impl_->Shutdown(); }

Result<std::shared_ptr<StreamingDataset>> StreamingDataset::Open(const StreamingOptions& options) {
  const StreamingOptions& o = options;
  const std::string what = "StreamingDataset(" + o.remote + ")";
  if (o.remote.empty()) return Status::InvalidArgument("StreamingDataset: remote (the store's URL or directory) is empty");
  if (o.local.empty()) return Status::InvalidArgument(what + ": local (the cache directory) is empty");
  if (o.max_bytes == 0 && o.mode != StreamingMode::kFull)
    return Status::InvalidArgument(what + ": max_bytes (the cache's budget) must be > 0 in mode 'growing' "
                                   "(mode 'full' takes 0: every shard streamed through memory, none kept)");
  if (o.fetchers < 1) return Status::InvalidArgument(what + ": fetchers must be at least 1");
  std::optional<cpu_set_t> fetcher_cpus;
  if (!o.fetcher_cpus.empty()) {
    Result<cpu_set_t> set = CpuSetOf(o.fetcher_cpus, "fetcher_cpus");
    if (!set.ok()) return Status::InvalidArgument(what + ": " + set.status().message());
    fetcher_cpus = set.value();
  }
  if (o.shuffle_window < 1) return Status::InvalidArgument(what + ": shuffle_window must be at least 1");
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.o = o;
  if (o.format == ShardFormat::kTFRecord) {
    STOKER_RETURN_IF_ERROR(ValidateTFRecordFeatures(o.features, what));
    m.fields = o.features;
  } else {
    m.tar_decls = o.tar_fields;
  }
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(o.remote, o.store));
  if (o.shards.empty()) {
    STOKER_ASSIGN_OR_RETURN(std::string text, store->ReadAll(o.index));
    STOKER_ASSIGN_OR_RETURN(m.shards, ParseShardIndex(text, store->Locate(o.index)));
    if (m.shards.empty()) return Status::InvalidArgument(what + ": the index " + store->Locate(o.index) + " lists no shards");
  } else {
    m.shards = o.shards;
    for (const ShardInfo& s : m.shards)
      if (!IsPlainShardName(s.name)) return Status::InvalidArgument(what + ": shard name '" + s.name + "' must be a plain file name");
  }
  for (uint32_t i = 0; i < m.shards.size(); ++i) {
    const ShardInfo& s = m.shards[i];
    if (!m.by_name.emplace(s.name, i).second) return Status::InvalidArgument(what + ": shard '" + s.name + "' is listed twice");
    if (s.size > o.max_bytes && o.mode == StreamingMode::kGrowing)  // (kFull streams it through memory)
      return Status::InvalidArgument(what + ": shard " + s.name + " (" + std::to_string(s.size) +
                                     " bytes) is larger than max_bytes (" + std::to_string(o.max_bytes) + ")");
    if (o.mode == StreamingMode::kFull && !s.has_samples)
      return Status::InvalidArgument(what + ": mode 'full' needs every shard's number of samples in the index, and " +
                                     s.name + " has none: write the index with `stoker index DIR` (its 4th column)");
    m.max_shard = std::max(m.max_shard, s.size);
    m.remote_bytes += s.size;
  }
  if (o.mode == StreamingMode::kFull && o.stream_buffers && o.stream_buffers <= o.shuffle_window)
    return Status::InvalidArgument(what + ": stream_buffers (" + std::to_string(o.stream_buffers) +
                                   ") must be more than shuffle_window (" + std::to_string(o.shuffle_window) +
                                   "): the readers hold a window of shards at once");
  STOKER_ASSIGN_OR_RETURN(m.cache, ShardCache::Open(o.local, o.max_bytes, o.eviction, m.shards));
  // One descriptor per pinned shard (and one per open one): allow many.
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  // Shards kept open between epochs (KeepsShardsOpen): at most an eighth of
  // the descriptors, and 4096 (the mappings count against vm.max_map_count).
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0)
    m.max_kept_open = static_cast<size_t>(std::min<rlim_t>(4096, nofile.rlim_cur / 8));
  const size_t n = m.shards.size();
  m.known_count.assign(n, -1);
  m.in_flight.assign(n, false);
  m.failed_for_good.assign(n, false);
  m.known_cached.assign(n, false);
  m.seen.assign(n, false);
  m.fetch_order.resize(n);
  std::iota(m.fetch_order.begin(), m.fetch_order.end(), 0u);
  MixShuffle(m.fetch_order.begin(), m.fetch_order.end(), Mix64(o.fetch_seed ^ 0x6a09e667f3bcc908ULL));
  std::vector<std::unique_ptr<Store>> stores;
  for (uint32_t i = 0; i < o.fetchers; ++i) {
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Store> s, Store::Open(o.remote, o.store));
    stores.push_back(std::move(s));
  }
  if (o.mode == StreamingMode::kFull) {
    // Where some shards will stream through memory, its buffers now, so
    // that no memory is an error here rather than a stall later.
    const bool streams = m.remote_bytes > o.max_bytes;
    STOKER_RETURN_IF_ERROR(m.SizeBuffers(streams));
    while (streams && m.buffers.size() < m.BufferCount()) STOKER_RETURN_IF_ERROR(m.AddBufferLocked());
  }
  std::shared_ptr<StreamingDataset> d(new StreamingDataset(std::move(impl)));
  d->set_on_error(o.on_error);
  for (auto& s : stores) {
    std::thread& t = d->impl_->threads.emplace_back(
        [m = d->impl_.get(), st = std::move(s)]() mutable { m->FetcherMain(std::move(st)); });
    pthread_setname_np(t.native_handle(), "stoker-fetch");  // (top -H, py-spy, /proc/<pid>/task/*/comm)
    if (fetcher_cpus) STOKER_RETURN_IF_ERROR(ConfineThread(t, *fetcher_cpus, what + ": fetcher_cpus"));
  }
  STOKER_RETURN_IF_ERROR(d->impl_->BeginEpoch(0));
  if (d->impl_->fields.empty()) {  // tar: the first shard says what the fields are
    std::shared_ptr<Epoch> ep = d->impl_->cur.load();
    if (ep->slots.empty()) return Status::Internal(what + ": no shard to learn the fields from");
    STOKER_RETURN_IF_ERROR(d->impl_->OpenNow(*ep->slots[0]));
  }
  return d;
}

uint64_t StreamingDataset::size() const {
  std::shared_ptr<Epoch> ep = impl_->cur.load();
  return ep ? ep->samples() : 0;
}

const std::vector<FieldSpec>& StreamingDataset::fields() const { return impl_->fields; }
std::string StreamingDataset::Describe() const { return impl_->Describe(); }
const std::vector<ShardInfo>& StreamingDataset::remote_shards() const { return impl_->shards; }
StreamingMode StreamingDataset::mode() const { return impl_->o.mode; }

Status StreamingDataset::Read(uint64_t index, uint8_t* const* dst) {
  std::shared_ptr<Epoch> ep = impl_->cur.load();
  STOKER_ASSIGN_OR_RETURN(Slot* s, impl_->Ready(ep, index));
  const uint64_t local = index - s->first;
  Status st = local < s->data->size()
                  ? s->data->Read(local, dst)
                  : Status::DataLoss("shard " + impl_->shards[s->shard].name + " has " + std::to_string(s->data->size()) +
                                     " samples, the index says " + std::to_string(s->count) + " (sample " +
                                     std::to_string(local) + " is missing)");
  impl_->DoneReading(*s);
  return st;
}

Status StreamingDataset::SampleBytes(uint64_t index, uint64_t* bytes) {
  std::shared_ptr<Epoch> ep = impl_->cur.load();
  STOKER_ASSIGN_OR_RETURN(Slot* s, impl_->Ready(ep, index));
  const uint64_t local = index - s->first;
  if (local >= s->data->size()) return Read(index, nullptr);  // the same error (and bookkeeping)
  return s->data->SampleBytes(local, bytes);
}

Status StreamingDataset::BeginEpoch(uint64_t epoch) {
  SetEpoch(epoch);
  return impl_->BeginEpoch(epoch);
}

std::vector<int64_t> StreamingDataset::Order(const SampleOrder& o) {
  Impl& m = *impl_;
  std::shared_ptr<Epoch> ep = m.cur.load();
  const size_t P = ep->slots.size();
  std::vector<int64_t> pos(P);
  std::iota(pos.begin(), pos.end(), 0);
  const uint64_t base = o.ShuffleSeed();
  if (o.shuffle) MixShuffle(pos.begin(), pos.end(), base);
  std::vector<int64_t> all;
  all.reserve(ep->samples());
  const size_t W = m.o.shuffle_window;
  for (size_t w0 = 0; w0 < P; w0 += W) {
    const size_t start = all.size();
    for (size_t k = w0; k < std::min(P, w0 + W); ++k) {
      const Slot& s = *ep->slots[static_cast<size_t>(pos[k])];
      for (uint64_t j = 0; j < s.count; ++j) all.push_back(static_cast<int64_t>(s.first + j));
    }
    if (o.shuffle) MixShuffle(all.begin() + static_cast<int64_t>(start), all.end(), Mix64(base ^ Mix64(w0 + 1)));
  }
  // Ranks: equal contiguous parts (padded from the start, or cut).
  o.FitToRanks(&all);
  const uint64_t per = all.size() / std::max<uint32_t>(1, o.world_size);
  std::vector<int64_t> mine(all.begin() + static_cast<int64_t>(o.rank * per),
                            all.begin() + static_cast<int64_t>((o.rank + 1) * per));
  std::lock_guard<std::mutex> g(m.mu);
  if (!ep->reads_started.load() && !ep->ordered) {
    // Each shard is released after its last read in this order.
    std::vector<int64_t> reads(P, 0);
    ep->seq_of.assign(P, UINT32_MAX);
    for (int64_t i : mine) {
      const uint32_t p = ep->PositionOf(static_cast<uint64_t>(i));
      if (reads[p]++ == 0) {
        ep->seq_of[p] = static_cast<uint32_t>(ep->seq.size());
        ep->seq.push_back(p);
      }
    }
    for (size_t p = 0; p < P; ++p) {
      ep->slots[p]->remaining = reads[p];
      if (reads[p] == 0) m.ReleaseLocked(*ep->slots[p]);  // another rank's
    }
    ep->ordered = true;
    if (m.o.mode == StreamingMode::kFull && !ep->seq.empty()) {
      // The readers' first shards are known now: the fetchers start on them
      // at once, not when the first reader asks (after the loader's start).
      int64_t f = -1;
      ep->frontier.compare_exchange_strong(f, 0);
      m.cv.notify_all();
    }
  }
  return mine;
}

void StreamingDataset::Interrupt() {
  std::lock_guard<std::mutex> g(impl_->mu);
  ++impl_->interrupts;
  impl_->cv.notify_all();
}

std::string StreamingDataset::EpochState() const {
  if (impl_->o.mode != StreamingMode::kGrowing) return "";
  std::string out;
  for (const std::string& n : epoch_shards()) out += n + "\n";
  return out;
}

Status StreamingDataset::RestoreEpoch(const std::string& state) {
  if (state.empty()) return Status::OK();
  if (impl_->o.mode != StreamingMode::kGrowing)
    return Status::InvalidArgument(Describe() + ": the saved state lists a growing dataset's shards; this one is 'full'");
  std::vector<std::string> names;
  for (size_t at = 0; at < state.size();) {
    const size_t nl = state.find('\n', at);
    const size_t end = nl == std::string::npos ? state.size() : nl;
    if (end > at) names.push_back(state.substr(at, end - at));
    at = end + 1;
  }
  UseShards(std::move(names));
  return Status::OK();
}

void StreamingDataset::UseShards(std::vector<std::string> names) {
  std::lock_guard<std::mutex> g(impl_->mu);
  impl_->use_next = std::move(names);
  impl_->use_pending = true;
}

std::vector<std::string> StreamingDataset::epoch_shards() const {
  std::shared_ptr<Epoch> ep = impl_->cur.load();
  std::vector<std::string> out;
  if (ep)
    for (const auto& s : ep->slots) out.push_back(impl_->shards[s->shard].name);
  return out;
}

StreamingStats StreamingDataset::stats() const {
  const Impl& m = *impl_;
  StreamingStats s;
  std::shared_ptr<Epoch> ep = m.cur.load();
  if (ep) {
    s.epoch = ep->number;
    s.epoch_shards = ep->slots.size();
    s.epoch_samples = ep->samples();
  }
  // The directory first, outside the lock the readers and fetchers take.
  for (uint32_t i : m.CachedShards()) {
    ++s.cached_shards;
    s.cached_bytes += m.shards[i].size;
  }
  Result<uint64_t> used = m.cache->UsedBytes();
  s.used_bytes = used.ok() ? used.value() : 0;
  std::lock_guard<std::mutex> g(m.mu);
  s.max_bytes = m.o.max_bytes;
  s.hits = m.cache->hits() + m.snapshot_hits;
  s.downloads = m.cache->downloads() + m.streamed;
  s.streamed = m.streamed;
  for (const auto& b : m.buffers) s.stream_buffer_bytes += b->capacity;
  s.prefetches_dropped = m.prefetches_dropped;
  s.hit_rate = s.hits + s.downloads ? static_cast<double>(s.hits) / static_cast<double>(s.hits + s.downloads) : 0;
  s.bytes_downloaded = m.cache->bytes_downloaded() + m.stream_bytes;
  s.fetch_seconds = m.busy_s + (m.downloading ? Now() - m.busy_since : 0);
  s.fetch_bytes_per_s = s.fetch_seconds > 0 ? static_cast<double>(s.bytes_downloaded) / s.fetch_seconds : 0;
  s.shards_in_flight = static_cast<uint64_t>(m.downloading);
  s.bytes_in_flight = m.bytes_in_flight;
  s.evictions = m.cache->evictions();
  s.remote_shards = m.shards.size();
  s.remote_bytes = m.remote_bytes;
  for (uint32_t i = 0; i < m.shards.size(); ++i)
    if (m.seen[i]) ++s.seen_shards, s.seen_bytes += m.shards[i].size;
  s.fraction_seen = m.remote_bytes ? static_cast<double>(s.seen_bytes) / static_cast<double>(m.remote_bytes) : 0;
  s.fetch_errors = m.fetch_errors;
  s.last_fetch_error = m.last_error;
  return s;
}

}  // namespace stoker
