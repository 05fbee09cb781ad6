#include "glue/py_shared.h"

#include "glue/errors.h"
#include "glue/signal_slices.h"

namespace stoker::glue {

Result<std::pair<bool, bool>> AcquireSharedLock(SharedLock& lock, double timeout_s, bool* raised) {
  *raised = false;
  bool died = false;
  if (lock.TryLock(&died)) return std::make_pair(true, died);
  if (timeout_s == 0) return std::make_pair(false, false);
  // (A robust mutex's timed wait goes on through signals: no EINTR ends it.)
  Status st;
  *raised = !WaitInSlices(timeout_s < 0 ? -1 : static_cast<int64_t>(timeout_s * 1e9), [&](int64_t slice_ns) {
    PyThreadState* ts = PyEval_SaveThread();
    st = lock.Lock(slice_ns, &died);
    PyEval_RestoreThread(ts);
    return st.IsTimeout() ? SliceEnd::kTimedOut : SliceEnd::kDone;
  });
  if (*raised || st.IsTimeout()) return std::make_pair(false, false);
  if (!st.ok()) return st;
  return std::make_pair(true, died);
}

std::shared_ptr<SharedBlock> BuildStringList(PyObject* iterable, const std::string& name) {
  PyObject* it = PyObject_GetIter(iterable);
  if (!it) return nullptr;
  StringListBuilder b;
  while (PyObject* item = PyIter_Next(it)) {
    if (!PyUnicode_Check(item)) {
      PyErr_Format(PyExc_TypeError, "StringList items must be str, but item %llu is %.200s",
                   static_cast<unsigned long long>(b.size()), Py_TYPE(item)->tp_name);
      Py_DECREF(item);
      Py_DECREF(it);
      return nullptr;
    }
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(item, &n);
    if (!s) {  // e.g. lone surrogates
      Py_DECREF(item);
      Py_DECREF(it);
      return nullptr;
    }
    b.Add(std::string_view(s, static_cast<size_t>(n)));
    Py_DECREF(item);
  }
  Py_DECREF(it);
  if (PyErr_Occurred()) return nullptr;
  Result<std::shared_ptr<SharedBlock>> block = b.Build(name);
  if (!block.ok()) {
    SetError(block.status());
    return nullptr;
  }
  return block.value();
}

namespace {
PyObject* Item(const StringListView& v, uint64_t i) {
  std::string_view s = v[i];
  return PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "strict");
}
}  // namespace

PyObject* StringListGetItem(const StringListView& v, PyObject* key) {
  const auto n = static_cast<Py_ssize_t>(v.size());
  if (PyIndex_Check(key)) {
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return nullptr;
    if (i < 0) i += n;
    if (i < 0 || i >= n) {
      PyErr_Format(PyExc_IndexError, "StringList index %zd out of range (length %zd)", i < 0 ? i - n : i, n);
      return nullptr;
    }
    return Item(v, static_cast<uint64_t>(i));
  }
  if (PySlice_Check(key)) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return nullptr;
    const Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
    PyObject* out = PyList_New(len);
    if (!out) return nullptr;
    for (Py_ssize_t k = 0, i = start; k < len; ++k, i += step) {
      PyObject* s = Item(v, static_cast<uint64_t>(i));
      if (!s) {
        Py_DECREF(out);
        return nullptr;
      }
      PyList_SET_ITEM(out, k, s);
    }
    return out;
  }
  PyErr_Format(PyExc_TypeError, "StringList indices must be integers or slices, not %.200s", Py_TYPE(key)->tp_name);
  return nullptr;
}

}  // namespace stoker::glue
