// StreamingDataset::Impl (streaming_impl.h): the fetcher threads.  Each
// fetcher takes the next job (NextJob: a shard a reader waits for, earliest
// in the order first; then full mode's prefetch window; then, growing, the
// next remote shard not cached), downloads it into the cache or a stream
// buffer, and hands it to its slot.  Where the number is the dataset's to
// choose, FetcherScaling starts and retires fetchers as they help.
#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "streaming/streaming_impl.h"

#include "core/cpu_affinity.h"
#include "core/time_slice.h"
#include "io/crc32c.h"

namespace stoker {

using namespace stream;  // (shard_epoch.h: ShardSlot, Epoch and the slot states)

namespace {

// The longest a fetcher waits before it looks again for room in a cache full
// of shards in use (another process sharing the directory may have released
// some; this process's own releases wake it at once).
constexpr double kFullWaitMaxS = 5.0;

// A stream buffer's pages are backed this far ahead of a download's receive.
constexpr uint64_t kBackAheadBytes = 4 << 20;

}  // namespace

bool StreamingDataset::Impl::NextJob(Job* job) {
  std::shared_ptr<Epoch> ep = cur.load();
  if (ep) {
    // Shards a reader (or BeginEpoch) waits for, earliest in the order first.
    ShardSlot* best = nullptr;
    uint32_t best_place = UINT32_MAX;
    for (size_t p = 0; p < ep->slots.size(); ++p) {
      ShardSlot& s = *ep->slots[p];
      if (!s.demanded || s.state.load() != kWaiting) continue;
      const uint32_t place = ep->PlaceOf(static_cast<uint32_t>(p));
      if (!best || place < best_place) best = &s, best_place = place;
    }
    if (best) {
      *job = Job{ep, best, best->shard, false, best_place};
      return true;
    }
    // kFull: the next shards in the order, `prefetch` ahead of the readers,
    // from the start of the window the furthest read is in: its samples are
    // read in a shuffled order, so a reader may have come to its last shard
    // before its first (a prefetch past that first shard then took the
    // buffer the first one needed, and was taken back and fetched twice).
    if (o.mode == StreamingMode::kFull && ep->frontier.load() >= 0) {
      const int64_t f = ep->frontier.load();
      const uint32_t places = ep->seq.empty() ? static_cast<uint32_t>(ep->slots.size()) : static_cast<uint32_t>(ep->seq.size());
      // (At least a shard ahead per fetcher: connections FetcherScaling added
      // for a store that limits each one would otherwise find nothing to do.)
      int64_t last = f + static_cast<int64_t>(std::max(o.prefetch, fetchers));
      if (!FirstWindowInLocked(*ep, places))
        last = std::min<int64_t>(last, static_cast<int64_t>(o.shuffle_window) - 1);
      for (int64_t k = f - f % o.shuffle_window; k <= last && k < places; ++k) {
        ShardSlot& s = *ep->slots[ep->seq.empty() ? k : ep->seq[k]];
        if (s.state.load() == kWaiting) {
          *job = Job{ep, &s, s.shard, true, k};
          return true;
        }
      }
    }
  }
  if (o.mode != StreamingMode::kCached) return false;
  // kCached: the next remote shard not cached yet, in fetch order.
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
bool StreamingDataset::Impl::FirstWindowInLocked(Epoch& ep, uint32_t places) const {
  if (ep.first_window_in) return true;
  for (uint32_t k = 0; k < std::min<uint32_t>(places, o.shuffle_window); ++k)
    if (ep.slots[ep.seq.empty() ? k : ep.seq[k]]->state.load() < kPinned) return false;
  return ep.first_window_in = true;
}

// kCached, under mu (released meanwhile): which remote shards the cache
// has complete, a stat each.  NextJob used to stat every cached shard on
// its way to one that is not, on every wake-up, and the fetchers wake for
// each shard a reader is done with: with every shard cached, an epoch of
// N shards cost N * N stats under mu (10,000 tiny shards: 289 s for an
// epoch).  Now a look every second, or less often where a look takes
// longer than a tenth of that.
void StreamingDataset::Impl::RefreshKnownCachedLocked(std::unique_lock<std::mutex>& l) {
  known_cached_busy = true;
  l.unlock();
  const double t0 = MonotonicNanos() * 1e-9;
  std::vector<bool> now(shards.size());
  for (size_t i = 0; i < shards.size(); ++i) now[i] = cache->IsCached(shards[i]);
  const double took = MonotonicNanos() * 1e-9 - t0;
  l.lock();
  known_cached.swap(now);
  known_cached_next = MonotonicNanos() * 1e-9 + std::max(1.0, 10 * took);
  known_cached_busy = false;
}

void StreamingDataset::Impl::FetcherMain(std::unique_ptr<Store> store) {
  // Woken for each piece that arrives, a little work each time: short
  // slices, so as not to wait behind the readers (core/time_slice.h).
  RequestTimeSlice(kFetcherTimeSliceNs);
  TraceNameThread("fetcher");
  std::unique_lock<std::mutex> l(mu);
  double backoff = 0, full_wait = 0;
  while (!stop) {
    if (retire > 0) {  // FetcherScaling (or SetFetchers) gave a connection back: this one
      --retire;
      --fetchers;
      buffers.SetFetchers(fetchers);
      return;
    }
    if (o.mode == StreamingMode::kCached && !known_cached_busy && MonotonicNanos() * 1e-9 >= known_cached_next) {
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
      if (!room && !(buf = AcquireBufferLocked(job.ep, job.place, job.speculative))) {
        in_flight[job.shard] = false;
        job.slot->state = kWaiting;  // unclaimed (its readers wait on either state alike)
        cv.wait_for(l, std::chrono::milliseconds(200));  // the readers hold them all: wait for a release
        continue;
      }
    }
    if (!cached && ++downloading == 1) busy_since = MonotonicNanos() * 1e-9;
    if (!cached) bytes_in_flight += info.size;
    const uint64_t requests0 = store->requests(), retries0 = store->retries(), in_place0 = store->bytes_in_place();
    const double started = MonotonicNanos() * 1e-9;
    l.unlock();
    Result<ShardCache::Pin> pin = Status::OK();
    Status streamed_st;
    EnterStage(Stage::kFetch);
    if (buf) {
      streamed_st = ReadIntoBuffer(*store, info, buf);
    } else {
      // (kFull never evicts: what the cache has no room for streams.)
      pin = cache->Fetch(*store, info, /*may_evict=*/o.mode != StreamingMode::kFull);
    }
    LeaveStage();
    l.lock();
    store_requests += store->requests() - requests0;
    store_retries += store->retries() - retries0;
    store_bytes_in_place += store->bytes_in_place() - in_place0;
    if (buf) {
      if (streamed_st.ok()) {
        ++streamed;
        pin = ShardCache::Pin();  // (none: the slot holds the buffer)
      } else {
        buffers.Return(buf);
        pin = streamed_st;
      }
    }
    in_flight[job.shard] = false;
    if (!cached) {
      download_s += MonotonicNanos() * 1e-9 - started;
      bytes_in_flight -= info.size;
      if (--downloading == 0) busy_s += MonotonicNanos() * 1e-9 - busy_since;
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
      if (scaling && !by_caller && !cached) ScaleFetchersLocked(l);  // (the shard handed over first: mu may be let go)
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

Status StreamingDataset::Impl::StartFetcher(std::unique_ptr<Store> store) {
  std::thread& t = threads.emplace_back([this, st = std::move(store)]() mutable { FetcherMain(std::move(st)); });
  pthread_setname_np(t.native_handle(), "stoker-fetch");  // (top -H, py-spy, /proc/<pid>/task/*/comm)
  if (fetcher_cpu_set) return ConfineThread(t, *fetcher_cpu_set, Describe() + ": fetcher_cpus");
  return Status::OK();
}

void StreamingDataset::Impl::ScaleFetchersLocked(std::unique_lock<std::mutex>& l) {
  const double now = MonotonicNanos() * 1e-9;
  const double busy = busy_s + (downloading ? now - busy_since : 0);
  const int step =
      scaling->Observe(busy, download_s, BytesDownloadedLocked(), reader_waits, fetchers);
  if (step < 0) {
    ++retire;  // the next fetcher to look for a job stops
    cv.notify_all();
    return;
  }
  if (step == 0) return;
  Status st = AddFetcherLocked(l);
  if (!st.ok() && !st.IsClosed()) last_error = st.message();  // (the connections running go on)
}

Status StreamingDataset::Impl::AddFetcherLocked(std::unique_lock<std::mutex>& l) {
  l.unlock();
  Result<std::unique_ptr<Store>> store = open_store();
  l.lock();
  if (stop) return Status::Closed(Describe() + ": closed while a fetcher was being added");
  if (!store.ok())
    return Status::IOError(Describe() + ": a fetcher more could not open the store: " + store.status().message());
  Status st = StartFetcher(std::move(store).value());
  ++fetchers;  // (running, even if confining it failed)
  buffers.SetFetchers(fetchers);
  cv.notify_all();
  return st;
}

StreamBuffer* StreamingDataset::Impl::AcquireBufferLocked(const std::shared_ptr<Epoch>& ep, int64_t place,
                                                          bool speculative) {
  // What a prefetch must leave free: what the readers' window still lacks
  // (the window less the buffers they hold), and at least a buffer for
  // each shard the order reads before this one, from the start of the
  // furthest read's window, that has none yet.  Fetchers claim shards in
  // order but get their buffers in whatever order they come back to the
  // lock: a later shard's prefetch took the buffer an earlier one needed,
  // which a reader then asked for, and the later one was taken back and
  // fetched twice.
  size_t reserve = 0;
  if (speculative) {
    size_t held = 0, before = 0;
    const int64_t f = std::max<int64_t>(0, ep->frontier.load());
    const int64_t from = f - f % o.shuffle_window;
    for (size_t p = 0; p < ep->slots.size(); ++p) {
      const ShardSlot& s = *ep->slots[p];
      held += s.mem && s.touched;
      const int64_t at = ep->PlaceOf(static_cast<uint32_t>(p));
      const int st = s.state.load();
      if (at >= from && at < place && !s.mem && (st == kWaiting || st == kFetching)) ++before;
    }
    reserve = std::max<size_t>(o.shuffle_window > held ? o.shuffle_window - held : 0, before);
  }
  Result<StreamBuffer*> got =
      buffers.Acquire(ep, speculative, reserve, [this, &ep, place] { return TakeBackBufferLocked(ep.get(), place); });
  if (got.ok()) return got.value();
  ++fetch_errors;  // seen in stats(); the fetcher waits for a buffer to come free
  last_error = got.status().message();
  return nullptr;
}

// Under mu: the buffer of the current epoch's prefetched shard that the
// order reads last, of those no reader has come for, if the order reads it
// after `place` (of the epoch `of`; another epoch's place: any); that shard
// waits to be fetched again.  Null if there is none: one read before it
// would only be fetched again at once (then the pool makes one buffer more
// for the while: Acquire).
StreamBuffer* StreamingDataset::Impl::TakeBackBufferLocked(const Epoch* of, int64_t place) {
  std::shared_ptr<Epoch> ep = cur.load();
  if (!ep) return nullptr;
  const int64_t for_place = ep.get() == of ? place : -1;
  ShardSlot* best = nullptr;
  uint32_t best_place = 0;
  for (size_t p = 0; p < ep->slots.size(); ++p) {
    ShardSlot& s = *ep->slots[p];
    if (!s.mem || s.touched || s.demanded || s.state.load() != kPinned) continue;
    const uint32_t at = ep->PlaceOf(static_cast<uint32_t>(p));
    if (!best || at > best_place) best = &s, best_place = at;
  }
  if (!best || static_cast<int64_t>(best_place) <= for_place) return nullptr;
  StreamBuffer* b = best->mem;
  best->mem = nullptr;
  best->state = kWaiting;
  ++prefetches_dropped;
  return b;
}

// Downloads `info` into `buf` (range reads, the store's retries) and
// checks it against the index's CRC-32C.
Status StreamingDataset::Impl::ReadIntoBuffer(Store& store, const ShardInfo& info, StreamBuffer* buf) {
  buf->size = info.size;  // its readers see exactly the shard
  // Pages backed kBackAheadBytes at a time as the receive reaches them: a
  // whole fresh 64 MiB buffer backed before the request kept the fetcher
  // off its connection for 16-40 ms, long enough for the server to go idle
  // (nginx slept a fifth of a fresh epoch), and held the process's mmap
  // lock all that while.  The first step before the request: a buffer the
  // machine has no memory for fails before anything is asked for.
  auto back = [&](uint64_t upto) -> Status {
    if (upto <= buf->backed && buf->map) return Status::OK();
    const uint64_t step = std::min(info.size, std::max(upto, buf->backed + kBackAheadBytes));
    Status backed = buffers.Back(buf, step);
    if (!backed.ok()) return Status::FromCode(backed.code(), "shard " + info.name + ": " + backed.message());
    return Status::OK();
  };
  STOKER_RETURN_IF_ERROR(back(0));
  const Store::ReadReady ready = back;
  const uint64_t before = store.bytes_received();
  uint32_t crc = 0;  // (0 for an empty shard) computed as the bytes arrive
  Status st =
      info.size ? store.Read(info.name, 0, info.size, buf->map, info.has_crc ? &crc : nullptr, &ready) : Status::OK();
  {
    std::lock_guard<std::mutex> g(mu);
    stream_bytes += store.bytes_received() - before;
  }
  if (!st.ok()) return Status::FromCode(st.code(), "shard " + info.name + ": " + st.message());
  if (info.has_crc && crc != info.crc32c) return ShardCrcMismatch(info, store.Locate(info.name), crc);
  return Status::OK();
}

}  // namespace stoker
