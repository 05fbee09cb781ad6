// Binds stoker::Store (include/stoker/store.h).  Registration only.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <map>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/unique_fd.h"
#include "cache/shard_cache.h"
#include "glue/errors.h"
#include "glue/py_pump.h"
#include "glue/remote_stores.h"
#include "glue/options.h"
#include "shm/batch_format.h"
#include "stoker/shard_index.h"
#include "stoker/store.h"
#include "stoker/streaming.h"

namespace py = pybind11;

namespace stoker::glue {

namespace {

py::tuple ShardTuple(const ShardInfo& s) {
  return py::make_tuple(s.name, s.size, s.has_crc ? py::cast(s.crc32c) : py::none(),
                        s.has_samples ? py::cast(s.samples) : py::none());
}

ShardInfo ShardFromTuple(const py::handle& t) {
  py::tuple tt = py::reinterpret_borrow<py::tuple>(t);
  if (tt.size() < 2 || tt.size() > 4)
    Throw(Status::InvalidArgument("a shard is (name, size[, crc32c[, samples]]), got a tuple of " +
                                  std::to_string(tt.size())));
  ShardInfo s;
  s.name = tt[0].cast<std::string>();
  s.size = tt[1].cast<uint64_t>();
  if (tt.size() > 2 && !tt[2].is_none()) s.crc32c = tt[2].cast<uint32_t>(), s.has_crc = true;
  if (tt.size() > 3 && !tt[3].is_none()) s.samples = tt[3].cast<uint64_t>(), s.has_samples = true;
  return s;
}

py::dict StatsDict(const StreamingStats& s) {
  py::dict d;
  d["epoch"] = s.epoch;
  d["epoch_shards"] = s.epoch_shards;
  d["epoch_samples"] = s.epoch_samples;
  d["epoch_shards_left_out"] = s.epoch_shards_left_out;
  d["shards_left_out"] = s.shards_left_out;
  d["cached_shards"] = s.cached_shards;
  d["cached_bytes"] = s.cached_bytes;
  d["used_bytes"] = s.used_bytes;
  d["max_bytes"] = s.max_bytes;
  d["hits"] = s.hits;
  d["downloads"] = s.downloads;
  d["streamed"] = s.streamed;
  d["stream_buffer_bytes"] = s.stream_buffer_bytes;
  d["stream_buffers"] = s.stream_buffers;
  d["stream_huge_pages"] = s.stream_huge_pages;
  d["prefetches_dropped"] = s.prefetches_dropped;
  d["hit_rate"] = s.hit_rate;
  d["bytes_downloaded"] = s.bytes_downloaded;
  d["fetch_seconds"] = s.fetch_seconds;
  d["fetch_bytes_per_s"] = s.fetch_bytes_per_s;
  d["shards_in_flight"] = s.shards_in_flight;
  d["bytes_in_flight"] = s.bytes_in_flight;
  d["evictions"] = s.evictions;
  d["verified_shards"] = s.verified_shards;
  d["torn_shards"] = s.torn_shards;
  d["fetchers"] = s.fetchers;
  d["fetchers_auto"] = s.fetchers_auto;
  d["fetchers_most"] = s.fetchers_most;
  d["fetchers_tried"] = s.fetchers_tried;
  d["fetcher_cpus"] = s.fetcher_cpus;
  d["fetcher_placement"] = s.fetcher_placement;
  d["requests"] = s.requests;
  d["retries"] = s.retries;
  d["bytes_in_place"] = s.bytes_in_place;
  d["remote_shards"] = s.remote_shards;
  d["remote_bytes"] = s.remote_bytes;
  d["seen_shards"] = s.seen_shards;
  d["seen_bytes"] = s.seen_bytes;
  d["fraction_seen"] = s.fraction_seen;
  d["fetch_errors"] = s.fetch_errors;
  d["last_fetch_error"] = s.last_fetch_error;
  return d;
}

// An s3:// store's options, by boto3's names: the one list of them.
S3Options S3FromMap(const std::map<std::string, std::string>& m) {
  static const std::pair<const char*, std::string S3Options::*> kKeys[] = {
      {"endpoint_url", &S3Options::endpoint},           {"region_name", &S3Options::region},
      {"profile_name", &S3Options::profile},            {"aws_access_key_id", &S3Options::access_key_id},
      {"aws_secret_access_key", &S3Options::secret_access_key}, {"aws_session_token", &S3Options::session_token}};
  S3Options o;
  for (const auto& [k, v] : m) {
    const auto* key = std::find_if(std::begin(kKeys), std::end(kKeys), [&](const auto& e) { return k == e.first; });
    if (key == std::end(kKeys)) {
      std::string names;
      for (const auto& e : kKeys) names += std::string(names.empty() ? "" : ", ") + e.first;
      Throw(Status::InvalidArgument("storage_options has no key '" + k + "'; the keys are " + names));
    }
    o.*(key->second) = v;
  }
  return o;
}

}  // namespace

void BindCache(py::module_& m) {
  py::class_<Store>(m, "Store")
      .def(py::init([](const std::string& url, int attempts, double backoff_s, double max_backoff_s,
                       double connect_timeout_s, double stall_timeout_s, bool receive_in_place,
                       const std::map<std::string, std::string>& storage_options) {
             StoreOptions o{attempts, backoff_s, max_backoff_s, connect_timeout_s, stall_timeout_s, receive_in_place,
                            S3FromMap(storage_options)};
             Check(LoadRemoteStoresFor(url));
             return Check(Store::Open(url, o)).release();
           }),
           py::arg("url"), py::arg("attempts") = 5, py::arg("backoff_s") = 0.1, py::arg("max_backoff_s") = 5.0,
           py::arg("connect_timeout_s") = 10.0, py::arg("stall_timeout_s") = 30.0, py::arg("receive_in_place") = true,
           py::arg("storage_options") = std::map<std::string, std::string>{})
      // [(name, size)] of the objects directly under the store's root (S3).
      .def("list", [](Store& s) {
             Result<std::vector<StoreObject>> r = [&] { py::gil_scoped_release nogil; return s.List(); }();
             py::list out;
             for (const StoreObject& o : Check(std::move(r))) out.append(py::make_tuple(o.name, o.size));
             return out; })
      .def_property_readonly("url", &Store::url)
      .def("locate", &Store::Locate)
      .def("size", [](Store& s, const std::string& name) {
             Result<uint64_t> r = [&] { py::gil_scoped_release nogil; return s.Size(name); }();
             return Check(std::move(r)); })
      .def("read", [](Store& s, const std::string& name, uint64_t offset, uint64_t n) {
             std::string buf(n, '\0');
             Status st;
             {
               py::gil_scoped_release nogil;
               st = s.Read(name, offset, n, buf.data());
             }
             Check(st);
             return py::bytes(buf); })
      .def("read_all", [](Store& s, const std::string& name) {
             Result<std::string> r = [&] { py::gil_scoped_release nogil; return s.ReadAll(name); }();
             return py::bytes(Check(std::move(r))); })
      // Appends `name` to the file at `path` from its current size on
      // (resuming a partial download); returns the object's size.
      .def("download", [](Store& s, const std::string& name, const std::string& path, uint64_t expected) {
             UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
             if (!fd.valid()) Throw(Status::IOError("open " + path, errno));
             uint64_t bytes = 0;
             Status st;
             {
               py::gil_scoped_release nogil;
               st = s.Download(name, fd.get(), expected, &bytes);
             }
             Check(st);
             return bytes; },
           py::arg("name"), py::arg("path"), py::arg("expected_size") = 0)
      .def_property_readonly("requests", &Store::requests)
      .def_property_readonly("retries", &Store::retries)
      .def_property_readonly("bytes_received", &Store::bytes_received)
      .def_property_readonly("bytes_in_place", &Store::bytes_in_place);

  py::class_<ShardCache::Pin>(m, "ShardPin")
      .def_property_readonly("path", &ShardCache::Pin::path)
      .def("release", [](ShardCache::Pin& p) { p = ShardCache::Pin(); });

  py::class_<ShardCache>(m, "ShardCache")
      .def(py::init([](const std::string& dir, uint64_t max_bytes, bool durable) {
             return Check(ShardCache::Open(dir, max_bytes, EvictionOrder::kLeastRecentlyUsed, {}, durable)).release(); }),
           py::arg("dir"), py::arg("max_bytes"), py::arg("durable") = false)
      // -> a ShardPin (the shard is not evicted until it is released)
      .def("fetch", [](ShardCache& c, Store& store, const std::string& name, uint64_t size, py::object crc) {
             ShardInfo s{name, size, 0, !crc.is_none()};
             if (!crc.is_none()) s.crc32c = crc.cast<uint32_t>();
             Result<ShardCache::Pin> r = [&] { py::gil_scoped_release nogil; return c.Fetch(store, s); }();
             return Check(std::move(r)); },
           py::arg("store"), py::arg("name"), py::arg("size"), py::arg("crc32c") = py::none())
      .def("is_cached", [](ShardCache& c, const std::string& name, uint64_t size) {
             return c.IsCached(ShardInfo{name, size, 0, false}); })
      .def("used_bytes", [](ShardCache& c) { return Check(c.UsedBytes()); })
      .def_property_readonly("max_bytes", &ShardCache::max_bytes)
      .def_property_readonly("downloads", &ShardCache::downloads)
      .def_property_readonly("hits", &ShardCache::hits)
      .def_property_readonly("evictions", &ShardCache::evictions)
      .def_property_readonly("verified", &ShardCache::verified)
      .def_property_readonly("torn", &ShardCache::torn)
      .def_property_readonly("bytes_downloaded", &ShardCache::bytes_downloaded);

  m.def("parse_shard_index", [](const std::string& text, const std::string& where) {
    py::list out;
    for (const ShardInfo& s : Check(ParseShardIndex(text, where))) out.append(ShardTuple(s));
    return out;
  });
  m.def("format_shard_index", [](const py::list& shards) {
    std::vector<ShardInfo> v;
    for (py::handle t : shards) v.push_back(ShardFromTuple(t));
    return FormatShardIndex(v);
  });
  m.def("describe_shard", [](const std::string& path, const std::string& format) {
    const ShardFormat f = ParseShardFormat(format);
    Result<ShardInfo> r = [&] { py::gil_scoped_release nogil; return DescribeShard(path, f); }();
    return ShardTuple(Check(std::move(r)));
  });

  // StreamingOptions (include/stoker/streaming.h), field by field; the
  // strings become the core's enums here (errors name the option).
  py::class_<StreamingOptions>(m, "StreamingOptions")
      .def(py::init<>())
      .def_readwrite("remote", &StreamingOptions::remote)
      .def_readwrite("local", &StreamingOptions::local)
      .def_readwrite("max_bytes", &StreamingOptions::max_bytes)
      .def_property("mode", [](const StreamingOptions& o) { return o.mode == StreamingMode::kFull ? "full" : "cached"; },
                    [](StreamingOptions& o, const std::string& mode) {
                      if (mode == "cached") o.mode = StreamingMode::kCached;
                      else if (mode == "full") o.mode = StreamingMode::kFull;
                      else Throw(Status::InvalidArgument("mode='" + mode + "' is not one of 'full', 'cached'"));
                    })
      .def_property("eviction", [](const StreamingOptions& o) { return o.eviction == EvictionOrder::kOldest ? "oldest" : "lru"; },
                    [](StreamingOptions& o, const std::string& eviction) {
                      if (eviction == "oldest") o.eviction = EvictionOrder::kOldest;
                      else if (eviction == "lru") o.eviction = EvictionOrder::kLeastRecentlyUsed;
                      else Throw(Status::InvalidArgument("eviction='" + eviction + "' is not one of 'oldest', 'lru'"));
                    })
      .def_property("shards", [](const StreamingOptions& o) {
                      py::list out;
                      for (const ShardInfo& s : o.shards) out.append(ShardTuple(s));
                      return out; },
                    [](StreamingOptions& o, const py::iterable& rows) {
                      o.shards.clear();
                      for (py::handle t : rows) o.shards.push_back(ShardFromTuple(t));
                    })
      .def_readwrite("index", &StreamingOptions::index)
      .def_property("format", [](const StreamingOptions& o) { return o.format == ShardFormat::kTFRecord ? "tfrecord" : "tar"; },
                    [](StreamingOptions& o, const std::string& f) { o.format = ParseShardFormat(f); })
      .def_property("features", nullptr, [](StreamingOptions& o, const FeatureArgs& f) { o.features = FeatureSpecs(f); })
      .def_property("tar_fields", nullptr, [](StreamingOptions& o, const TarFieldArgs& f) { o.tar_fields = TarDecls(f); })
      .def_property("on_error", [](const StreamingOptions& o) { return o.on_error == OnError::kSkip ? "skip" : "raise"; },
                    [](StreamingOptions& o, const std::string& e) { o.on_error = ParseOnError(e); })
      .def_readwrite("durable", &StreamingOptions::durable)
      .def_readwrite("fetchers", &StreamingOptions::fetchers)
      .def_readwrite("fetcher_cpus", &StreamingOptions::fetcher_cpus)
      .def_readwrite("prefetch", &StreamingOptions::prefetch)
      .def_readwrite("stream_buffers", &StreamingOptions::stream_buffers)
      .def_readwrite("shuffle_window", &StreamingOptions::shuffle_window)
      .def_readwrite("min_shards", &StreamingOptions::min_shards)
      .def_readwrite("fetch_seed", &StreamingOptions::fetch_seed)
      .def_readwrite("wait_timeout_s", &StreamingOptions::wait_timeout_s)
      .def_property("attempts", [](const StreamingOptions& o) { return o.store.attempts; },
                    [](StreamingOptions& o, int v) { o.store.attempts = v; })
      .def_property("backoff_s", [](const StreamingOptions& o) { return o.store.backoff_s; },
                    [](StreamingOptions& o, double v) { o.store.backoff_s = v; })
      .def_property("max_backoff_s", [](const StreamingOptions& o) { return o.store.max_backoff_s; },
                    [](StreamingOptions& o, double v) { o.store.max_backoff_s = v; })
      .def_property("connect_timeout_s", [](const StreamingOptions& o) { return o.store.connect_timeout_s; },
                    [](StreamingOptions& o, double v) { o.store.connect_timeout_s = v; })
      .def_property("stall_timeout_s", [](const StreamingOptions& o) { return o.store.stall_timeout_s; },
                    [](StreamingOptions& o, double v) { o.store.stall_timeout_s = v; })
      .def_property("storage_options", nullptr, [](StreamingOptions& o, const std::map<std::string, std::string>& m) {
                      o.store.s3 = S3FromMap(m); });

  py::class_<StreamingDataset, NativeDataset, std::shared_ptr<StreamingDataset>>(m, "StreamingDataset")
      .def_static("open", [](const StreamingOptions& o) {
             Check(LoadRemoteStoresFor(o.remote));
             Result<std::shared_ptr<StreamingDataset>> r = [&] { py::gil_scoped_release nogil; return StreamingDataset::Open(o); }();
             return Check(std::move(r)); })
      // A worker process's reader of a full-mode dataset (its shards in o.shards).
      .def_static("open_reader", [](const StreamingOptions& o) {
             Check(LoadRemoteStoresFor(o.remote));
             Result<std::shared_ptr<NativeDataset>> r = [&] { py::gil_scoped_release nogil; return StreamingDataset::OpenReader(o); }();
             return Check(std::move(r)); })
      .def("begin_epoch", [](StreamingDataset& d, uint64_t epoch) {
             Status st = [&] { py::gil_scoped_release nogil; return d.BeginEpoch(epoch); }();
             Check(st); })
      // This rank's order of the current epoch (an EpochOrder).
      .def("order", [](StreamingDataset& d, uint64_t epoch, bool shuffle, uint64_t seed, uint32_t rank,
                       uint32_t world_size, bool pad) {
             std::vector<int64_t> v = d.Order(SampleOrder{epoch, shuffle, seed, rank, world_size, pad});
             return EpochOrderHandle{std::make_shared<VectorOrder>(std::move(v)), nullptr}; })
      .def("use_shards", &StreamingDataset::UseShards)
      .def_property_readonly("epoch_shards", &StreamingDataset::epoch_shards)
      .def_property_readonly("remote_shards", [](StreamingDataset& d) {
             py::list out;
             for (const ShardInfo& s : d.remote_shards()) out.append(ShardTuple(s));
             return out; })
      .def_property_readonly("mode", [](StreamingDataset& d) { return d.mode() == StreamingMode::kFull ? "full" : "cached"; })
      .def("stats", [](StreamingDataset& d) {
             StreamingStats s = [&] { py::gil_scoped_release nogil; return d.stats(); }();
             return StatsDict(s); })
      .def("close", &StreamingDataset::Close, py::call_guard<py::gil_scoped_release>());
}

}  // namespace stoker::glue
