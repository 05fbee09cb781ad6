#include "glue/py_loader.h"

#include <cstring>
#include <string>

#include "glue/errors.h"
#include "glue/py_collate.h"
#include "glue/py_decode.h"

namespace stoker::glue {

PyObject* FillLocal(const std::shared_ptr<Engine>& e, PyObject* obj, PublishMode mode, bool numpy_mode) {
  PyCollate plan(numpy_mode);
  PlanResult r = mode == PublishMode::kCollate ? plan.Collate(obj) : plan.Preserve(obj);
  if (r == PlanResult::kFallback) return nullptr;
  if (r == PlanResult::kError) return nullptr;
  uint32_t slot = 0;
  Result<bool> got = e->AcquireLocal(plan.total_bytes(), &slot);
  if (!got.ok()) return SetError(got.status());
  if (!got.value()) {
    // The training loop holds the whole budget: this batch stays in private
    // memory (as torch's would), and the pool stays within max_memory.
    std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[plan.total_bytes()]);
    if (!buf) return PyErr_NoMemory();
    plan.WriteTo(buf.get());
    e->CountCopyOut();
    return DecodeCopy(buf.get(), plan.total_bytes(), numpy_mode);
  }
  uint64_t cap = 0;
  uint8_t* region = e->LocalRegion(slot, &cap);
  plan.WriteTo(region);
  e->CompleteLocal(slot, plan.total_bytes());
  const bool copy_out = e->ShouldCopyOut(slot);
  return DecodeSlot(e, slot, numpy_mode, copy_out);
}

namespace {
PyObject* MemoryDict(const ProcessMemory& m) {
  return Py_BuildValue("{s:K,s:K,s:K,s:K}", "rss", (unsigned long long)m.rss, "pss", (unsigned long long)m.pss, "uss",
                       (unsigned long long)m.uss, "pss_shmem", (unsigned long long)m.pss_shmem);
}
}  // namespace

PyObject* StatsDict(Engine& e, bool process_memory) {
  EngineStats s = e.Stats(process_memory);
  using ull = unsigned long long;
  PyObject* workers = PyList_New(0);
  if (!workers) return nullptr;
  for (const WorkerStats& w : s.workers) {
    static const char* kStates[] = {"starting", "idle", "busy", "exited"};
    const char* state = static_cast<uint32_t>(w.state) < 4 ? kStates[static_cast<uint32_t>(w.state)] : "?";
    PyObject* d = Py_BuildValue("{s:i,s:s,s:K,s:d,s:d,s:K,s:K,s:K,s:K}", "pid", w.pid, "state", state, "batches",
                                (ull)w.batches, "busy_s", w.busy_ns / 1e9, "busy_fraction", w.busy_fraction,
                                "queued", (ull)w.queued, "rss", (ull)w.memory.rss, "pss", (ull)w.memory.pss, "uss",
                                (ull)w.memory.uss);
    if (d) {  // time by stage (core/stage.h), for the bottleneck verdict: "read", ..., "wait_store", ...
      PyObject* stages = PyDict_New();
      for (int i = 0; stages && i < kStageCount; ++i) {
        const Stage s = static_cast<Stage>(i);
        const std::string key = *StageDetail(s) ? std::string(StageName(s)) + "_" + StageDetail(s) : StageName(s);
        PyObject* v = PyFloat_FromDouble(w.stage_ns[i] / 1e9);
        if (!v || PyDict_SetItemString(stages, key.c_str(), v) != 0) Py_CLEAR(stages);
        Py_XDECREF(v);
      }
      if (!stages || PyDict_SetItemString(d, "stage_s", stages) != 0) Py_CLEAR(d);
      Py_XDECREF(stages);
    }
    if (!d || PyList_Append(workers, d) != 0) {
      Py_XDECREF(d);
      Py_DECREF(workers);
      return nullptr;
    }
    Py_DECREF(d);
  }
  PyObject* slots = Py_BuildValue("{s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "total", s.slots_total, "free", s.slots_free,
                                  "queued", s.slots_queued, "filling", s.slots_filling, "ready", s.slots_ready,
                                  "held", s.slots_held, "gpu_fenced", s.slots_fenced);
  PyObject* bytes = Py_BuildValue("{s:K,s:K,s:K,s:K,s:K}", "free", (ull)s.free_bytes, "queued", (ull)s.queued_bytes,
                                  "filling", (ull)s.filling_bytes, "ready", (ull)s.ready_bytes, "held",
                                  (ull)s.held_bytes);
  return Py_BuildValue(
      "{s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:N,s:K,s:K,s:K,s:K,s:K,s:K,s:N,s:N}", "max_memory", (ull)s.max_memory,
      "budget_bytes", (ull)s.budget_bytes, "arena_bytes", (ull)s.arena_resident_bytes, "resident_bytes",
      (ull)s.resident_bytes, "in_use_bytes", (ull)s.in_use_bytes, "expected_batch_bytes", (ull)s.expected_batch_bytes,
      "slots", slots, "slot_bytes", bytes, "need_space_events", (ull)s.need_space_events, "cancelled",
      (ull)s.cancelled, "spills", (ull)s.spills, "copy_outs", (ull)s.copy_outs, "delivered_batches",
      (ull)s.delivered_batches, "delivered_bytes", (ull)s.delivered_bytes, "main", MemoryDict(s.main), "workers",
      workers);
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
  PyCollate plan(numpy_mode);
  PlanResult r = mode == PublishMode::kCollate ? plan.Collate(obj) : plan.Preserve(obj);
  if (r == PlanResult::kFallback) return static_cast<int>(PublishOutcome::kFallback);
  if (r == PlanResult::kError) return -1;
  const uint64_t need = plan.total_bytes();
  Result<uint8_t*> region = Status::Internal("unset");
  Py_BEGIN_ALLOW_THREADS
  region = port.Reserve(slot, need);
  Py_END_ALLOW_THREADS
  if (region.status().IsCancelled()) {
    port.Publish(slot, SlotResult::kCancelled, 0);
    return static_cast<int>(PublishOutcome::kCancelled);
  }
  if (!region.ok()) {
    SetError(region.status());
    return -1;
  }
  plan.WriteTo(region.value());
  port.Publish(slot, SlotResult::kOk, need);
  return static_cast<int>(PublishOutcome::kPublished);
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
