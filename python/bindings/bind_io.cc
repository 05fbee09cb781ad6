// Binds the native read path (src/io, loader/native_workers.h).  Registration only.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "glue/errors.h"
#include "io/record_file_dataset.h"
#include "loader/native_workers.h"
#include "shm/batch_format.h"

namespace py = pybind11;

namespace stoker::glue {

void BindIo(py::module_& m) {
  py::class_<NativeDataset, std::shared_ptr<NativeDataset>>(m, "NativeDataset")
      .def_static("open_raw", [](const std::string& path, const std::string& dtype, std::vector<int64_t> shape) {
             ElementType t = Check(ParseElementType(dtype));
             return std::shared_ptr<NativeDataset>(Check(RecordFileDataset::OpenRaw(path, t, std::move(shape))));
           })
      .def_static("open_npy", [](const std::string& path) {
             return std::shared_ptr<NativeDataset>(Check(RecordFileDataset::OpenNpy(path)));
           })
      .def_static("open_npy_dir", [](const std::string& dir) {
             return std::shared_ptr<NativeDataset>(Check(NpyDirDataset::Open(dir)));
           })
      .def("__len__", &NativeDataset::size)
      .def_property_readonly("fields", [](NativeDataset& d) {
             py::list out;
             for (const FieldSpec& f : d.fields())
               out.append(py::make_tuple(f.name, DTypeName(static_cast<DType>(f.dtype)), f.shape));
             return out; })
      .def("describe", &NativeDataset::Describe)
      .def("read", [](NativeDataset& d, uint64_t i) {
             // One sample as bytes per field (the slow path, for __getitem__).
             std::vector<std::string> bufs;
             std::vector<uint8_t*> dst;
             for (const FieldSpec& f : d.fields()) bufs.emplace_back(f.bytes(), '\0');
             for (std::string& b : bufs) dst.push_back(reinterpret_cast<uint8_t*>(b.data()));
             Status st;
             {
               py::gil_scoped_release nogil;
               st = d.Read(i, dst.data());
             }
             Check(st);
             py::list out;
             for (const std::string& b : bufs) out.append(py::bytes(b));
             return out; });

  py::class_<NativeWorkers>(m, "NativeWorkers")
      .def(py::init([](std::shared_ptr<Engine> e, std::shared_ptr<NativeDataset> d) {
             return new NativeWorkers(std::move(e), std::move(d)); }))
      .def("stop", &NativeWorkers::Stop, py::call_guard<py::gil_scoped_release>());
}

}  // namespace stoker::glue
