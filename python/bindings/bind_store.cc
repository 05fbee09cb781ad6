// Binds stoker::Store (include/stoker/store.h).  Registration only.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <string>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/unique_fd.h"
#include "glue/errors.h"
#include "glue/remote_stores.h"
#include "glue/store_values.h"
#include "stoker/store.h"

namespace py = pybind11;

namespace stoker::glue {

void BindStore(py::module_& m) {
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
}

}  // namespace stoker::glue
