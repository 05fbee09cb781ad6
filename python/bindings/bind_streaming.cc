// Binds stoker::StreamingDataset and its options (include/stoker/
// streaming.h).  Registration only.
#include <map>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "glue/errors.h"
#include "glue/options.h"
#include "glue/py_pump.h"
#include "glue/remote_stores.h"
#include "glue/store_values.h"
#include "stoker/streaming.h"

namespace py = pybind11;

namespace stoker::glue {

namespace {

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
  d["fetchers_by_caller"] = s.fetchers_by_caller;
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

}  // namespace

void BindStreaming(py::module_& m) {
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
             std::vector<int64_t> v = d.Order(OrderRecipe{epoch, shuffle, seed, rank, world_size, pad});
             return EpochOrderHandle{std::make_shared<VectorOrder>(std::move(v)), nullptr}; })
      // The current epoch's global order, before the split (an EpochOrder).
      .def("global_order", [](StreamingDataset& d, uint64_t epoch, bool shuffle, uint64_t seed) {
             std::vector<int64_t> v = d.GlobalOrder(OrderRecipe{epoch, shuffle, seed, 0, 1, true});
             return EpochOrderHandle{std::make_shared<VectorOrder>(std::move(v)), nullptr}; })
      // The current epoch read in `mine` (an EpochOrder made elsewhere), planned.
      .def("order_as", [](StreamingDataset& d, const EpochOrderHandle& mine) {
             std::vector<int64_t> v(mine.order->size());
             Status st = [&] { py::gil_scoped_release nogil; return mine.order->Read(0, v.size(), v.data()); }();
             Check(st);
             v = d.OrderAs(std::move(v));
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
      .def("set_fetchers", [](StreamingDataset& d, uint32_t n) {
             Status st = [&] { py::gil_scoped_release nogil; return d.SetFetchers(n); }();
             Check(st); })
      .def("close", &StreamingDataset::Close, py::call_guard<py::gil_scoped_release>());
}

}  // namespace stoker::glue
