// The _stoker_vision extension module: stoker.vision's JPEG and PNG decoding,
// the image pipeline and the image datasets (bind_vision.cc), apart from
// _stoker so that only a program that uses images loads libjpeg-turbo and
// libspng, and so that stoker builds and loads without them
// (-DSTOKER_VISION=OFF).  Its ImageDataset derives from the NativeDataset
// that _stoker registers, which is imported first; both modules are built by
// the same build from the same headers.
#include <pybind11/pybind11.h>

#include "glue/shared_runtime.h"

namespace stoker::glue {
void BindVision(pybind11::module_& m);
}  // namespace stoker::glue

PYBIND11_MODULE(_stoker_vision, m) {
  m.doc() = "stoker's image pipeline (see python/stoker/vision.py for the public API)";
  // (NativeDataset, ImageDataset's base; and the one stage clock per thread)
  stoker::glue::UseStokersStageRuntime(pybind11::module_::import("stoker._stoker"));
  stoker::glue::BindVision(m);
}
