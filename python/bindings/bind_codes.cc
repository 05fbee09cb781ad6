// The codes that cross between C++ and Python as plain ints, bound as
// Python IntEnums (stoker._native re-exports them): task kinds and ring
// messages (shm/arena_layout.h), slot results, publish modes and outcomes
// (glue/py_loader.h), the Pump's codes (glue/py_pump.h).  The hot paths
// still pass ints; an IntEnum member compares equal to its int.
// Registration only.
#include <pybind11/native_enum.h>
#include <pybind11/pybind11.h>

#include "glue/py_loader.h"
#include "glue/py_pump.h"
#include "shm/arena_layout.h"
#include "shm/batch_format.h"

namespace py = pybind11;

namespace stoker::glue {

void BindCodes(py::module_& m) {
  py::native_enum<TaskKind>(m, "TaskKind", "enum.IntEnum")
      .value("INDICES", TaskKind::kIndices)
      .value("PICKLED_INDEX", TaskKind::kPickledIndex)
      .value("ITER_BATCH", TaskKind::kIterBatch)
      .value("ITER_ITEM", TaskKind::kIterItem)
      .value("INDEX", TaskKind::kIndex)
      .finalize();
  py::native_enum<TaskMsg>(m, "TaskMsg", "enum.IntEnum")
      .value("FILL", TaskMsg::kFill)
      .value("RESUME", TaskMsg::kResume)
      .finalize();
  py::native_enum<SlotResult>(m, "SlotResult", "enum.IntEnum")
      .value("OK", SlotResult::kOk)
      .value("ERROR", SlotResult::kError)
      .value("STOP_ITERATION", SlotResult::kStopIteration)
      .value("CANCELLED", SlotResult::kCancelled)
      .value("NATIVE_ERROR", SlotResult::kNativeError)
      .finalize();
  py::native_enum<PublishMode>(m, "PublishMode", "enum.IntEnum")
      .value("COLLATE", PublishMode::kCollate)
      .value("PRESERVE", PublishMode::kPreserve)
      .finalize();
  py::native_enum<PublishOutcome>(m, "PublishOutcome", "enum.IntEnum")
      .value("FALLBACK", PublishOutcome::kFallback)
      .value("PUBLISHED", PublishOutcome::kPublished)
      .value("CANCELLED", PublishOutcome::kCancelled)
      .finalize();
  // The element types' names, in DType's order (shm/batch_format.h): the
  // torch and numpy dtypes stoker._native registers.
  py::tuple names(static_cast<size_t>(DType::kNumDTypes));
  for (size_t i = 0; i < names.size(); ++i) names[i] = DTypeName(static_cast<DType>(i));
  m.attr("DTYPE_NAMES") = names;
  py::native_enum<PumpCode>(m, "PumpCode", "enum.IntEnum")
      .value("BATCH", PumpCode::kBatch)
      .value("ERROR", PumpCode::kError)
      .value("WORKER_EXIT", PumpCode::kWorkerExit)
      .value("END", PumpCode::kEnd)
      .value("TIMEOUT", PumpCode::kTimeout)
      .value("BATCH_FLAGGED", PumpCode::kBatchFlagged)
      .finalize();
}

}  // namespace stoker::glue
