// The _stoker_remote extension module: the http(s):// and s3:// stores
// (libcurl), apart from _stoker so that the loader maps libcurl only when a
// dataset streams from HTTP or S3 (src/store/remote_store.h).  It exports one
// thing, a capsule holding OpenRemoteStore, which _stoker calls
// (python/glue/remote_stores.cc); both modules are built by the same build
// from the same headers.
#include <pybind11/pybind11.h>

#include "store/remote_store.h"

namespace py = pybind11;

PYBIND11_MODULE(_stoker_remote, m) {
  m.doc() = "stoker's http(s):// and s3:// stores (used by stoker._stoker; no Python API)";
  stoker::StoreOpener open = &stoker::OpenRemoteStore;
  m.attr("open_store") = py::capsule(reinterpret_cast<void*>(open), "stoker._stoker_remote.open_store");
}
