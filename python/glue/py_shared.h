// Python conversions for src/shared/ (StringList, SharedBlock).
//
// REQUIRES: the GIL.
#ifndef STOKER_PY_SHARED_H_
#define STOKER_PY_SHARED_H_

#include <Python.h>

#include <string>

#include "shared/string_list.h"

namespace stoker::glue {

// Builds a sealed StringList block from any iterable of str.  Returns
// nullptr with TypeError (naming the position and type) for a non-str item.
std::shared_ptr<SharedBlock> BuildStringList(PyObject* iterable, const std::string& name);
// list[key] for an int (negative counts from the end) or a slice (a list).
PyObject* StringListGetItem(const StringListView& v, PyObject* key);

}  // namespace stoker::glue

#endif  // STOKER_PY_SHARED_H_
