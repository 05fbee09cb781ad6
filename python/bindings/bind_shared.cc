// Binds src/shared/ (shared memory blocks and containers).  Registration only.
#include <pybind11/pybind11.h>

#include "glue/errors.h"
#include "glue/py_shared.h"
#include "shared/shared_block.h"
#include "shared/string_list.h"

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
}

}  // namespace stoker::glue
