// Python conversions for src/shared/ (StringList, SharedBlock).
//
// REQUIRES: the GIL.
#ifndef STOKER_PY_SHARED_H_
#define STOKER_PY_SHARED_H_

#include <Python.h>

#include <string>
#include <utility>

#include "shared/string_list.h"
#include "stoker/shared_lock.h"

namespace stoker::glue {

// Builds a sealed StringList block from any iterable of str.  Returns
// nullptr with TypeError (naming the position and type) for a non-str item.
std::shared_ptr<SharedBlock> BuildStringList(PyObject* iterable, const std::string& name);
// list[key] for an int (negative counts from the end) or a slice (a list).
PyObject* StringListGetItem(const StringListView& v, PyObject* key);
// Takes `lock` within timeout_s (< 0: no limit; 0: only if free), waiting
// without the GIL (the holder may be another thread of this process) in
// slices between which Python's signal handlers run: Ctrl-C ends a wait for
// a lock that is never let go.  Returns (acquired, previous owner died), or
// what Lock reported besides a timeout; *raised is set instead, with the
// Python error set, when a signal handler raised (KeyboardInterrupt).
Result<std::pair<bool, bool>> AcquireSharedLock(SharedLock& lock, double timeout_s, bool* raised);

}  // namespace stoker::glue

#endif  // STOKER_PY_SHARED_H_
