#include "glue/py_loader.h"

#include <cstring>
#include <string>

#include "glue/errors.h"
#include "glue/py_collate.h"
#include "glue/py_decode.h"

namespace stoker::glue {

PyObject* FillLocal(const std::shared_ptr<Engine>& e, PyObject* obj, PublishMode mode, bool numpy_mode) {
  BatchPlan plan(numpy_mode);
  PlanResult r = mode == PublishMode::kCollate ? plan.Collate(obj) : plan.Preserve(obj);
  if (r == PlanResult::kFallback) return nullptr;
  if (r == PlanResult::kError) return nullptr;
  auto slot = e->AcquireLocal(plan.total_bytes());
  if (!slot.ok()) return SetError(slot.status());
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

PyObject* NextTask(WorkerPort& port) {
  Task t;
  Status st;
  Py_BEGIN_ALLOW_THREADS
  st = port.Next(&t, -1);
  Py_END_ALLOW_THREADS
  if (st.IsClosed()) Py_RETURN_NONE;
  if (!st.ok()) return SetError(st);
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
    SetError(region.status());
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
