// The http(s):// and s3:// schemes of the _stoker module's Store::Open: the
// OpenRemoteStore of stoker._stoker_remote, handed over in a capsule.
#include "glue/remote_stores.h"

#include <pybind11/pybind11.h>

#include <atomic>

#include "store/remote_store.h"

namespace py = pybind11;

namespace stoker {

namespace {

std::atomic<StoreOpener> g_opener{nullptr};

Status LoadRemoteStores() {
  if (g_opener.load(std::memory_order_acquire)) return Status::OK();
  if (!Py_IsInitialized()) return Status::Internal("http(s):// and s3:// stores need the Python interpreter, which has exited");
  py::gil_scoped_acquire gil;
  try {
    py::object capsule = py::module_::import("stoker._stoker_remote").attr("open_store");
    void* f = PyCapsule_GetPointer(capsule.ptr(), "stoker._stoker_remote.open_store");
    if (!f) throw py::error_already_set();
    g_opener.store(reinterpret_cast<StoreOpener>(f), std::memory_order_release);
    return Status::OK();
  } catch (py::error_already_set& e) {
    return Status::Internal(std::string("http(s):// and s3:// stores live in the module stoker._stoker_remote "
                                        "(it links libcurl), which did not load: ") + e.what() +
                            "; reinstall stoker (pip install --force-reinstall stoker)");
  }
}

Result<std::unique_ptr<Store>> OpenThroughRemoteModule(const std::string& url, const StoreOptions& options) {
  STOKER_RETURN_IF_ERROR(LoadRemoteStores());
  return g_opener.load(std::memory_order_acquire)(url, options);
}

}  // namespace

void glue::RegisterRemoteStoreSchemes() {
  for (const char* scheme : {"http", "https", "s3"}) Store::RegisterScheme(scheme, &OpenThroughRemoteModule);
}

Status glue::LoadRemoteStoresFor(const std::string& url) {
  return IsRemoteStoreUrl(url) ? LoadRemoteStores() : Status::OK();
}

}  // namespace stoker
