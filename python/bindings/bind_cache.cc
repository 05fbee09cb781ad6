// Binds stoker::Store (include/stoker/store.h).  Registration only.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <pybind11/pybind11.h>

#include "core/unique_fd.h"
#include "glue/errors.h"
#include "cache/shard_cache.h"
#include "stoker/store.h"

namespace py = pybind11;

namespace stoker::glue {

void BindCache(py::module_& m) {
  py::class_<Store>(m, "Store")
      .def(py::init([](const std::string& url, int attempts, double backoff_s, double max_backoff_s,
                       double connect_timeout_s, double stall_timeout_s) {
             StoreOptions o{attempts, backoff_s, max_backoff_s, connect_timeout_s, stall_timeout_s};
             return Check(Store::Open(url, o)).release();
           }),
           py::arg("url"), py::arg("attempts") = 5, py::arg("backoff_s") = 0.1, py::arg("max_backoff_s") = 5.0,
           py::arg("connect_timeout_s") = 10.0, py::arg("stall_timeout_s") = 30.0)
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
    for (const ShardInfo& s : Check(ParseShardIndex(text, where)))
      out.append(py::make_tuple(s.name, s.size, s.has_crc ? py::cast(s.crc32c) : py::none()));
    return out;
  });
}

}  // namespace stoker::glue
