// core/stage.h and the trace (stoker/trace.h): stoker.trace() and
// STOKER_TRACE (python/stoker/_trace.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/stage_runtime.h"
#include "core/trace.h"
#include "glue/errors.h"
#include "stoker/trace.h"

namespace py = pybind11;

namespace stoker::glue {

void BindTrace(py::module_& m) {
  m.def("trace_start", [](const std::string& path, const std::string& process_name) {
          Check(StartTrace(path, process_name)); },
        py::arg("path"), py::arg("process_name") = "training loop",
        "Starts recording a trace of this process and the workers it forks.");
  m.def("trace_stop", [] {
          py::gil_scoped_release unlocked;  // (it waits for the workers' last events)
          return Check(StopTrace()); },
        "Stops recording and writes the trace's file; returns its path.");
  m.def("trace_recording", &TraceRecording);
  m.def("trace_name_process", &TraceNameProcess, "Names this process's track in the trace.");
  m.def("trace_name_thread", &TraceNameThread, "Names this thread's track in the trace.");
  m.def("trace_instant", [](const std::string& name, const std::string& args_json) {
          TraceInstant(name.c_str(), args_json); },
        "A moment on this thread's track with arguments (a JSON object's text).");
  // The other extension modules' copies of the core route their stages here.
  m.attr("stage_runtime") = py::capsule(const_cast<StageRuntime*>(OwnStageRuntime()), "stoker._stoker.stage_runtime");
}

}  // namespace stoker::glue
