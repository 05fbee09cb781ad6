// Binds loader/engine.h (main-process side).  Registration only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <string>

#include "glue/errors.h"
#include "glue/py_decode.h"
#include "glue/py_loader.h"
#include "loader/engine.h"

namespace py = pybind11;

namespace stoker::glue {

void BindEngine(py::module_& m) {
  py::class_<Engine, std::shared_ptr<Engine>>(m, "Engine")
      .def(py::init([](uint32_t workers, uint64_t max_memory, uint32_t max_slots, bool process_shared) {
             return Check(Engine::Create(EngineOptions{workers, max_memory, max_slots, process_shared}));
           }), py::arg("num_workers"), py::arg("max_memory"), py::arg("max_slots") = 1024,
           py::arg("process_shared") = true)
      .def_property_readonly("fd", [](Engine& e) { return e.arena().fd(); })
      .def_property_readonly("base_address", [](Engine& e) { return reinterpret_cast<uintptr_t>(e.arena().base()); })
      .def_property_readonly("committed_bytes", [](Engine& e) { return e.arena().committed_bytes(); })
      .def("contains", [](Engine& e, uintptr_t p, uint64_t n) { return e.arena().Contains(reinterpret_cast<void*>(p), n); })
      .def("fill_local", [](const std::shared_ptr<Engine>& e, py::handle obj, int mode, bool numpy_mode) -> py::object {
             PyObject* r = FillLocal(e, obj.ptr(), static_cast<PublishMode>(mode), numpy_mode);
             if (!r && PyErr_Occurred()) throw py::error_already_set();
             return r ? py::reinterpret_steal<py::object>(r) : py::none(); })
      // pin_memory: the CUDA runtime's entry points as addresses (stoker/_cuda.py).
      .def("enable_cuda", [](Engine& e, const std::map<std::string, uintptr_t>& fns) {
             auto fn = [&](const char* name) -> uintptr_t {
               auto it = fns.find(name);
               return it == fns.end() ? 0 : it->second;
             };
             CudaRuntimeApi api;
             api.host_register = reinterpret_cast<decltype(api.host_register)>(fn("cudaHostRegister"));
             api.host_unregister = reinterpret_cast<decltype(api.host_unregister)>(fn("cudaHostUnregister"));
             api.event_create_with_flags =
                 reinterpret_cast<decltype(api.event_create_with_flags)>(fn("cudaEventCreateWithFlags"));
             api.event_record = reinterpret_cast<decltype(api.event_record)>(fn("cudaEventRecord"));
             api.event_query = reinterpret_cast<decltype(api.event_query)>(fn("cudaEventQuery"));
             api.event_synchronize = reinterpret_cast<decltype(api.event_synchronize)>(fn("cudaEventSynchronize"));
             api.event_destroy = reinterpret_cast<decltype(api.event_destroy)>(fn("cudaEventDestroy"));
             api.get_last_error = reinterpret_cast<decltype(api.get_last_error)>(fn("cudaGetLastError"));
             Check(e.EnableCuda(api)); })
      .def_property_readonly("pin_error", &Engine::pin_error)
      .def("record_fence", [](Engine& e, uintptr_t stream) { return e.RecordFence(reinterpret_cast<void*>(stream)); })
      .def("watch", [](Engine& e, uint32_t w, int pid) { Check(e.Watch(w, pid)); })
      .def("forget", &Engine::Forget)
      .def("shutdown", &Engine::Shutdown)
      .def("set_epoch", &Engine::SetEpoch)
      .def("set_shared_seed", &Engine::SetSharedSeed)
      .def_property_readonly("expected_batch_bytes", &Engine::expected_batch_bytes)
      .def("trim_idle", &Engine::TrimIdle, py::arg("regions"))
      .def_static("check_max_memory", [](uint64_t max_memory) { Check(CheckMaxMemory(max_memory)); })
      .def_static("default_max_memory", &DefaultMaxMemory)
      .def_readonly_static("DEFAULT_MAX_MEMORY", &kDefaultMaxMemory)
      .def("stats", [](Engine& e, bool process_memory) { return Steal(StatsDict(e, process_memory)); },
           py::arg("process_memory") = false);
}

}  // namespace stoker::glue
