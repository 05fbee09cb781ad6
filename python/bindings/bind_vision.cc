// Binds stoker.vision (include/stoker/image*.h): decoding, the transform
// pipeline and image datasets.  Registration and argument conversion only;
// every decode and transform runs without the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "glue/errors.h"
#include "glue/options.h"
#include "glue/read_sample.h"
#include "shm/batch_format.h"
#include "stoker/image.h"
#include "stoker/image_dataset.h"
#include "stoker/image_transforms.h"

namespace py = pybind11;

namespace stoker::glue {

namespace {

using Kind = ImageOp::Kind;

// One step from its Python description: {"kind": "resize", "size": (h, w) or
// (s, 0), ...}, as stoker/vision.py writes it.
ImageOp OpFromDict(const py::dict& d) {
  static const std::pair<const char*, Kind> kKinds[] = {
      {"resize", Kind::kResize},         {"center_crop", Kind::kCenterCrop},
      {"random_crop", Kind::kRandomCrop}, {"random_resized_crop", Kind::kRandomResizedCrop},
      {"hflip", Kind::kHorizontalFlip},  {"to_dtype", Kind::kToDtype},
      {"normalize", Kind::kNormalize}};
  ImageOp op;
  const auto kind = d["kind"].cast<std::string>();
  bool known = false;
  for (const auto& [name, k] : kKinds)
    if (kind == name) op.kind = k, known = true;
  if (!known) Throw(Status::InvalidArgument("unknown image step '" + kind + "'"));
  auto get = [&](const char* key, auto* out) {
    if (d.contains(key)) *out = d[key].cast<std::remove_pointer_t<decltype(out)>>();
  };
  if (d.contains("size")) {
    auto hw = d["size"].cast<std::pair<int64_t, int64_t>>();
    op.height = hw.first;
    op.width = hw.second;
  }
  get("max_size", &op.max_size);
  if (d.contains("scale_range")) std::tie(op.scale_lo, op.scale_hi) = d["scale_range"].cast<std::pair<double, double>>();
  if (d.contains("ratio")) std::tie(op.ratio_lo, op.ratio_hi) = d["ratio"].cast<std::pair<double, double>>();
  get("p", &op.p);
  get("pad_if_needed", &op.pad_if_needed);
  if (d.contains("dtype")) op.dtype = Check(ParseElementType(d["dtype"].cast<std::string>()));
  get("scale", &op.scale);
  get("mean", &op.mean);
  get("std", &op.stddev);
  return op;
}

std::string_view Bytes(const py::buffer& b, py::buffer_info* keep) {
  *keep = b.request();
  return {static_cast<const char*>(keep->ptr), static_cast<size_t>(keep->size * keep->itemsize)};
}

}  // namespace

void BindVision(py::module_& m) {
  // (height, width, a bytearray of height x width x 3 RGB).
  m.attr("DEFAULT_MAX_IMAGE_PIXELS") = kDefaultMaxImagePixels;  // (stoker.vision.MAX_IMAGE_PIXELS)
  m.def("decode_image", [](py::buffer data, uint64_t max_pixels) {
    py::buffer_info keep;
    const std::string_view in = Bytes(data, &keep);
    std::vector<uint8_t> rgb;
    Result<ImageInfo> r = [&] {
      py::gil_scoped_release nogil;
      return DecodeImage(reinterpret_cast<const uint8_t*>(in.data()), in.size(), max_pixels, &rgb);
    }();
    const ImageInfo info = Check(std::move(r));
    return py::make_tuple(info.height, info.width,
                          py::bytearray(reinterpret_cast<const char*>(rgb.data()), rgb.size()));
  });
  m.def("image_info", [](py::buffer data) {
    py::buffer_info keep;
    const std::string_view in = Bytes(data, &keep);
    const ImageInfo info = Check(ReadImageInfo(reinterpret_cast<const uint8_t*>(in.data()), in.size()));
    return py::make_tuple(info.format == ImageFormat::kJpeg ? "jpeg" : "png", info.height, info.width);
  });

  py::class_<ImagePipeline, std::shared_ptr<ImagePipeline>>(m, "ImagePipeline")
      .def_static("make", [](const py::list& steps) {
             std::vector<ImageOp> ops;
             for (py::handle s : steps) ops.push_back(OpFromDict(s.cast<py::dict>()));
             auto p = Check(ImagePipeline::Make(std::move(ops)));
             return std::const_pointer_cast<ImagePipeline>(p); })
      .def("describe", &ImagePipeline::Describe)
      .def("crop_box", [](const ImagePipeline& p, size_t step, int64_t h, int64_t w, uint64_t random) {
             int64_t box[4];
             Check(p.CropBox(step, h, w, random, box));
             return py::make_tuple(box[0], box[1], box[2], box[3]); })
      .def_property_readonly("dtype", [](const ImagePipeline& p) { return DTypeName(static_cast<DType>(p.dtype())); })
      .def_property_readonly("fixed_size", [](const ImagePipeline& p) -> py::object {
             if (!p.fixed_size()) return py::none();
             return py::make_tuple(p.fixed_height(), p.fixed_width()); })
      // One image outside a loader: RGB bytes (h x w x 3) -> (dtype, (3, oh, ow), bytes).
      .def("apply", [](const ImagePipeline& p, py::buffer rgb, int64_t h, int64_t w, uint64_t random) {
             py::buffer_info keep;
             const std::string_view in = Bytes(rgb, &keep);
             if (h <= 0 || w <= 0 || in.size() != static_cast<size_t>(h * w * 3))
               Throw(Status::InvalidArgument("an image of " + std::to_string(h) + "x" + std::to_string(w) +
                                             " RGB needs " + std::to_string(h * w * 3) + " bytes, got " +
                                             std::to_string(in.size())));
             int64_t oh = 0, ow = 0;
             p.OutputSize(h, w, &oh, &ow);
             std::string out(static_cast<size_t>(3 * oh * ow) * ElementSize(p.dtype()), '\0');
             Status st = [&] {
               py::gil_scoped_release nogil;
               return p.Run(reinterpret_cast<const uint8_t*>(in.data()), h, w, random,
                            reinterpret_cast<uint8_t*>(out.data()));
             }();
             Check(st);
             return py::make_tuple(DTypeName(static_cast<DType>(p.dtype())), std::vector<int64_t>{3, oh, ow},
                                   py::bytes(out)); });

  py::class_<ImageDataset, NativeDataset, std::shared_ptr<ImageDataset>>(m, "ImageDataset")
      .def_static("folder", [](std::vector<std::string> paths, std::vector<int64_t> labels,
                               std::shared_ptr<ImagePipeline> transform, uint64_t max_pixels,
                               const std::string& on_error) {
             auto d = Check(ImageFolderDataset(std::move(paths), std::move(labels), std::move(transform), max_pixels));
             d->set_on_error(ParseOnError(on_error));
             return d; })
      .def(py::init([](std::shared_ptr<NativeDataset> base, const std::string& field,
                       std::shared_ptr<ImagePipeline> transform, uint64_t max_pixels, const std::string& on_error) {
             auto d = Check(ImageDataset::Make(std::move(base), field, std::move(transform), max_pixels));
             d->set_on_error(ParseOnError(on_error));
             return d; }))
      .def_property_readonly("image_field", &ImageDataset::image_field)
      // One sample with the random word given: ([bytes per field], (h, w)).
      .def("read_with", [](ImageDataset& d, uint64_t i, uint64_t random) {
             int64_t h = 0, w = 0;
             py::list parts = ReadSample(d, i, [&](uint8_t* const* dst) { return d.ReadWith(i, random, dst, &h, &w); });
             return py::make_tuple(parts, py::make_tuple(h, w)); });
}

}  // namespace stoker::glue
