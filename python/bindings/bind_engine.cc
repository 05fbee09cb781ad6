// Binds loader/engine.h (main-process side).  Registration only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "glue/errors.h"
#include "glue/py_decode.h"
#include "glue/py_loader.h"
#include "loader/engine.h"

namespace py = pybind11;

namespace stoker::glue {

namespace {
py::object Steal(PyObject* o) {
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}
long Slot(long r) {
  if (r == -3) throw py::error_already_set();
  return r;
}
}  // namespace

void BindEngine(py::module_& m) {
  py::class_<Engine, std::shared_ptr<Engine>>(m, "Engine")
      .def(py::init([](uint32_t workers, uint64_t max_memory, uint64_t hard_cap, uint32_t max_slots) {
             return Check(Engine::Create(EngineOptions{workers, max_memory, hard_cap, max_slots}));
           }), py::arg("num_workers"), py::arg("max_memory"), py::arg("hard_cap") = 0, py::arg("max_slots") = 1024)
      .def_property_readonly("fd", [](Engine& e) { return e.arena().fd(); })
      .def_property_readonly("base_address", [](Engine& e) { return reinterpret_cast<uintptr_t>(e.arena().base()); })
      .def_property_readonly("committed_bytes", [](Engine& e) { return e.arena().committed_bytes(); })
      .def("contains", [](Engine& e, uintptr_t p, uint64_t n) { return e.arena().Contains(reinterpret_cast<void*>(p), n); })
      .def("dispatch_indices", [](Engine& e, uint32_t w, uint64_t b, uint64_t g, py::handle idx, bool over) {
             return Slot(DispatchIndices(e, w, b, g, idx.ptr(), over)); })
      .def("dispatch_payload", [](Engine& e, uint32_t w, uint64_t b, uint64_t g, uint32_t kind, py::handle p, bool over) {
             return Slot(DispatchPayload(e, w, b, g, kind, p.ptr(), over)); })
      .def("send_resume", [](Engine& e, uint32_t w, uint64_t g) { return e.SendResume(w, g).ok(); })
      .def("wait", [](Engine& e, double timeout_s) { return Steal(WaitCompletions(e, timeout_s)); })
      .def("decode", [](const std::shared_ptr<Engine>& e, uint32_t slot, bool numpy_mode) {
             const bool copied = e->ShouldCopyOut(slot);
             return py::make_tuple(Steal(DecodeSlot(e, slot, numpy_mode, copied)), copied); })
      .def("fill_local", [](const std::shared_ptr<Engine>& e, py::handle obj, int mode, bool numpy_mode) -> py::object {
             PyObject* r = FillLocal(e, obj.ptr(), static_cast<PublishMode>(mode), numpy_mode);
             if (!r && PyErr_Occurred()) throw py::error_already_set();
             return r ? py::reinterpret_steal<py::object>(r) : py::none(); })
      .def("slot_bytes", [](Engine& e, uint32_t slot) { return Steal(SlotBytes(e, slot)); })
      .def("release", &Engine::Release)
      .def("watch", [](Engine& e, uint32_t w, int pid) { Check(e.Watch(w, pid)); })
      .def("forget", &Engine::Forget)
      .def("shutdown", &Engine::Shutdown)
      .def("stats", [](Engine& e) { return Steal(StatsDict(e)); });
}

}  // namespace stoker::glue
