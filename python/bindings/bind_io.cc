// Binds the native read path (src/io, loader/native_workers.h): datasets,
// transforms and writers.  Registration and argument conversion only.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "core/atomic_file.h"
#include "glue/errors.h"
#include "io/mixed_dataset.h"
#include "glue/options.h"
#include "glue/read_sample.h"
#include "io/record_file_dataset.h"
#include "io/tar_file.h"
#include "io/tar_shard_dataset.h"
#include "io/tfrecord_dataset.h"
#include "io/tfrecord_writer.h"
#include "loader/native_workers.h"
#include "shm/batch_format.h"
#include "stoker/transforms.h"
#include "text/pack_block.h"
#include "text/packed_dataset.h"
#include "text/token_dataset.h"

namespace py = pybind11;

namespace stoker::glue {

namespace {

using Shape = std::vector<int64_t>;

std::shared_ptr<Transform> Take(Result<std::shared_ptr<Transform>> r) { return Check(std::move(r)); }

}  // namespace

void BindIo(py::module_& m) {
  py::class_<Transform, std::shared_ptr<Transform>>(m, "Transform")
      .def_static("cast", [](const std::string& dtype) { return MakeCast(Check(ParseElementType(dtype))); })
      .def_static("normalize", [](std::vector<double> mean, std::vector<double> std, int axis) {
             return Take(MakeNormalize(std::move(mean), std::move(std), axis)); })
      .def_static("crop", [](Shape off, Shape size) { return Take(MakeCrop(std::move(off), std::move(size))); })
      .def_static("random_crop", [](Shape size) { return Take(MakeRandomCrop(std::move(size))); })
      .def_static("flip", [](int axis, double p) { return Take(MakeFlip(axis, p)); })
      .def_static("reshape", [](Shape shape) { return Take(MakeReshape(std::move(shape))); })
      .def("describe", &Transform::Describe)
      // One array outside a loader: (dtype, shape, bytes) -> (dtype, shape, bytes).
      .def("apply", [](Transform& t, const std::string& dtype, Shape shape, py::bytes data, uint64_t random) {
             FieldSpec in{"", Check(ParseElementType(dtype)), std::move(shape)};
             const std::string_view src = data;
             if (src.size() != in.bytes())
               Throw(Status::InvalidArgument("Transform.apply: " + std::to_string(src.size()) +
                                             " bytes for a shape of " + std::to_string(in.bytes())));
             FieldSpec out = Check(t.OutputSpec(in));
             std::string dst(out.bytes(), '\0');
             t.Apply(in, reinterpret_cast<const uint8_t*>(src.data()), reinterpret_cast<uint8_t*>(dst.data()), random);
             return py::make_tuple(DTypeName(static_cast<DType>(out.dtype)), out.shape, py::bytes(dst)); });

  py::class_<NativeDataset, std::shared_ptr<NativeDataset>>(m, "NativeDataset")
      .def_static("open_raw", [](const std::string& path, const std::string& dtype, Shape shape, const std::string& io) {
             ElementType t = Check(ParseElementType(dtype));
             return std::shared_ptr<NativeDataset>(
                 Check(RecordFileDataset::OpenRaw(path, t, std::move(shape), Check(ParseIoMode(io))))); })
      .def_static("mixed", [](std::vector<std::shared_ptr<NativeDataset>> sources) {
             return std::static_pointer_cast<NativeDataset>(Check(MixedDataset::Make(std::move(sources)))); },
           "Native datasets laid end to end (stoker.Mix's sources read by C++ threads).")
      .def_static("open_tokens", [](const std::vector<std::string>& paths, const std::string& flat_dtype, int64_t eos_id,
                                    int64_t vocab_size, const std::string& out, const std::string& on_error) {
             TokenDatasetOptions o{flat_dtype, eos_id, vocab_size, Check(ParseElementType(out))};
             OnError e = ParseOnError(on_error);
             std::shared_ptr<TokenDataset> d;
             {
               py::gil_scoped_release nogil;  // (flat files are scanned once)
               auto r = TokenDataset::Open(paths, o);
               py::gil_scoped_acquire gil;
               d = Check(std::move(r));
             }
             d->set_on_error(e);
             return std::static_pointer_cast<NativeDataset>(d); },
           "Documents of token files (text/token_dataset.h): Megatron .bin/.idx, flat .bin, .npy.")
      .def_static("token_counts", [](const std::shared_ptr<NativeDataset>& d) {
             auto t = std::dynamic_pointer_cast<TokenDataset>(d);
             if (!t) Throw(Status::InvalidArgument("not a TokenDataset"));
             std::vector<uint32_t> out(t->size());
             for (uint64_t i = 0; i < t->size(); ++i) out[i] = t->DocumentLength(i);
             return py::make_tuple(t->tokens(), py::array_t<uint32_t>(out.size(), out.data())); },
           "(tokens, each document's length) of a TokenDataset.")
      .def_static("token_block", [](const std::shared_ptr<NativeDataset>& d, py::array_t<int64_t, py::array::c_style> docs,
                                    int64_t eos_id) {
             auto t = std::dynamic_pointer_cast<TokenDataset>(d);
             if (!t) Throw(Status::InvalidArgument("not a TokenDataset"));
             const auto m = static_cast<uint64_t>(docs.size());
             const int64_t* doc = docs.data();
             const uint64_t extra = eos_id >= 0 ? 1 : 0;
             py::array_t<uint64_t> starts(static_cast<py::ssize_t>(m + 1));
             uint64_t* at = starts.mutable_data();
             at[0] = 0;
             for (uint64_t i = 0; i < m; ++i) {
               if (doc[i] < 0 || static_cast<uint64_t>(doc[i]) >= t->size())
                 Throw(Status::InvalidArgument(t->Describe() + ": no document " + std::to_string(doc[i])));
               at[i + 1] = at[i] + t->DocumentLength(static_cast<uint64_t>(doc[i])) + extra;
             }
             py::array_t<int64_t> tokens(static_cast<py::ssize_t>(at[m]));
             int64_t* out = tokens.mutable_data();
             Status st = [&] {
               py::gil_scoped_release nogil;
               for (uint64_t i = 0; i < m; ++i) {
                 const uint64_t n = at[i + 1] - at[i] - extra;
                 STOKER_RETURN_IF_ERROR(t->ReadTokens(static_cast<uint64_t>(doc[i]), 0, n, out + at[i]));
                 if (extra) out[at[i + 1] - 1] = eos_id;
               }
               return Status::OK();
             }();
             Check(st);
             return py::make_tuple(tokens, starts); },
           "(tokens, starts) of a TokenDataset's documents `docs` end to end (eos_id >= 0: after each).")
      .def_static("packed", [](std::vector<std::shared_ptr<NativeDataset>> sources, py::array_t<uint64_t> docs,
                               uint32_t seq_len, const std::string& mode, uint32_t window, int64_t eos_id, int64_t pad_id) {
             std::vector<std::shared_ptr<TokenDataset>> tokens;
             for (size_t i = 0; i < sources.size(); ++i) {
               auto t = std::dynamic_pointer_cast<TokenDataset>(sources[i]);
               if (!t) Throw(Status::InvalidArgument("Pack: source " + std::to_string(i) + " is not a TokenDataset"));
               tokens.push_back(std::move(t));
             }
             if (mode != "concat" && mode != "best_fit")
               Throw(Status::InvalidArgument("Pack: mode='" + mode + "' is not one of 'concat', 'best_fit'"));
             PackOptions o{seq_len, mode == "concat" ? PackMode::kConcat : PackMode::kBestFit, window, eos_id, pad_id};
             std::vector<uint64_t> order(docs.data(), docs.data() + docs.size());
             std::shared_ptr<PackedDataset> d;
             {
               py::gil_scoped_release nogil;  // (the plan: a pass over the documents' lengths)
               auto r = PackedDataset::Make(std::move(tokens), order, o);
               py::gil_scoped_acquire gil;
               d = Check(std::move(r));
             }
             return std::static_pointer_cast<NativeDataset>(d); },
           "Sequences packed from TokenDatasets laid end to end (text/packed_dataset.h), documents in `docs`' order.")
      .def_static("pack_counts", [](const std::shared_ptr<NativeDataset>& d) {
             auto p = std::dynamic_pointer_cast<PackedDataset>(d);
             if (!p) Throw(Status::InvalidArgument("not a packed dataset"));
             return py::make_tuple(p->plan().sequences(), p->plan().tokens, p->plan().pieces.size()); },
           "(sequences, tokens, pieces) of a packed dataset.")
      .def_static("open_npy", [](const std::string& path, const std::string& io) {
             return std::shared_ptr<NativeDataset>(Check(RecordFileDataset::OpenNpy(path, Check(ParseIoMode(io))))); })
      .def_static("open_npy_dir", [](const std::string& dir) {
             return std::shared_ptr<NativeDataset>(Check(NpyDirDataset::Open(dir))); })
      .def_static("open_tfrecord", [](const std::vector<std::string>& paths, const FeatureArgs& features,
                                      const std::string& index_dir, bool verify_crc, const std::string& io,
                                      const std::string& on_error) {
             std::vector<FieldSpec> specs = FeatureSpecs(features);
             TFRecordOptions o{index_dir, true, verify_crc, Check(ParseIoMode(io)), ParseOnError(on_error)};
             std::unique_ptr<TFRecordDataset> d;
             {
               py::gil_scoped_release nogil;  // the first open indexes the files
               auto r = TFRecordDataset::Open(paths, std::move(specs), o);
               py::gil_scoped_acquire gil;
               d = Check(std::move(r));
             }
             return std::shared_ptr<NativeDataset>(std::move(d)); })
      .def_static("open_tar", [](const std::vector<std::string>& paths, const TarFieldArgs& fields,
                                 const std::string& io, const std::string& on_error) {
             std::vector<TarFieldDecl> decls = TarDecls(fields);
             TarShardOptions o{Check(ParseIoMode(io)), ParseOnError(on_error)};
             std::unique_ptr<TarShardDataset> d;
             {
               py::gil_scoped_release nogil;
               auto r = TarShardDataset::Open(paths, std::move(decls), o);
               py::gil_scoped_acquire gil;
               d = Check(std::move(r));
             }
             return std::shared_ptr<NativeDataset>(std::move(d)); })
      .def_static("transform", [](std::shared_ptr<NativeDataset> base,
                                  std::vector<std::pair<std::string, TransformChain>> chains, uint64_t seed) {
             return Check(TransformDataset(std::move(base), std::move(chains), seed)); })
      .def("__len__", &NativeDataset::size)
      .def_property_readonly("fields", [](NativeDataset& d) {
             py::list out;
             for (const FieldSpec& f : d.fields())
               out.append(py::make_tuple(f.name, DTypeName(static_cast<DType>(f.dtype)), f.shape, f.variable));
             return out; })
      .def_property_readonly("tar_fields", [](NativeDataset& d) -> py::object {
             auto* t = dynamic_cast<TarShardDataset*>(&d);
             if (!t) return py::none();
             py::list out;
             for (const TarFieldDecl& f : t->decls()) out.append(py::make_tuple(f.ext, TarKindName(f.kind)));
             return out; })
      .def_property_readonly("index_paths", [](NativeDataset& d) -> py::object {
             auto* t = dynamic_cast<TFRecordDataset*>(&d);
             if (!t) return py::none();
             return py::cast(t->index_paths()); })
      .def("describe", &NativeDataset::Describe)
      .def("set_epoch", &NativeDataset::SetEpoch)
      .def("set_seed", &NativeDataset::SetSeed)
      .def_property_readonly("structure", [](NativeDataset& d) {
             return d.structure() == SampleStructure::kTuple ? "tuple" : "dict"; })
      .def_property_readonly("skipped", &NativeDataset::skipped)
      .def_property_readonly("last_skipped", &NativeDataset::last_skipped)
      .def_property_readonly("on_error", [](NativeDataset& d) { return d.on_error() == OnError::kSkip ? "skip" : "raise"; })
      // One sample as bytes per field (the slow path, for __getitem__).
      .def("read", [](NativeDataset& d, uint64_t i) {
             return ReadSample(d, i, [&](uint8_t* const* dst) { return d.Read(i, dst); }); });

  py::class_<NativeWorkers>(m, "NativeWorkers")
      .def(py::init([](std::shared_ptr<Engine> e, std::shared_ptr<NativeDataset> d, const std::string& priority,
                       uint32_t start) {
             return new NativeWorkers(std::move(e), std::move(d), Check(ParseReaderPriority(priority)), start); }),
           py::arg("engine"), py::arg("dataset"), py::arg("priority") = "normal", py::arg("start") = 0,
           "Reader threads for the first `start` worker ids (0: all of the engine's).")
      .def("stop", &NativeWorkers::Stop, py::call_guard<py::gil_scoped_release>())
      .def("start", [](NativeWorkers& w, uint32_t id) {
             Status st;
             {
               py::gil_scoped_release unlocked;  // (it waits for the thread to run)
               st = w.Start(id);
             }
             Check(st); }, "Starts reader `id`'s thread (nothing if it runs).")
      .def("join", &NativeWorkers::Join, py::call_guard<py::gil_scoped_release>(),
           "Joins reader `id`'s thread once the scheduler retired it.")
      .def("running", &NativeWorkers::running);

  // core/atomic_file.h: a file that appears whole or not at all.
  py::class_<AtomicFile>(m, "AtomicFile")
      .def(py::init([](const std::string& path) { return new AtomicFile(Check(AtomicFile::Create(path))); }))
      .def("write", [](AtomicFile& f, py::buffer b) {
             py::buffer_info info = b.request();
             Check(f.Append(info.ptr, static_cast<size_t>(info.size * info.itemsize))); })
      .def("commit", [](AtomicFile& f, bool sync) {
             Status st = [&] { py::gil_scoped_release nogil; return f.Commit(sync); }();
             Check(st); }, py::arg("sync") = true)
      // Drops what was written (the temporary file), now.
      .def("abort", [](AtomicFile& f) { AtomicFile gone(std::move(f)); });
  // A block of tokenized documents packed (text/pack_block.h): a dict of
  // numpy arrays, the four fields [sequences, seq_len], cu_seqlens (every
  // sequence's, end to end) and cu_first (where each begins there), and the
  // tokens.
  m.def("pack_block", [](py::array_t<int64_t, py::array::c_style> tokens, py::array_t<uint64_t, py::array::c_style> starts,
                         py::array_t<int64_t, py::array::c_style> ids, uint32_t seq_len, const std::string& mode,
                         uint32_t window, int64_t pad_id, bool longest_first, uint64_t shuffle_key) {
    if (mode != "concat" && mode != "best_fit")
      Throw(Status::InvalidArgument("Pack: mode='" + mode + "' is not one of 'concat', 'best_fit'"));
    const uint64_t docs = ids.size();
    if (static_cast<uint64_t>(starts.size()) != docs + 1 ||
        (docs && starts.data()[docs] != static_cast<uint64_t>(tokens.size())))
      Throw(Status::InvalidArgument("pack_block: starts should be documents + 1 offsets ending at the tokens' count"));
    Result<BlockPacker> made = [&] {
      py::gil_scoped_release nogil;
      BlockPackOptions o{seq_len, mode == "concat" ? PackMode::kConcat : PackMode::kBestFit, window, longest_first,
                         shuffle_key};
      return BlockPacker::Make(tokens.data(), starts.data(), ids.data(), docs, o);
    }();
    BlockPacker b = Check(std::move(made));
    const auto n = static_cast<py::ssize_t>(b.sequences());
    const std::vector<py::ssize_t> shape{n, static_cast<py::ssize_t>(seq_len)};
    py::array_t<int64_t> input_ids(shape), labels(shape), positions(shape), documents(shape);
    py::array_t<int32_t> cu(static_cast<py::ssize_t>(b.cu_entries()));
    py::array_t<int64_t> cu_first(n + 1);
    Status st = [&] {
      py::gil_scoped_release nogil;
      return b.Fill(pad_id, input_ids.mutable_data(), labels.mutable_data(), positions.mutable_data(),
                    documents.mutable_data(), cu.mutable_data(), cu_first.mutable_data());
    }();
    Check(st);
    py::dict out;
    out["input_ids"] = input_ids;
    out["labels"] = labels;
    out["position_ids"] = positions;
    out["document_ids"] = documents;
    out["cu_seqlens"] = cu;
    out["cu_first"] = cu_first;
    out["tokens"] = b.tokens();
    return out;
  }, py::arg("tokens"), py::arg("starts"), py::arg("ids"), py::arg("seq_len"), py::arg("mode"), py::arg("window"),
     py::arg("pad_id"), py::arg("longest_first") = false, py::arg("shuffle_key") = 0);
  m.def("write_file_atomically", [](const std::string& path, py::bytes data) {
    std::string_view v = data;
    Status st = [&] { py::gil_scoped_release nogil; return WriteFileAtomically(path, v); }();
    Check(st);
  });

  py::class_<TFRecordWriter>(m, "TFRecordWriter")
      .def(py::init([](const std::string& path) { return Check(TFRecordWriter::Create(path)).release(); }))
      // features: (name, kind "float"/"int64"/"bytes", value) with value a
      // C-contiguous float32 / int64 buffer, or a list of bytes.
      .def("write", [](TFRecordWriter& w, const std::vector<std::tuple<std::string, std::string, py::object>>& feats) {
             std::vector<FeatureValue> values;
             std::vector<py::buffer_info> keep;
             keep.reserve(feats.size());
             for (const auto& [name, kind, value] : feats) {
               FeatureValue v;
               v.name = name;
               if (kind == "bytes") {
                 v.kind = FeatureValue::Kind::kBytes;
                 for (py::handle b : value) {
                   char* p;
                   Py_ssize_t n;
                   if (PyBytes_AsStringAndSize(b.ptr(), &p, &n) != 0) throw py::error_already_set();
                   v.bytes.emplace_back(p, static_cast<size_t>(n));
                 }
               } else {
                 keep.push_back(py::buffer(value).request());
                 const py::buffer_info& bi = keep.back();
                 v.count = static_cast<uint64_t>(bi.size);
                 if (kind == "float") {
                   v.kind = FeatureValue::Kind::kFloat;
                   v.floats = static_cast<const float*>(bi.ptr);
                 } else {
                   v.kind = FeatureValue::Kind::kInt64;
                   v.ints = static_cast<const int64_t*>(bi.ptr);
                 }
               }
               values.push_back(std::move(v));
             }
             Check(w.Write(values)); })
      .def("close", [](TFRecordWriter& w) { Check(w.Close()); })
      .def_property_readonly("records", &TFRecordWriter::records);

  m.def("tar_member", [](const std::string& path, py::bytes data) {
    std::string out;
    const std::string_view d = data;
    Check(AppendTarMember(&out, path, d.data(), d.size()));
    return py::bytes(out);
  });
  m.def("tar_end", [] {
    std::string out;
    AppendTarEnd(&out);
    return py::bytes(out);
  });
}

}  // namespace stoker::glue
