// Binds proc/proc_memory.h (what processes and the system use).  Registration only.
#include <pybind11/pybind11.h>

#include "glue/errors.h"
#include "proc/proc_memory.h"

namespace py = pybind11;

namespace stoker::glue {

void BindProc(py::module_& m) {
  m.def("process_memory", [](int pid) {
    ProcessMemory pm = Check(ReadProcessMemory(pid));
    py::dict d;
    d["rss"] = pm.rss;
    d["pss"] = pm.pss;
    d["uss"] = pm.uss;
    d["pss_shmem"] = pm.pss_shmem;
    return d;
  }, "RSS, PSS and USS (bytes) of process `pid`, from /proc/<pid>/smaps_rollup.");
  m.def("private_bytes_outside", [](int pid, const std::string& exclude) {
    Result<uint64_t> r = [&] { py::gil_scoped_release unlocked; return ReadPrivateBytesOutside(pid, exclude); }();
    return Check(std::move(r));
  }, py::arg("pid"), py::arg("exclude"),
        "Private bytes of process `pid` outside the mappings whose name holds `exclude`, from /proc/<pid>/smaps.");
  m.def("memory_limit", [] { return Check(MemoryLimitBytes()); },
        "The most memory this process may use: MemTotal or its cgroup's limit, whichever is smaller.");
  m.def("system_shmem", [] { return Check(SystemShmemBytes()); }, "The Shmem line of /proc/meminfo, in bytes.");
}

}  // namespace stoker::glue
