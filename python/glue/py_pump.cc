#include "glue/py_pump.h"

#include <algorithm>
#include <cstring>

#include "glue/errors.h"
#include "glue/py_decode.h"
#include "glue/registry.h"
#include "glue/signal_slices.h"

namespace stoker::glue {

namespace {

void PutInt64(int64_t v, std::string* out) { out->append(reinterpret_cast<const char*>(&v), 8); }
}  // namespace

Status PyIndexSource::Stash() {
  for (PyObject*& o : saved_) Py_CLEAR(o);
  PyErr_Fetch(&saved_[0], &saved_[1], &saved_[2]);
  return Status::Internal("the sampler raised a Python exception");
}

bool PyIndexSource::RestoreError() {
  if (!saved_[0]) return false;
  PyErr_Restore(saved_[0], saved_[1], saved_[2]);
  saved_[0] = saved_[1] = saved_[2] = nullptr;
  return true;
}

Result<bool> PyIndexSource::Next(TaskSpec* spec) {
  PyObject* idx = PyIter_Next(iter_);
  if (!idx) {
    if (PyErr_Occurred()) return Stash();
    return false;
  }
  spec->token = reinterpret_cast<uint64_t>(idx);  // owns the reference
  if (iterable_) {
    if (auto_) {
      const Py_ssize_t n = PyObject_Length(idx);
      if (n < 0) return Stash();
      spec->kind = TaskKind::kIterBatch;
      PutInt64(n, &spec->payload);
    } else {
      spec->kind = TaskKind::kIterItem;
    }
    return true;
  }
  if (auto_ && PyList_CheckExact(idx)) {
    const Py_ssize_t n = PyList_GET_SIZE(idx);
    spec->payload.resize(static_cast<size_t>(n) * 8);
    bool ints = true;
    for (Py_ssize_t i = 0; i < n && ints; ++i) {
      PyObject* x = PyList_GET_ITEM(idx, i);
      long long v = PyLong_CheckExact(x) ? PyLong_AsLongLong(x) : (ints = false, 0);
      if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        ints = false;
      }
      std::memcpy(&spec->payload[8 * i], &v, 8);
    }
    if (ints) {
      spec->kind = TaskKind::kIndices;
      return true;
    }
    spec->payload.clear();
  } else if (!auto_ && PyLong_CheckExact(idx)) {
    long long v = PyLong_AsLongLong(idx);
    if (!(v == -1 && PyErr_Occurred())) {
      spec->kind = TaskKind::kIndex;
      PutInt64(v, &spec->payload);
      return true;
    }
    PyErr_Clear();
  }
  PyObject* data = PyObject_CallOneArg(R().dumps_plain, idx);
  if (!data) return Stash();
  spec->kind = TaskKind::kPickledIndex;
  spec->payload.assign(PyBytes_AS_STRING(data), static_cast<size_t>(PyBytes_GET_SIZE(data)));
  Py_DECREF(data);
  return true;
}

Pump::Pump(std::shared_ptr<Engine> engine, const SchedulerOptions& o, bool auto_collation, bool numpy_mode)
    : engine_(engine), source_(o.iterable, auto_collation), sched_(engine, o), numpy_(numpy_mode) {
  sched_.SetBlockingHooks([this] { saved_ = PyEval_SaveThread(); },
                          [this] { PyEval_RestoreThread(saved_); });
  // Batches the training loop dropped may only be waiting for the cyclic GC.
  sched_.SetReclaimHook([] { (void)PyGC_Collect(); });
}

void Pump::Reset(PyObject* sampler_iter, bool resume_workers) {
  runner_.Begin(&source_, resume_workers);  // (drops the tokens of the last epoch first)
  source_.SetIterator(sampler_iter);
}

void Pump::ResetOrder(EpochSource::Order order, uint64_t batch_size, bool drop_last, bool resume_workers) {
  runner_.Begin(std::move(order), batch_size, drop_last, resume_workers);
  source_.SetIterator(nullptr);
  batched_ = batch_size > 0;
}

PyObject* Pump::IndexOf(uint64_t token) {
  if (!runner_.native()) {
    PyObject* index = token ? reinterpret_cast<PyObject*>(token) : Py_None;
    Py_INCREF(index);
    return index;
  }
  const std::vector<int64_t> idx = runner_.source().BatchIndices(token);
  if (!batched_) return idx.empty() ? Py_NewRef(Py_None) : PyLong_FromLongLong(idx[0]);
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(idx.size()));
  if (!list) return nullptr;
  for (size_t i = 0; i < idx.size(); ++i) {
    PyObject* v = PyLong_FromLongLong(idx[i]);
    if (!v) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), v);
  }
  return list;
}

PyObject* Pump::Next(double timeout_s) {
  Outcome o;
  const int64_t ns = timeout_s < 0 ? -1 : static_cast<int64_t>(timeout_s * 1e9);
  // In slices that Ctrl-C can end (glue/signal_slices.h).  A signal during
  // a slice ends it at once (Interrupted).
  Status st;
  const bool handled = WaitInSlices(ns, [&](int64_t slice_ns) {
    st = sched_.Next(slice_ns, &o);
    if (st.IsInterrupted()) return SliceEnd::kInterrupted;
    return st.ok() && o.kind == Outcome::Kind::kTimeout ? SliceEnd::kTimedOut : SliceEnd::kDone;
  });
  if (!handled) return nullptr;
  if (!st.ok()) {
    if (source_.RestoreError()) return nullptr;
    return PyErr_Occurred() ? nullptr : SetError(st);
  }
  switch (o.kind) {
    case Outcome::Kind::kBatch: {
      bool copy = false;
      PyObject* batch;
      if (o.spilled) {
        batch = DecodeCopy(reinterpret_cast<const uint8_t*>(o.spilled->data()), o.spilled->size(), numpy_);
      } else {
        copy = engine_->ShouldCopyOut(o.slot);
        batch = DecodeSlot(engine_, o.slot, numpy_, copy);
      }
      Drop(o.token);
      if (!batch) return nullptr;
      if (!copy) return Py_BuildValue("(iN)", static_cast<int>(PumpCode::kBatch), batch);
      return Py_BuildValue("(i(Ni))", static_cast<int>(PumpCode::kBatchFlagged), batch, 1);
    }
    case Outcome::Kind::kError: {
      PyObject* report;
      if (o.spilled) {
        report = PyBytes_FromStringAndSize(o.spilled->data(), static_cast<Py_ssize_t>(o.spilled->size()));
      } else {
        uint64_t used = 0, cap = 0;
        const uint8_t* p = engine_->SlotRegion(o.slot, &used, &cap);
        report = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(p),
                                           static_cast<Py_ssize_t>(std::min(used, cap)));
        engine_->Release(o.slot);
      }
      PyObject* index = IndexOf(o.token);
      Drop(o.token);
      if (!report || !index) {
        Py_XDECREF(report);
        Py_XDECREF(index);
        return nullptr;
      }
      if (o.native_error) {
        // A C++ worker thread's Status: raise it here, naming the batch.
        const char* b = PyBytes_AS_STRING(report);
        const Py_ssize_t n = PyBytes_GET_SIZE(report);
        const auto code = static_cast<Status::Code>(n > 0 ? static_cast<uint8_t>(b[0]) : 0);
        std::string msg(n > 1 ? b + 1 : "", n > 1 ? static_cast<size_t>(n - 1) : 0);
        PyObject* r = PyObject_Repr(index);
        msg += " (while loading batch " + std::to_string(o.batch_id) + " in native worker thread " +
               std::to_string(o.worker) + (r ? std::string(", indices ") + PyUnicode_AsUTF8(r) : "") + ")";
        Py_XDECREF(r);
        Py_DECREF(report);
        Py_DECREF(index);
        PyErr_Clear();
        return SetError(Status::FromCode(code == Status::Code::kOk ? Status::Code::kInternal : code, msg));
      }
      return Py_BuildValue("(i(NIKN))", static_cast<int>(PumpCode::kError), report, o.worker, static_cast<unsigned long long>(o.batch_id), index);
    }
    case Outcome::Kind::kWorkerExit:
      return Py_BuildValue("(i(Iiii))", static_cast<int>(PumpCode::kWorkerExit), o.worker, o.exit.pid, o.exit.exit_code, o.exit.signal);
    case Outcome::Kind::kEnd:
      return Py_BuildValue("(iO)", static_cast<int>(PumpCode::kEnd), Py_None);
    case Outcome::Kind::kTimeout:
      return Py_BuildValue("(iO)", static_cast<int>(PumpCode::kTimeout), Py_None);
  }
  Py_RETURN_NONE;
}

PyObject* Pump::InFlight() {
  PyObject* list = PyList_New(0);
  if (!list) return nullptr;
  for (const stoker::InFlight& f : sched_.InFlightTasks()) {
    PyObject* idx = IndexOf(f.token);
    PyObject* t = idx ? Py_BuildValue("(KINO)", static_cast<unsigned long long>(f.batch_id), f.worker, idx,
                                      f.finished ? Py_True : Py_False)
                      : nullptr;
    if (!t || PyList_Append(list, t) != 0) {
      Py_XDECREF(t);
      Py_DECREF(list);
      return nullptr;
    }
    Py_DECREF(t);
  }
  return list;
}

}  // namespace stoker::glue
