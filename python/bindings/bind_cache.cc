// Binds stoker::Store (include/stoker/store.h).  Registration only.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/unique_fd.h"
#include "cache/shard_cache.h"
#include "glue/errors.h"
#include "glue/py_pump.h"
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
  d["cached_shards"] = s.cached_shards;
  d["cached_bytes"] = s.cached_bytes;
  d["used_bytes"] = s.used_bytes;
  d["max_bytes"] = s.max_bytes;
  d["hits"] = s.hits;
  d["downloads"] = s.downloads;
  d["streamed"] = s.streamed;
  d["stream_buffer_bytes"] = s.stream_buffer_bytes;
  d["prefetches_dropped"] = s.prefetches_dropped;
  d["hit_rate"] = s.hit_rate;
  d["bytes_downloaded"] = s.bytes_downloaded;
  d["fetch_seconds"] = s.fetch_seconds;
  d["fetch_bytes_per_s"] = s.fetch_bytes_per_s;
  d["shards_in_flight"] = s.shards_in_flight;
  d["bytes_in_flight"] = s.bytes_in_flight;
  d["evictions"] = s.evictions;
  d["remote_shards"] = s.remote_shards;
  d["remote_bytes"] = s.remote_bytes;
  d["seen_shards"] = s.seen_shards;
  d["seen_bytes"] = s.seen_bytes;
  d["fraction_seen"] = s.fraction_seen;
  d["fetch_errors"] = s.fetch_errors;
  d["last_fetch_error"] = s.last_fetch_error;
  return d;
}

}  // namespace

void BindCache(py::module_& m) {
  py::class_<Store>(m, "Store")
      .def(py::init([](const std::string& url, int attempts, double backoff_s, double max_backoff_s,
                       double connect_timeout_s, double stall_timeout_s, bool receive_in_place) {
             StoreOptions o{attempts, backoff_s, max_backoff_s, connect_timeout_s, stall_timeout_s, receive_in_place};
             return Check(Store::Open(url, o)).release();
           }),
           py::arg("url"), py::arg("attempts") = 5, py::arg("backoff_s") = 0.1, py::arg("max_backoff_s") = 5.0,
           py::arg("connect_timeout_s") = 10.0, py::arg("stall_timeout_s") = 30.0, py::arg("receive_in_place") = true)
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
      .def_property_readonly("bytes_received", &Store::bytes_received);

  py::class_<ShardCache::Pin>(m, "ShardPin")
      .def_property_readonly("path", &ShardCache::Pin::path)
      .def("release", [](ShardCache::Pin& p) { p = ShardCache::Pin(); });

  py::class_<ShardCache>(m, "ShardCache")
      .def(py::init([](const std::string& dir, uint64_t max_bytes) {
             return Check(ShardCache::Open(dir, max_bytes)).release(); }),
           py::arg("dir"), py::arg("max_bytes"))
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

  py::class_<StreamingDataset, NativeDataset, std::shared_ptr<StreamingDataset>>(m, "StreamingDataset")
      .def_static("open", [](const std::string& remote, const std::string& local, uint64_t max_bytes,
                             const std::string& mode, const std::string& eviction, const py::object& shards,
                             const std::string& index, const std::string& format, const FeatureArgs& features,
                             const TarFieldArgs& tar_fields,
                             const std::string& on_error, uint32_t fetchers, const std::vector<int>& fetcher_cpus,
                             uint32_t prefetch, uint32_t stream_buffers, uint32_t shuffle_window,
                             uint32_t min_shards, uint64_t fetch_seed, double wait_timeout_s, int attempts,
                             double backoff_s, double max_backoff_s, double connect_timeout_s, double stall_timeout_s) {
             StreamingOptions o;
             o.remote = remote;
             o.local = local;
             o.max_bytes = max_bytes;
             if (mode == "growing") o.mode = StreamingMode::kGrowing;
             else if (mode == "full") o.mode = StreamingMode::kFull;
             else Throw(Status::InvalidArgument("mode='" + mode + "' is not one of 'growing', 'full'"));
             if (eviction == "oldest") o.eviction = EvictionOrder::kOldest;
             else if (eviction == "lru") o.eviction = EvictionOrder::kLeastRecentlyUsed;
             else Throw(Status::InvalidArgument("eviction='" + eviction + "' is not one of 'oldest', 'lru'"));
             if (!shards.is_none())
               for (py::handle t : shards) o.shards.push_back(ShardFromTuple(t));
             o.index = index;
             o.format = ParseShardFormat(format);
             o.features = FeatureSpecs(features);
             o.tar_fields = TarDecls(tar_fields);
             o.on_error = ParseOnError(on_error);
             o.fetchers = fetchers;
             o.fetcher_cpus = fetcher_cpus;
             o.prefetch = prefetch;
             o.stream_buffers = stream_buffers;
             o.shuffle_window = shuffle_window;
             o.min_shards = min_shards;
             o.fetch_seed = fetch_seed;
             o.wait_timeout_s = wait_timeout_s;
             o.store = StoreOptions{attempts, backoff_s, max_backoff_s, connect_timeout_s, stall_timeout_s};
             Result<std::shared_ptr<StreamingDataset>> r = [&] { py::gil_scoped_release nogil; return StreamingDataset::Open(o); }();
             return Check(std::move(r)); })
      .def("begin_epoch", [](StreamingDataset& d, uint64_t epoch) {
             Status st = [&] { py::gil_scoped_release nogil; return d.BeginEpoch(epoch); }();
             Check(st); })
      // This rank's order of the current epoch (an EpochOrder).
      .def("order", [](StreamingDataset& d, uint64_t epoch, bool shuffle, uint64_t seed, uint32_t rank,
                       uint32_t world_size, bool pad) {
             std::vector<int64_t> v = d.Order(SampleOrder{epoch, shuffle, seed, rank, world_size, pad});
             return EpochOrderHandle{std::make_shared<const std::vector<int64_t>>(std::move(v))}; })
      .def("use_shards", &StreamingDataset::UseShards)
      .def_property_readonly("epoch_shards", &StreamingDataset::epoch_shards)
      .def_property_readonly("remote_shards", [](StreamingDataset& d) {
             py::list out;
             for (const ShardInfo& s : d.remote_shards()) out.append(ShardTuple(s));
             return out; })
      .def_property_readonly("mode", [](StreamingDataset& d) { return d.mode() == StreamingMode::kFull ? "full" : "growing"; })
      .def("stats", [](StreamingDataset& d) {
             StreamingStats s = [&] { py::gil_scoped_release nogil; return d.stats(); }();
             return StatsDict(s); })
      .def("close", &StreamingDataset::Close, py::call_guard<py::gil_scoped_release>());
}

}  // namespace stoker::glue
