#include "glue/py_loader.h"

#include <cstring>
#include <string>

#include "glue/py_collate.h"
#include "glue/py_decode.h"

namespace stoker::glue {

namespace {
PyObject* ErrorFromStatus(const Status& s) {
  PyObject* type = PyExc_RuntimeError;
  if (s.code() == Status::Code::kResourceExhausted) type = PyExc_MemoryError;
  else if (s.code() == Status::Code::kInvalidArgument) type = PyExc_ValueError;
  else if (s.code() == Status::Code::kIOError) type = PyExc_OSError;
  PyErr_SetString(type, ("stoker: " + s.message()).c_str());
  return nullptr;
}
}  // namespace

long DispatchIndices(Engine& e, uint32_t worker, uint64_t batch_id, uint64_t generation,
                     PyObject* indices, bool allow_over_budget) {
  if (!PyList_Check(indices)) return -2;
  const Py_ssize_t n = PyList_GET_SIZE(indices);
  int64_t stack_buf[256];
  std::vector<int64_t> heap;
  int64_t* buf = stack_buf;
  if (n > 256) {
    heap.resize(n);
    buf = heap.data();
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* x = PyList_GET_ITEM(indices, i);
    if (!PyLong_CheckExact(x)) return -2;
    long long v = PyLong_AsLongLong(x);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return -2;
    }
    buf[i] = v;
  }
  auto r = e.Dispatch(worker, batch_id, generation, TaskKind::kIndices, buf, uint64_t(n) * 8, allow_over_budget);
  if (!r.ok()) {
    if (r.status().IsResourceExhausted() && r.status().message().find("hard cap") == std::string::npos) return -1;
    ErrorFromStatus(r.status());
    return -3;
  }
  return r.value();
}

long DispatchPayload(Engine& e, uint32_t worker, uint64_t batch_id, uint64_t generation,
                     uint32_t kind, PyObject* payload, bool allow_over_budget) {
  char* p = nullptr;
  Py_ssize_t n = 0;
  if (payload != Py_None && PyBytes_AsStringAndSize(payload, &p, &n) != 0) return -3;
  auto r = e.Dispatch(worker, batch_id, generation, static_cast<TaskKind>(kind), p, uint64_t(n), allow_over_budget);
  if (!r.ok()) {
    if (r.status().IsResourceExhausted() && r.status().message().find("hard cap") == std::string::npos) return -1;
    ErrorFromStatus(r.status());
    return -3;
  }
  return r.value();
}

PyObject* WaitCompletions(Engine& e, double timeout_s) {
  std::vector<Completion> out;
  Status st;
  const int64_t ns = timeout_s < 0 ? -1 : static_cast<int64_t>(timeout_s * 1e9);
  Py_BEGIN_ALLOW_THREADS
  st = e.Wait(ns, &out);
  Py_END_ALLOW_THREADS
  if (!st.ok() && !st.IsTimeout()) return ErrorFromStatus(st);
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(out.size()));
  if (!list) return nullptr;
  for (size_t i = 0; i < out.size(); ++i) {
    const Completion& c = out[i];
    PyObject* t = Py_BuildValue("(iIIKKIiii)", static_cast<int>(c.kind), c.slot, c.worker,
                                static_cast<unsigned long long>(c.batch_id),
                                static_cast<unsigned long long>(c.generation),
                                static_cast<unsigned>(c.result), c.exit.pid, c.exit.exit_code, c.exit.signal);
    if (!t) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), t);
  }
  return list;
}

PyObject* FillLocal(const std::shared_ptr<Engine>& e, PyObject* obj, PublishMode mode, bool numpy_mode) {
  BatchPlan plan(numpy_mode);
  PlanResult r = mode == PublishMode::kCollate ? plan.Collate(obj) : plan.Preserve(obj);
  if (r == PlanResult::kFallback) return nullptr;
  if (r == PlanResult::kError) return nullptr;
  auto slot = e->AcquireLocal(plan.total_bytes());
  if (!slot.ok()) return ErrorFromStatus(slot.status());
  uint64_t cap = 0;
  uint8_t* region = e->LocalRegion(slot.value(), &cap);
  plan.WriteTo(region);
  e->CompleteLocal(slot.value(), plan.total_bytes());
  const bool copy_out = e->ShouldCopyOut(slot.value());
  return DecodeSlot(e, slot.value(), numpy_mode, copy_out);
}

PyObject* StatsDict(Engine& e) {
  EngineStats s = e.Stats();
  PyObject* workers = PyList_New(0);
  for (const WorkerStats& w : s.workers) {
    static const char* kStates[] = {"starting", "idle", "busy", "exited"};
    const char* state = static_cast<uint32_t>(w.state) < 4 ? kStates[static_cast<uint32_t>(w.state)] : "?";
    PyObject* d = Py_BuildValue("{s:i,s:s,s:K,s:d,s:K}", "pid", w.pid, "state", state, "batches",
                                static_cast<unsigned long long>(w.batches), "busy_s", w.busy_ns / 1e9,
                                "queued", static_cast<unsigned long long>(w.queued));
    PyList_Append(workers, d);
    Py_DECREF(d);
  }
  PyObject* slots = Py_BuildValue("{s:I,s:I,s:I,s:I,s:I,s:I}", "total", s.slots_total, "free", s.slots_free,
                                  "queued", s.slots_queued, "filling", s.slots_filling, "ready", s.slots_ready,
                                  "held", s.slots_held);
  PyObject* d = Py_BuildValue(
      "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:K,s:K,s:K,s:N}", "max_memory", (unsigned long long)s.max_memory,
      "hard_cap", (unsigned long long)s.hard_cap, "committed_bytes", (unsigned long long)s.committed_bytes,
      "resident_bytes", (unsigned long long)s.resident_bytes, "in_use_bytes", (unsigned long long)s.in_use_bytes,
      "held_bytes", (unsigned long long)s.held_bytes, "expected_batch_bytes",
      (unsigned long long)s.expected_batch_bytes, "slots", slots, "over_budget_events",
      (unsigned long long)s.over_budget_events, "need_space_events", (unsigned long long)s.need_space_events,
      "copy_outs", (unsigned long long)s.copy_outs, "workers", workers);
  return d;
}

PyObject* SlotBytes(Engine& e, uint32_t slot) {
  uint64_t used = 0, cap = 0;
  const uint8_t* p = e.SlotRegion(slot, &used, &cap);
  if (used > cap) used = cap;
  return PyBytes_FromStringAndSize(reinterpret_cast<const char*>(p), static_cast<Py_ssize_t>(used));
}

PyObject* NextTask(WorkerPort& port) {
  Task t;
  Status st;
  Py_BEGIN_ALLOW_THREADS
  st = port.Next(&t, -1);
  Py_END_ALLOW_THREADS
  if (st.IsClosed()) Py_RETURN_NONE;
  if (!st.ok()) return ErrorFromStatus(st);
  PyObject* payload = nullptr;
  if (t.msg == TaskMsg::kResume) {
    payload = Py_NewRef(Py_None);
  } else {
    switch (t.kind) {
      case TaskKind::kIndices: {
        const Py_ssize_t n = static_cast<Py_ssize_t>(t.payload_bytes / 8);
        payload = PyList_New(n);
        if (!payload) return nullptr;
        for (Py_ssize_t i = 0; i < n; ++i) {
          int64_t v;
          std::memcpy(&v, t.payload + 8 * i, 8);
          PyList_SET_ITEM(payload, i, PyLong_FromLongLong(v));
        }
        break;
      }
      case TaskKind::kIterBatch:
      case TaskKind::kIndex: {
        int64_t v = 0;
        if (t.payload_bytes >= 8) std::memcpy(&v, t.payload, 8);
        payload = PyLong_FromLongLong(v);
        break;
      }
      case TaskKind::kIterItem:
        payload = Py_NewRef(Py_None);
        break;
      case TaskKind::kPickledIndex:
        payload = PyBytes_FromStringAndSize(reinterpret_cast<const char*>(t.payload),
                                            static_cast<Py_ssize_t>(t.payload_bytes));
        break;
    }
  }
  if (!payload) return nullptr;
  return Py_BuildValue("(iIKKIN)", static_cast<int>(t.msg), t.slot, static_cast<unsigned long long>(t.batch_id),
                       static_cast<unsigned long long>(t.generation), static_cast<unsigned>(t.kind), payload);
}

int PublishBatch(WorkerPort& port, uint32_t slot, PyObject* obj, PublishMode mode, bool numpy_mode) {
  BatchPlan plan(numpy_mode);
  PlanResult r = mode == PublishMode::kCollate ? plan.Collate(obj) : plan.Preserve(obj);
  if (r == PlanResult::kFallback) return 0;
  if (r == PlanResult::kError) return -1;
  const uint64_t need = plan.total_bytes();
  Result<uint8_t*> region = Status::Internal("unset");
  Py_BEGIN_ALLOW_THREADS
  region = port.Reserve(slot, need);
  Py_END_ALLOW_THREADS
  if (!region.ok()) {
    ErrorFromStatus(region.status());
    return -1;
  }
  plan.WriteTo(region.value());
  port.Publish(slot, SlotResult::kOk, need);
  return 1;
}

void PublishBytes(WorkerPort& port, uint32_t slot, SlotResult result, PyObject* bytes) {
  uint64_t cap = 0;
  uint8_t* region = port.Region(slot, &cap);
  uint64_t n = 0;
  if (bytes && PyBytes_Check(bytes)) {
    n = std::min<uint64_t>(cap, static_cast<uint64_t>(PyBytes_GET_SIZE(bytes)));
    std::memcpy(region, PyBytes_AS_STRING(bytes), n);
  }
  port.Publish(slot, result, n);
}

}  // namespace stoker::glue
