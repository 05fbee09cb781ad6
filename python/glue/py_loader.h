// Conversions between the loader's C++ types and Python objects, kept out of
// the bind_*.cc files so those stay registration-only.
//
// REQUIRES: the GIL, except where a function says it releases it.
#ifndef STOKER_PY_LOADER_H_
#define STOKER_PY_LOADER_H_

#include <Python.h>

#include <memory>
#include <vector>

#include "loader/engine.h"
#include "loader/worker_port.h"

namespace stoker::glue {

enum class PublishMode { kCollate = 0, kPreserve = 1 };
// What PublishBatch did (-1 on a Python error).
enum class PublishOutcome { kFallback = 0, kPublished = 1, kCancelled = 2 };

// Engine (main process) -----------------------------------------------------

// Collates (or preserves) `obj` into a fresh slot of an in-process engine and
// decodes it.  Returns nullptr without an error set when the caller must fall
// back to Python's default_collate (collate mode only).  When the training
// loop holds the whole budget the batch is built in private memory instead.
PyObject* FillLocal(const std::shared_ptr<Engine>& e, PyObject* obj, PublishMode mode, bool numpy_mode);
// Engine::Stats as a dict (see docs/memory.md for the keys).
PyObject* StatsDict(Engine& e, bool process_memory);

// WorkerPort (worker process) -----------------------------------------------

// Next task as (msg, slot, batch_id, generation, kind, payload), or None
// once the loader is shut down.  Waits with the GIL released.
PyObject* NextTask(WorkerPort& port);
// Plans and writes `obj` into the slot and publishes it.  Returns
// kPublished, kCancelled when the main process had no room and took the task
// back (published as cancelled; it comes again), kFallback when collate mode
// needs a Python fallback, -1 on a Python error.  May wait (GIL released) for the
// main process to answer a request for a bigger region.
int PublishBatch(WorkerPort& port, uint32_t slot, PyObject* obj, PublishMode mode, bool numpy_mode);
// Publishes an error report (bytes), truncated to the region if needed.
void PublishBytes(WorkerPort& port, uint32_t slot, SlotResult result, PyObject* bytes);

}  // namespace stoker::glue

#endif  // STOKER_PY_LOADER_H_
