// Binds loader/scheduler.h through glue/py_pump.h.  Registration only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "glue/errors.h"
#include "glue/py_pump.h"

namespace py = pybind11;

namespace stoker::glue {

void BindScheduler(py::module_& m) {
  py::class_<Pump>(m, "Pump")
      .def(py::init([](std::shared_ptr<Engine> e, uint32_t workers, uint32_t prefetch, bool in_order, bool iterable,
                       bool auto_collation, bool numpy_mode) {
             return new Pump(e, SchedulerOptions{workers, prefetch, in_order, iterable}, auto_collation, numpy_mode);
           }))
      .def("reset", [](Pump& p, py::handle it, bool resume) { p.Reset(it.ptr(), resume); })
      .def_property("prefetch", &Pump::prefetch, &Pump::SetPrefetch)
      .def("reset_order", [](Pump& p, const EpochOrderHandle& o, uint64_t batch_size, bool drop_last, bool resume) {
             p.ResetOrder(o.order, batch_size, drop_last, resume); })
      .def("next", [](Pump& p, double timeout_s) { return Steal(p.Next(timeout_s)); })
      .def("in_flight", [](Pump& p) { return Steal(p.InFlight()); })
      .def("clear", &Pump::Clear)
      .def("resume_at", [](Pump& p, uint64_t delivered, std::vector<uint64_t> extra, int64_t next_worker,
                           const std::vector<std::pair<uint64_t, uint32_t>>& schedule) {
             std::vector<WorkerSegment> segs;
             for (auto [first, n] : schedule) segs.push_back(WorkerSegment{first, n});
             p.ResumeAt(ResumePoint{delivered, std::move(extra), next_worker, std::move(segs)}); },
           py::arg("delivered") = 0, py::arg("extra") = std::vector<uint64_t>{}, py::arg("next_worker") = -1,
           py::arg("schedule") = std::vector<std::pair<uint64_t, uint32_t>>{},
           "The next epoch begun (reset or reset_order) skips the batches a saved run delivered (map-style) and "
           "goes on with its schedule of worker counts, or starts its round robin at next_worker (iterable).")
      .def_property_readonly("active_workers", [](Pump& p) { return p.scheduler().active_workers(); })
      .def("set_active_workers", [](Pump& p, uint32_t n) { Check(p.scheduler().SetActiveWorkers(n)); },
           "New batches go to the first n workers from the next one dispatched on.")
      .def("schedule", [](Pump& p) {
             std::vector<std::pair<uint64_t, uint32_t>> v;
             for (const WorkerSegment& s : p.scheduler().schedule()) v.emplace_back(s.first, s.workers);
             return v; }, "This epoch's worker counts: [(first batch id, workers), ...].")
      .def("prev_batch_of", [](Pump& p, uint32_t worker, uint64_t batch_id) {
             return p.scheduler().PrevBatchOf(worker, batch_id); },
           "The last batch before batch_id that worker loads under the schedule (-1: none).")
      .def("idle", [](Pump& p, uint32_t worker) { return p.scheduler().Idle(worker); })
      .def("retire", [](Pump& p, uint32_t worker) { Check(p.scheduler().RetireWorker(worker)); },
           "An idle worker above the active count leaves cleanly (not watched: not a crash).")
      .def("reclaim", [](Pump& p, uint32_t worker) { Check(p.scheduler().Reclaim(worker)); },
           "Once a retired worker's process is gone: its id is ready for a new process.")
      .def("delivered", [](const Pump& p) {
             uint64_t prefix = 0;
             std::vector<uint64_t> extra;
             p.Delivered(&prefix, &extra);
             return py::make_tuple(prefix, extra); })
      .def("delivered_by_worker", [](const Pump& p) {
             std::vector<uint64_t> counts;
             int last = -1;
             p.DeliveredByWorker(&counts, &last);
             return py::make_tuple(counts, last); })
      .def_property_readonly("generation", &Pump::Generation)
      .def("queue_depths", [](Pump& p) {
             Scheduler::Depths d = p.QueueDepths();
             py::dict out;
             out["in_progress"] = d.in_progress;
             out["reorder_buffer"] = d.ready;
             out["spilled"] = d.spilled;
             out["retry"] = d.retry;
             return out; })
      .def("no_room_wait_s", [](const Pump& p) { return p.NoRoomWaitNs() / 1e9; },
           "Seconds next() waited for workers with tasks held back for want of room in the slot pool.")
      .def("requeue", [](Pump& p, uint32_t worker) { Check(p.Requeue(worker)); });
  // An epoch's counts, computed by the EpochRunner alone.
  m.def("samples_per_rank", &EpochRunner::SamplesPerRank, py::arg("n"), py::arg("world_size"), py::arg("pad"),
        "Samples each of world_size ranks reads of n (equal shares padded by repetition, or the tail dropped).");
  m.def("batches_per_epoch", &EpochRunner::Batches, py::arg("samples"), py::arg("batch_size"), py::arg("drop_last"),
        "Batches of `samples` (batch_size 0: one uncollated sample each).");
}

}  // namespace stoker::glue
