// StreamingDataset (include/stoker/streaming.h): the facade.  Open checks
// the options and the index, opens the cache, sizes full mode's stream
// buffers and starts the fetchers; the rest of the work is in Impl
// (streaming_impl.h: epochs and readers, fetchers, the buffer pool).
#include "stoker/streaming.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>

#include "streaming/shard_open.h"
#include "streaming/streaming_impl.h"
#include "core/cpu_affinity.h"
#include "core/host_memory.h"
#include "core/mix.h"
#include "io/tar_shard_dataset.h"
#include "io/tfrecord_dataset.h"

namespace stoker {

using namespace stream;  // (shard_epoch.h: ShardSlot, Epoch and the slot states)

std::string StreamingDataset::Impl::Describe() const {
  return std::string(o.mode == StreamingMode::kFull ? "streaming (full)" : "streaming (cached)") + " dataset " +
         o.remote + " cached in " + o.local;
}

void StreamingDataset::Impl::SampleTraceCounters() {
  double hits, downloads, bytes, in_flight, requests;
  {
    std::lock_guard<std::mutex> g(mu);
    hits = static_cast<double>(HitsLocked());
    downloads = static_cast<double>(DownloadsLocked());
    bytes = static_cast<double>(BytesDownloadedLocked());
    in_flight = downloading;
    requests = static_cast<double>(store_requests);
  }
  TraceCounter("streaming", {{"cache_hits", hits}, {"downloads", downloads}, {"bytes_fetched", bytes},
                             {"shards_in_flight", in_flight}, {"requests", requests}});
}

void StreamingDataset::Impl::Shutdown() {
  if (trace_source) {
    RemoveTraceCounterSource(trace_source);
    trace_source = 0;
  }
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

// ---- StreamingDataset ---------------------------------------------------------

StreamingDataset::StreamingDataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->self = this;
  Impl* m = impl_.get();
  m->trace_source = AddTraceCounterSource([m] { m->SampleTraceCounters(); });
}
StreamingDataset::~StreamingDataset() { Close(); }
void StreamingDataset::Close() { impl_->Shutdown(); }

Status StreamingDataset::SetFetchers(uint32_t n) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> l(m.mu);
  if (!m.scaling)
    return Status::InvalidArgument(m.Describe() + ": opened with fetchers=" + std::to_string(m.fetchers) +
                                 ", a fixed number; open it with fetchers=None to let the loader choose");
  if (n < 1 || n > m.scaling->most())
    return Status::InvalidArgument(m.Describe() + ": SetFetchers(" + std::to_string(n) + "): from 1 to " +
                                   std::to_string(m.scaling->most()) + " (fetchers_most)");
  if (m.stop) return Status::Closed(m.Describe() + ": closed; its fetchers are stopped");
  m.by_caller = true;
  // Those still to leave are running; n below them: more leave, above: fewer.
  const uint32_t staying = m.fetchers - std::min(m.retire, m.fetchers);
  if (n <= staying) {
    m.retire += staying - n;
    m.cv.notify_all();
    return Status::OK();
  }
  const uint32_t cancel = std::min(m.retire, n - staying);
  m.retire -= cancel;
  for (uint32_t more = n - staying - cancel; more > 0; --more) STOKER_RETURN_IF_ERROR(m.AddFetcherLocked(l));
  return Status::OK();
}

Result<std::shared_ptr<StreamingDataset>> StreamingDataset::Open(const StreamingOptions& options) {
  const StreamingOptions& o = options;
  const std::string what = "StreamingDataset(" + o.remote + ")";
  if (o.remote.empty()) return Status::InvalidArgument("StreamingDataset: remote (the store's URL or directory) is empty");
  if (o.local.empty()) return Status::InvalidArgument(what + ": local (the cache directory) is empty");
  if (o.max_bytes == 0 && o.mode != StreamingMode::kFull)
    return Status::InvalidArgument(what + ": max_bytes=0 (no cache) is for mode='full' (every shard streamed "
                                   "through memory, none kept); max_bytes must be > 0 in mode 'cached', whose "
                                   "epochs read what is cached");
  std::optional<cpu_set_t> fetcher_cpus;
  if (!o.fetcher_cpus.empty()) {
    Result<cpu_set_t> set = CpuSetOf(o.fetcher_cpus, "fetcher_cpus");
    if (!set.ok()) return Status::InvalidArgument(what + ": " + set.status().message());
    fetcher_cpus = set.value();
  }
  if (o.shuffle_window < 1) return Status::InvalidArgument(what + ": shuffle_window must be at least 1");
  if (o.min_shards < 1) return Status::InvalidArgument(what + ": min_shards must be at least 1");
  auto impl = std::make_unique<Impl>();
  Impl& m = *impl;
  m.o = o;
  if (o.format == ShardFormat::kTFRecord) {
    STOKER_RETURN_IF_ERROR(ValidateTFRecordFeatures(o.features, what));
    m.fields = o.features;
  } else {
    m.tar_decls = o.tar_fields;
    // Declared fields make the specs here; otherwise (none declared, or an
    // .npy field) the first shard gives them, and the open waits for it.
    STOKER_ASSIGN_OR_RETURN(m.fields, DeclaredTarFields(m.tar_decls, what));
  }
  m.open_store = [&m]() { return m.o.open_store ? m.o.open_store() : Store::Open(m.o.remote, m.o.store); };
  STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, m.open_store());
  // Where the fetchers run: where the caller said; else off the cores of a
  // server on this machine (core/cpu_affinity.h); else where the scheduler
  // puts them.
  m.fetcher_cpu_set = fetcher_cpus;
  m.fetcher_cpus = o.fetcher_cpus;
  m.fetcher_placement = "given";
  if (!fetcher_cpus) {
    m.fetcher_placement = "anywhere";
    if (store->ServerOnThisMachine()) {
      Result<std::vector<int>> allowed = AllowedCpus();
      const std::vector<int> beside = allowed.ok() ? CpusBesideServer(allowed.value()) : std::vector<int>();
      if (Result<cpu_set_t> set = CpuSetOf(beside, "fetcher_cpus"); set.ok()) {  // (empty: an error, left anywhere)
        m.fetcher_cpu_set = set.value();
        m.fetcher_cpus = beside;
        m.fetcher_placement = "beside the store's server";
      }
    }
  }
  if (o.shards.empty()) {
    Result<std::string> text = store->ReadAll(o.index);
    if (text.ok()) {
      STOKER_ASSIGN_OR_RETURN(m.shards, ParseShardIndex(text.value(), store->Locate(o.index)));
      if (m.shards.empty()) return Status::InvalidArgument(what + ": the index " + store->Locate(o.index) + " lists no shards");
    } else if (text.status().code() == Status::Code::kNotFound) {
      // No index (an object store): the shards are the objects of the
      // dataset's format under the prefix, by name; sizes from the listing,
      // sample counts learnt when each shard is opened.
      Result<std::vector<StoreObject>> listed = store->List();
      if (!listed.ok())
        return Status::FromCode(listed.status().code(), what + ": there is no index (" + o.index +
                                                            ") and listing the store failed: " +
                                                            listed.status().message());
      for (const StoreObject& obj : listed.value()) {
        Result<ShardFormat> f = ShardFormatOf(obj.name);
        if (f.ok() && f.value() == o.format && IsPlainShardName(obj.name)) m.shards.push_back({obj.name, obj.size});
      }
      if (m.shards.empty())
        return Status::InvalidArgument(what + ": there is no index (" + o.index + ") and none of the " +
                                       std::to_string(listed.value().size()) + " objects under " + store->url() +
                                       " is a " + (o.format == ShardFormat::kTar ? ".tar" : ".tfrecord") + " shard");
    } else {
      return text.status();
    }
  } else {
    m.shards = o.shards;
    for (const ShardInfo& s : m.shards)
      if (!IsPlainShardName(s.name)) return Status::InvalidArgument(what + ": shard name '" + s.name + "' must be a plain file name");
  }
  for (uint32_t i = 0; i < m.shards.size(); ++i) {
    const ShardInfo& s = m.shards[i];
    if (!m.by_name.emplace(s.name, i).second) return Status::InvalidArgument(what + ": shard '" + s.name + "' is listed twice");
    if (s.size > o.max_bytes && o.mode == StreamingMode::kCached)  // (kFull streams it through memory)
      return Status::InvalidArgument(what + ": shard " + s.name + " (" + std::to_string(s.size) +
                                     " bytes) is larger than max_bytes (" + std::to_string(o.max_bytes) + ")");
    if (o.mode == StreamingMode::kFull && !s.has_samples)
      return Status::InvalidArgument(what + ": mode 'full' (the default) needs every shard's number of samples in "
                                     "the index, and " + s.name + " has none: write the index with `stoker index "
                                     "DIR` (its 4th column), or use mode 'cached' (each epoch: the shards cached "
                                     "when it begins)");
    m.max_shard = std::max(m.max_shard, s.size);
    m.remote_bytes += s.size;
  }
  if (o.mode == StreamingMode::kFull && o.stream_buffers && o.stream_buffers <= o.shuffle_window)
    return Status::InvalidArgument(what + ": stream_buffers (" + std::to_string(o.stream_buffers) +
                                   ") must be more than shuffle_window (" + std::to_string(o.shuffle_window) +
                                   "): the readers hold a window of shards at once");
  STOKER_ASSIGN_OR_RETURN(m.cache, ShardCache::Open(o.local, o.max_bytes, o.eviction, m.shards, o.durable));
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
  m.fetchers = o.fetchers ? o.fetchers : store->PreferredConnections();
  if (!o.fetchers)  // from the store's preference, up to 4 times that (at most 32) where more help
    m.scaling = std::make_unique<FetcherScaling>(m.fetchers, std::min(32u, 4 * m.fetchers));
  for (uint32_t i = 0; i < m.fetchers; ++i) {
    STOKER_ASSIGN_OR_RETURN(std::unique_ptr<Store> s, m.open_store());
    stores.push_back(std::move(s));
  }
  if (o.mode == StreamingMode::kFull) {
    // Where some shards will stream through memory, a pool too large for
    // this process's memory is an error here; its buffers are made as the
    // fetchers need them (an open that made and filled them all cost as
    // much as streaming a gigabyte).
    const bool streams = m.remote_bytes > o.max_bytes;
    STOKER_RETURN_IF_ERROR(m.buffers.Configure(
        {m.max_shard, o.stream_buffers, o.shuffle_window, m.fetchers, !HostReclaimsFreeMemory()}, streams,
        m.Describe()));
  }
  std::shared_ptr<StreamingDataset> d(new StreamingDataset(std::move(impl)));
  d->set_on_error(o.on_error);
  for (auto& s : stores) STOKER_RETURN_IF_ERROR(d->impl_->StartFetcher(std::move(s)));
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
  STOKER_ASSIGN_OR_RETURN(ShardSlot* s, impl_->Ready(ep, index));
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
  STOKER_ASSIGN_OR_RETURN(ShardSlot* s, impl_->Ready(ep, index));
  const uint64_t local = index - s->first;
  if (local >= s->data->size()) return Read(index, nullptr);  // the same error (and bookkeeping)
  return s->data->SampleBytes(local, bytes);
}

Status StreamingDataset::BeginEpoch(uint64_t epoch) {
  SetEpoch(epoch);
  return impl_->BeginEpoch(epoch);
}

std::vector<int64_t> StreamingDataset::Order(const OrderRecipe& o) { return impl_->Order(o); }
std::vector<int64_t> StreamingDataset::GlobalOrder(const OrderRecipe& o) { return impl_->GlobalOrder(o); }
std::vector<int64_t> StreamingDataset::OrderAs(std::vector<int64_t> mine) { return impl_->Plan(std::move(mine)); }

void StreamingDataset::Interrupt() {
  std::lock_guard<std::mutex> g(impl_->mu);
  ++impl_->interrupts;
  impl_->cv.notify_all();
}

std::string StreamingDataset::EpochState() const {
  if (impl_->o.mode != StreamingMode::kCached) return "";
  std::string out;
  for (const std::string& n : epoch_shards()) out += n + "\n";
  return out;
}

Status StreamingDataset::RestoreEpoch(const std::string& state) {
  if (state.empty()) return Status::OK();
  if (impl_->o.mode != StreamingMode::kCached)
    return Status::InvalidArgument(Describe() + ": the saved state lists the shards of a dataset in mode 'cached'; this one is 'full'");
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
    s.epoch_shards_left_out = m.shards.size() - ep->slots.size();
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
  s.shards_left_out = m.shards_left_out;
  s.hits = m.HitsLocked();
  s.downloads = m.DownloadsLocked();
  s.streamed = m.streamed;
  s.stream_buffer_bytes = m.buffers.bytes();
  s.stream_buffers = m.buffers.count();
  s.stream_huge_pages = m.buffers.huge_pages();
  s.prefetches_dropped = m.prefetches_dropped;
  s.hit_rate = s.hits + s.downloads ? static_cast<double>(s.hits) / static_cast<double>(s.hits + s.downloads) : 0;
  s.bytes_downloaded = m.BytesDownloadedLocked();
  s.fetch_seconds = m.busy_s + (m.downloading ? MonotonicNanos() * 1e-9 - m.busy_since : 0);
  s.fetch_bytes_per_s = s.fetch_seconds > 0 ? static_cast<double>(s.bytes_downloaded) / s.fetch_seconds : 0;
  s.shards_in_flight = static_cast<uint64_t>(m.downloading);
  s.bytes_in_flight = m.bytes_in_flight;
  s.evictions = m.cache->evictions();
  s.verified_shards = m.cache->verified();
  s.torn_shards = m.cache->torn();
  s.fetchers = m.fetchers;
  s.fetchers_auto = m.scaling != nullptr;
  s.fetchers_most = m.scaling ? m.scaling->most() : m.fetchers;
  s.fetchers_tried = m.scaling ? m.scaling->tries() : 0;
  s.fetchers_by_caller = m.by_caller;
  s.fetcher_cpus = m.fetcher_cpus;
  s.fetcher_placement = m.fetcher_placement;
  s.requests = m.store_requests;
  s.retries = m.store_retries;
  s.bytes_in_place = m.store_bytes_in_place;
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
