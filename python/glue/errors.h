// Status -> Python exception, the only place the core's errors become
// exceptions.
#ifndef STOKER_PY_ERRORS_H_
#define STOKER_PY_ERRORS_H_

#include <pybind11/pybind11.h>

#include "stoker/status.h"

namespace stoker::glue {

[[noreturn]] inline void Throw(const Status& s) {
  PyObject* type = PyExc_RuntimeError;
  switch (s.code()) {
    case Status::Code::kInvalidArgument: type = PyExc_ValueError; break;
    case Status::Code::kIOError: type = PyExc_OSError; break;
    case Status::Code::kResourceExhausted: type = PyExc_MemoryError; break;
    case Status::Code::kTimeout: type = PyExc_TimeoutError; break;
    default: break;
  }
  PyErr_SetString(type, ("stoker: " + s.message()).c_str());
  throw pybind11::error_already_set();
}

inline void Check(const Status& s) {
  if (!s.ok()) Throw(s);
}

template <typename T>
T Check(Result<T> r) {
  if (!r.ok()) Throw(r.status());
  return std::move(r).value();
}

}  // namespace stoker::glue

#endif  // STOKER_PY_ERRORS_H_
