// Binds src/shared/ (shared memory blocks and containers).  Registration only.
#include <pybind11/numpy.h>
#include <pybind11/native_enum.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "glue/errors.h"
#include "glue/py_shared.h"
#include "shared/shared_block.h"
#include "shared/string_list.h"
#include "stoker/bag_sampler.h"
#include "stoker/shared_counter.h"
#include "stoker/shared_lock.h"

namespace py = pybind11;

namespace stoker::glue {

void BindShared(py::module_& m) {
  py::class_<SharedBlock, std::shared_ptr<SharedBlock>>(m, "SharedBlock", py::buffer_protocol())
      .def_static("create", [](uint64_t size, const std::string& name) { return Check(SharedBlock::Create(size, name)); },
                  py::arg("size"), py::arg("name") = "stoker-shared")
      .def_static("open_fd", [](int fd) { return Check(SharedBlock::Open(fd)); })
      .def_static("open_path", [](const std::string& path) { return Check(SharedBlock::OpenPath(path)); })
      .def("seal", [](SharedBlock& b) { Check(b.Seal()); })
      .def_property_readonly("fd", &SharedBlock::fd)
      .def_property_readonly("size", &SharedBlock::size)
      .def_property_readonly("sealed", &SharedBlock::sealed)
      .def_property_readonly("address", [](SharedBlock& b) { return reinterpret_cast<uintptr_t>(b.data()); })
      .def_buffer([](SharedBlock& b) {
        return py::buffer_info(b.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.size())}, {py::ssize_t{1}}, b.sealed());
      });

  py::class_<StringListView>(m, "StringList")
      .def(py::init([](py::handle iterable) {
             std::shared_ptr<SharedBlock> block = BuildStringList(iterable.ptr(), "stoker-stringlist");
             if (!block) throw py::error_already_set();
             return Check(StringListView::Open(std::move(block)));
           }), py::arg("iterable"),
           "An immutable list of str in shared memory: reads touch no reference counts.")
      .def_static("_open", [](std::shared_ptr<SharedBlock> b) { return Check(StringListView::Open(std::move(b))); })
      .def("__len__", &StringListView::size)
      .def("__getitem__", [](const StringListView& v, py::handle key) {
             return Steal(StringListGetItem(v, key.ptr())); })
      .def_property_readonly("block", &StringListView::shared_block)
      .def_property_readonly("nbytes", [](const StringListView& v) { return v.block().size(); })
      .def("__reduce__", [](py::object self) {
             return py::module_::import("stoker.shared").attr("_reduce_string_list")(self); });

  py::class_<SharedLock, std::shared_ptr<SharedLock>>(m, "SharedLock")
      .def_static("create", [] { return Check(SharedLock::Create()); })
      .def_static("_open", [](std::shared_ptr<SharedBlock> b) { return Check(SharedLock::Open(std::move(b))); })
      .def("acquire", [](SharedLock& l, double timeout_s) {
             // (acquired, previous_owner_died); Ctrl-C ends the wait (glue/py_shared.h).
             bool raised = false;
             Result<std::pair<bool, bool>> r = AcquireSharedLock(l, timeout_s, &raised);
             if (raised) throw py::error_already_set();
             return Check(std::move(r));
           }, py::arg("timeout_s"))
      .def("release", [](SharedLock& l) { Check(l.Unlock()); })
      .def_property_readonly("owner_deaths", &SharedLock::owner_deaths)
      .def_property_readonly("block", &SharedLock::block);

  py::class_<SharedCounter, std::shared_ptr<SharedCounter>>(m, "SharedCounter")
      .def_static("create", [](int64_t v) { return Check(SharedCounter::Create(v)); })
      .def_static("_open", [](std::shared_ptr<SharedBlock> b) { return Check(SharedCounter::Open(std::move(b))); })
      .def("load", &SharedCounter::Load)
      .def("store", &SharedCounter::Store)
      .def("add", &SharedCounter::Add)
      .def("exchange", &SharedCounter::Exchange)
      .def("compare_exchange", [](SharedCounter& c, int64_t expected, int64_t desired) {
             const bool ok = c.CompareExchange(&expected, desired);
             return std::make_pair(ok, expected); })
      .def_property_readonly("block", &SharedCounter::block);

  // (Python's on_exhausted strings are these members' names, lower case.)
  py::native_enum<OnExhausted>(m, "OnExhausted", "enum.IntEnum")
      .value("RESET", OnExhausted::kReset)
      .value("FEWER", OnExhausted::kFewer)
      .value("RAISE", OnExhausted::kError)
      .finalize();
  static py::exception<void> bag_exhausted(m, "BagExhausted", PyExc_LookupError);
  py::class_<BagSampler, std::shared_ptr<BagSampler>>(m, "NativeBagSampler")
      .def_static("create", [](const std::vector<uint32_t>& sizes, uint32_t k, const std::vector<double>& w,
                               OnExhausted mode, uint64_t seed) {
             return Check(BagSampler::Create(sizes, k, w, mode, seed)); })
      .def_static("_open", [](std::shared_ptr<SharedBlock> b) { return Check(BagSampler::Open(std::move(b))); })
      .def("draw", [](BagSampler& s, int64_t bag, bool with_cycle) -> py::object {
             thread_local std::vector<int64_t> picks;
             uint64_t cycle = 0;
             Status st = bag < 0 ? Status::InvalidArgument("BagSampler: no bag " + std::to_string(bag))
                                 : s.Draw(static_cast<uint32_t>(bag), &picks, &cycle);
             if (st.IsResourceExhausted()) {
               PyErr_SetString(bag_exhausted.ptr(), ("stoker: " + st.message()).c_str());
               throw py::error_already_set();
             }
             Check(st);
             py::array_t<int64_t> out(static_cast<py::ssize_t>(picks.size()));
             if (!picks.empty()) std::memcpy(out.mutable_data(), picks.data(), picks.size() * sizeof(int64_t));
             if (with_cycle) return py::make_tuple(cycle, out);
             return std::move(out);
           }, py::arg("bag"), py::arg("with_cycle") = false)
      .def("set_weights", [](BagSampler& s, uint32_t bag, py::array_t<double, py::array::c_style | py::array::forcecast> w) {
             Check(s.SetWeights(bag, w.data(), static_cast<uint32_t>(w.size()))); })
      .def("reset", [](BagSampler& s, uint32_t bag) { Check(s.Reset(bag)); })
      .def("remaining", [](BagSampler& s, uint32_t bag) { return Check(s.Remaining(bag)); })
      .def("bag_size", &BagSampler::bag_size)
      .def_property_readonly("num_bags", &BagSampler::num_bags)
      .def_property_readonly("k", &BagSampler::k)
      .def_property_readonly("draws", &BagSampler::draws)
      .def_property_readonly("recoveries", &BagSampler::recoveries)
      .def_property_readonly("block", &BagSampler::block);
}

}  // namespace stoker::glue
