// Status -> Python exception: the only place the core's errors become
// Python exceptions.
#ifndef STOKER_PY_ERRORS_H_
#define STOKER_PY_ERRORS_H_

#include <pybind11/pybind11.h>

#include "stoker/status.h"

namespace stoker::glue {

// Sets the Python error for `s` ("stoker: <message>") and returns nullptr.
inline PyObject* SetError(const Status& s) {
  PyObject* type = PyExc_RuntimeError;
  switch (s.code()) {
    case Status::Code::kInvalidArgument: type = PyExc_ValueError; break;
    case Status::Code::kDataLoss: type = PyExc_ValueError; break;
    case Status::Code::kIOError: type = PyExc_OSError; break;
    case Status::Code::kResourceExhausted: type = PyExc_MemoryError; break;
    case Status::Code::kTimeout: type = PyExc_TimeoutError; break;
    case Status::Code::kNotFound: type = PyExc_FileNotFoundError; break;
    default: break;
  }
  PyErr_SetString(type, ("stoker: " + s.message()).c_str());
  return nullptr;
}

[[noreturn]] inline void Throw(const Status& s) {
  SetError(s);
  throw pybind11::error_already_set();
}

template <typename T>
T Check(Result<T> r) {
  if (!r.ok()) Throw(r.status());
  return std::move(r).value();
}

inline void Check(const Status& s) {
  if (!s.ok()) Throw(s);
}

// Wraps a new reference from the C API; nullptr means a Python error is set.
inline pybind11::object Steal(PyObject* o) {
  if (!o) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::object>(o);
}

}  // namespace stoker::glue

#endif  // STOKER_PY_ERRORS_H_
