// StreamingDataset::Impl (streaming_impl.h): epochs and the readers' path.
// An epoch takes its shards (full: all of them; growing: those cached when
// it begins, or the ones UseShards named), pins them, learns their sample
// counts and, once its order is known, when each shard may be released.
#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "io/tar_shard_dataset.h"
#include "io/tfrecord_dataset.h"
#include "streaming/shard_open.h"
#include "streaming/streaming_impl.h"

namespace stoker {

using namespace stream;  // (shard_epoch.h: ShardSlot, Epoch and the slot states)


// `verified`: the file was just downloaded and matched the index's CRC-32C,
// so its records' own CRCs need no second check.
// `memory`: a stream buffer (its record index is not kept on disk).
Result<std::unique_ptr<NativeDataset>> StreamingDataset::Impl::OpenShard(uint32_t shard, FileReader file, bool verified, bool memory) {
  std::vector<TarFieldDecl> decls, learned;
  {
    std::lock_guard<std::mutex> g(mu);
    decls = tar_decls;
  }
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<NativeDataset> d,
                          OpenShardFile(o, decls, std::move(file), cache->index_dir(), verified, memory, &learned));
  if (o.format == ShardFormat::kTar) {
    std::lock_guard<std::mutex> g(mu);
    // The first shard opened says what the fields are: all of them when they
    // are inferred, their shapes and dtypes when only declared.
    if (tar_decls.empty()) tar_decls = learned;
    if (fields.empty()) fields = d->fields();
  }
  STOKER_RETURN_IF_ERROR(CheckShard(*d, shards[shard], fields, o.on_error));
  for (uint64_t i = 0; i < d->skipped(); ++i) self->CountSkipped(Status::DataLoss(d->last_skipped()));
  std::lock_guard<std::mutex> g(mu);
  known_count[shard] = static_cast<int64_t>(d->size());
  return d;
}

Status StreamingDataset::Impl::EnsureOpen(ShardSlot& s) {
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

// Under mu: closes and unpins a slot the epoch is done with (or keeps its
// shard open for the next epoch).
void StreamingDataset::Impl::ReleaseLocked(ShardSlot& s) {
  const int st = s.state.load();
  if (st != kOpen && st != kPinned) return;
  ShardCache::MarkUsed(s.pin);
  if (st == kOpen && !s.mem && s.pin.valid() && s.data && KeepsShardsOpen() &&
      kept_open.size() < max_kept_open)
    kept_open[s.shard] = KeptShard{std::move(s.pin), std::move(s.data)};
  s.data.reset();
  s.pin = ShardCache::Pin();
  if (s.mem) {
    buffers.Return(s.mem);
    s.mem = nullptr;
  }
  s.state = kReleased;
  ++releases;  // (a shard the cache may evict now: fetchers waiting for room look again)
  cv.notify_all();
}

bool StreamingDataset::Impl::TakeKeptOpenLocked(ShardSlot& s) {
  auto k = kept_open.find(s.shard);
  if (k == kept_open.end()) return false;
  s.pin = std::move(k->second.pin);
  s.data = std::move(k->second.data);
  kept_open.erase(k);
  ++snapshot_hits;
  s.state = kOpen;
  return true;
}

Result<StreamingDataset::Impl::ShardSlot*> StreamingDataset::Impl::Ready(const std::shared_ptr<Epoch>& ep, uint64_t index) {
  if (getpid() != owner)
    return Status::InvalidArgument(Describe() + " is read in the process that opened it (by stoker's reader "
                                   "threads): this is a forked child; use stoker.DataLoader without a Python "
                                   "collate_fn or transform, or num_workers=0");
  if (index >= ep->samples())
    return Status::InvalidArgument("index " + std::to_string(index) + " is out of range for " + Describe() +
                                   " (epoch " + std::to_string(ep->number) + " has " +
                                   std::to_string(ep->samples()) + " samples)");
  const uint32_t pos = ep->PositionOf(index);
  ShardSlot& s = *ep->slots[pos];
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
    ++reader_waits;  // (FetcherScaling: the downloads are the bound)
    StageScope waiting(Stage::kWaitStore);
    cv.wait(l);
  }
}

void StreamingDataset::Impl::DoneReading(ShardSlot& s) {
  if (s.remaining.fetch_sub(1) == 1) {
    std::lock_guard<std::mutex> g(mu);
    ReleaseLocked(s);
  }
}

// A slot pinned (downloaded first if need be) and opened, outside the
// readers' path (Open learning a tar dataset's fields).
Status StreamingDataset::Impl::OpenNow(ShardSlot& s) {
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

// A growing epoch holds each of its shards open (pinned: a descriptor
// each, so that no process evicts it while the epoch may read it).  More
// than the process may open, less a reserve for everything else, is a
// clear error here, not EMFILE in whatever opens a file next (the epoch
// would have left out the shards it could not open, and the process would
// be out of descriptors).
Status StreamingDataset::Impl::CheckDescriptorsFor(size_t to_pin, size_t epoch_shards) const {
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
bool StreamingDataset::Impl::TakePin(ShardSlot& old, ShardSlot& into) {
  std::unique_lock<std::mutex> g(old.open_mu, std::try_to_lock);
  if (!g.owns_lock() || !old.pin.valid()) return false;
  into.pin = std::move(old.pin);
  return true;
}

Status StreamingDataset::Impl::BeginEpoch(uint64_t number) {
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
    const double deadline = o.wait_timeout_s > 0 ? MonotonicNanos() * 1e-9 + o.wait_timeout_s : 0;
    const size_t need = std::min<size_t>(std::max<uint32_t>(1, o.min_shards), shards.size());
    for (;;) {
      l.unlock();  // (the listing waits for the cache's directory lock, which another process may hold a while)
      members = CachedShards();
      l.lock();
      // (Fetched shards are cached too once renamed: a shard listed both
      // ways is one member. A search of the list while it grows, as here
      // before, missed some and let a duplicate count toward min_shards.)
      for (const auto& f : fresh) members.push_back(f.first);
      std::sort(members.begin(), members.end());
      members.erase(std::unique(members.begin(), members.end()), members.end());
      if (members.size() >= need) break;
      STOKER_RETURN_IF_ERROR(gave_up());
      bool all_failed = true;
      for (uint32_t i = 0; i < shards.size(); ++i) all_failed = all_failed && failed_for_good[i];
      const std::string have = std::to_string(members.size()) + " of the " + std::to_string(need) +
                               " shards an epoch waits for (min_shards) are cached";
      if (all_failed || consecutive_failures >= 2 * std::max<uint32_t>(1, fetchers))
        return Status::IOError(Describe() + ": " + have + ", and fetching fails: " + last_error);
      if (deadline && MonotonicNanos() * 1e-9 > deadline)
        return Status::Timeout(Describe() + ": " + have + " after " + std::to_string(o.wait_timeout_s) +
                               " s (wait_timeout_s); " +
                               (last_error.empty() ? "downloads are slow" : "the last fetch failed: " + last_error));
      cv.wait_for(l, std::chrono::milliseconds(50));
    }
  }
  // Cached: shards the previous epoch still holds pass their pins on (a
  // new epoch begun before the last one let go of its shards would hold
  // every shard open twice).
  std::shared_ptr<Epoch> last = cur.load();  // (keeps the slots `held` points into)
  std::map<uint32_t, ShardSlot*> held;
  if (o.mode == StreamingMode::kCached) {
    if (last)
      for (auto& s : last->slots) held[s->shard] = s.get();
    size_t to_pin = 0;
    for (uint32_t sh : members) to_pin += fresh.count(sh) || held.count(sh) ? 0 : 1;
    STOKER_RETURN_IF_ERROR(CheckDescriptorsFor(to_pin, members.size()));
  }
  bool missing = false;
  for (uint32_t sh : members) {
    auto slot = std::make_unique<ShardSlot>();
    slot->shard = sh;
    if (o.mode == StreamingMode::kFull) TakeKeptOpenLocked(*slot);
    if (o.mode == StreamingMode::kCached) {
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
  shards_left_out += shards.size() - ep->slots.size();  // (kFull: every shard is in)
  cur.store(ep);
  cv.notify_all();
  return Status::OK();
}

std::vector<int64_t> StreamingDataset::Impl::GlobalOrder(const OrderRecipe& so) {
  std::shared_ptr<Epoch> ep = cur.load();
  const size_t P = ep->slots.size();
  std::vector<std::pair<uint64_t, uint64_t>> runs(P);
  for (size_t p = 0; p < P; ++p) runs[p] = {ep->slots[p]->first, ep->slots[p]->count};
  return so.GlobalByShards(runs, o.shuffle_window);
}

std::vector<int64_t> StreamingDataset::Impl::Order(const OrderRecipe& so) {
  // Ranks: equal contiguous parts, so that a shard's samples stay on few ranks.
  return Plan(so.RankPart(GlobalOrder(so), RankSplit::kContiguous));
}

std::vector<int64_t> StreamingDataset::Impl::Plan(std::vector<int64_t> mine) {
  std::shared_ptr<Epoch> ep = cur.load();
  const size_t P = ep->slots.size();
  std::lock_guard<std::mutex> g(mu);
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
      if (reads[p] == 0) ReleaseLocked(*ep->slots[p]);  // another rank's
    }
    ep->ordered = true;
    if (o.mode == StreamingMode::kFull && !ep->seq.empty()) {
      // The readers' first shards are known now: the fetchers start on them
      // at once, not when the first reader asks (after the loader's start).
      int64_t f = -1;
      ep->frontier.compare_exchange_strong(f, 0);
      cv.notify_all();
    }
  }
  return mine;
}

}  // namespace stoker
