// Binds loader/worker_port.h and proc/parent_watch.h (worker side).
// Registration only.
#include <pybind11/pybind11.h>

#include "glue/errors.h"
#include "glue/py_loader.h"
#include "loader/engine.h"
#include "loader/worker_port.h"
#include "proc/parent_watch.h"

namespace py = pybind11;

namespace stoker::glue {

void BindWorker(py::module_& m) {
  py::class_<WorkerPort, std::shared_ptr<WorkerPort>>(m, "WorkerPort")
      .def_static("attach", [](int fd, uint32_t id) { return std::make_shared<WorkerPort>(Check(Arena::Attach(fd)), id); })
      .def_static("from_engine", [](Engine& e, uint32_t id) {
             return std::make_shared<WorkerPort>(std::shared_ptr<Arena>(e.shared_from_this(), &e.arena()), id); })
      .def_property_readonly("id", &WorkerPort::id)
      .def_property_readonly("epoch", &WorkerPort::epoch)
      .def_property_readonly("shared_seed", &WorkerPort::shared_seed)
      .def("next_task", [](WorkerPort& p) { return Steal(NextTask(p)); })
      .def("begin_collate", &WorkerPort::BeginCollate,
           "The task's samples are fetched: collation (and publishing) follows (stats' and the trace's stages).")
      .def("publish", [](WorkerPort& p, uint32_t slot, py::handle obj, int mode, bool numpy_mode) {
             p.BeginCollate();  // (the user's collate_fn, if any, called it already: the same stage)
             int r = PublishBatch(p, slot, obj.ptr(), static_cast<PublishMode>(mode), numpy_mode);
             if (r < 0) throw py::error_already_set();
             return r; })
      .def("publish_error", [](WorkerPort& p, uint32_t slot, py::bytes b) { PublishBytes(p, slot, SlotResult::kError, b.ptr()); })
      .def("publish_stop", [](WorkerPort& p, uint32_t slot) { PublishBytes(p, slot, SlotResult::kStopIteration, nullptr); });
  m.def("start_parent_watch", [](int ppid, int code) { Check(StartParentWatch(ppid, code)); },
        "Exit this process with `code` as soon as process `ppid` dies.");
}

}  // namespace stoker::glue
