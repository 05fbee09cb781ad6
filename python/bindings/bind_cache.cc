// Binds the shard cache (src/cache/shard_cache.h) and the shard index
// (include/stoker/shard_index.h).  Registration only.
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cache/shard_cache.h"
#include "glue/errors.h"
#include "glue/options.h"
#include "glue/store_values.h"
#include "stoker/shard_index.h"

namespace py = pybind11;

namespace stoker::glue {

void BindCache(py::module_& m) {
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
  // "tfrecord", "tar", or None: a shard's format from its name (the one list of extensions).
  m.def("shard_format_of", [](const std::string& name) -> py::object {
    Result<ShardFormat> f = ShardFormatOf(name);
    if (!f.ok()) return py::none();
    return py::str(f.value() == ShardFormat::kTFRecord ? "tfrecord" : "tar");
  });
  m.def("describe_shard", [](const std::string& path, const std::string& format) {
    const ShardFormat f = ParseShardFormat(format);
    Result<ShardInfo> r = [&] { py::gil_scoped_release nogil; return DescribeShard(path, f); }();
    return ShardTuple(Check(std::move(r)));
  });
}

}  // namespace stoker::glue
