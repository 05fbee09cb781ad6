// For the extension modules that link their own copy of the core
// (_stoker_vision, _stoker_parquet): their stage clocks and trace points go
// to _stoker's copy (core/stage_runtime.h), handed over in a capsule.
#ifndef STOKER_GLUE_SHARED_RUNTIME_H_
#define STOKER_GLUE_SHARED_RUNTIME_H_

#include <pybind11/pybind11.h>

#include "core/stage_runtime.h"

namespace stoker::glue {

inline void UseStokersStageRuntime(const pybind11::module_& stoker_module) {
  pybind11::object cap = stoker_module.attr("stage_runtime");
  void* p = PyCapsule_GetPointer(cap.ptr(), "stoker._stoker.stage_runtime");
  if (!p) throw pybind11::error_already_set();
  UseStageRuntime(static_cast<const StageRuntime*>(p));
}

}  // namespace stoker::glue

#endif  // STOKER_GLUE_SHARED_RUNTIME_H_
