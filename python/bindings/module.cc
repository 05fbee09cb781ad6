// The _stoker extension module: registration only.  Each bind_*.cc binds one
// C++ module; conversions live in python/glue/.
#include <pybind11/pybind11.h>

#include "glue/py_decode.h"
#include "glue/registry.h"
#include "glue/remote_stores.h"

namespace py = pybind11;

namespace stoker::glue {
void BindCodes(pybind11::module_& m);
void BindOrder(pybind11::module_& m);
void BindEngine(pybind11::module_& m);
void BindWorker(pybind11::module_& m);
void BindScheduler(pybind11::module_& m);
void BindShared(pybind11::module_& m);
void BindProc(pybind11::module_& m);
void BindIo(pybind11::module_& m);
void BindStore(pybind11::module_& m);
void BindCache(pybind11::module_& m);
void BindStreaming(pybind11::module_& m);
void BindTrace(pybind11::module_& m);
}  // namespace stoker::glue

PYBIND11_MODULE(_stoker, m) {
  m.doc() = "stoker's native engine (see python/stoker for the public API)";
  stoker::glue::InternNames();
  if (!stoker::glue::InitHostBufferType(m.ptr())) throw py::error_already_set();
  stoker::glue::RegisterRemoteStoreSchemes();
  m.def("register", [](const char* name, py::handle obj) {
    if (!stoker::glue::RegisterObject(name, obj.ptr())) throw py::error_already_set();
  }, "Registers a Python object the native code needs (see stoker/_native.py).");
  stoker::glue::BindCodes(m);
  stoker::glue::BindOrder(m);
  stoker::glue::BindEngine(m);
  stoker::glue::BindWorker(m);
  stoker::glue::BindScheduler(m);
  stoker::glue::BindShared(m);
  stoker::glue::BindProc(m);
  stoker::glue::BindIo(m);
  stoker::glue::BindStore(m);
  stoker::glue::BindCache(m);
  stoker::glue::BindStreaming(m);
  stoker::glue::BindTrace(m);
}
