// The _stoker_parquet extension module: stoker.io.ParquetDataset over
// Apache Arrow's C++ Parquet reader (src/parquet/), local or remote files
// (its Store::Open reaches http(s):// and s3:// through stoker._stoker_remote,
// as _stoker's does: python/glue/remote_stores.cc), apart from _stoker so
// that only a program that reads Parquet loads libarrow and libparquet (the
// pyarrow wheel's, which stoker.parquet imports first).  Its ParquetDataset
// derives from the NativeDataset that _stoker registers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>

#include "glue/shared_runtime.h"
#include "glue/errors.h"
#include "glue/py_pump.h"
#include "glue/remote_stores.h"
#include "glue/store_values.h"
#include "order/index_order.h"
#include "stoker/parquet_dataset.h"

namespace py = pybind11;
using namespace stoker;
using stoker::glue::Check;
using stoker::glue::EpochOrderHandle;

PYBIND11_MODULE(_stoker_parquet, m) {
  m.doc() = "stoker's Parquet reader (see python/stoker/parquet.py for the public API)";
  // (NativeDataset, ParquetDataset's base; and the one stage clock per thread)
  stoker::glue::UseStokersStageRuntime(py::module_::import("stoker._stoker"));
  // http(s):// and s3:// files: this module's Store::Open loads
  // stoker._stoker_remote (libcurl) on first use, as _stoker's does.
  stoker::glue::RegisterRemoteStoreSchemes();
  py::class_<ParquetDataset, NativeDataset, std::shared_ptr<ParquetDataset>>(m, "ParquetDataset")
      .def_static("open", [](const std::vector<std::string>& paths, const std::vector<std::string>& columns,
                             uint32_t window, bool null_mask, uint64_t cache_bytes,
                             const std::map<std::string, std::string>& storage_options, const std::string& lists,
                             const std::string& strings) {
             ParquetOptions o;
             o.columns = columns, o.window = window, o.null_mask = null_mask, o.cache_bytes = cache_bytes;
             // (stoker.parquet checked the names: "each", "offsets" or "padded")
             auto layout = [](const std::string& s) {
               return s == "offsets" ? FieldLayout::kOffsets : s == "padded" ? FieldLayout::kPadded : FieldLayout::kEach;
             };
             o.lists = layout(lists), o.strings = layout(strings);
             o.store.s3 = glue::S3FromMap(storage_options);
             for (const std::string& p : paths) Check(glue::LoadRemoteStoresFor(p));
             Result<std::unique_ptr<ParquetDataset>> r = [&] {
               py::gil_scoped_release nogil;  // (every footer is read)
               return ParquetDataset::Open(paths, o);
             }();
             return std::shared_ptr<ParquetDataset>(Check(std::move(r))); })
      .def_property_readonly("row_groups", &ParquetDataset::row_groups)
      .def_property_readonly("window", &ParquetDataset::window)
      .def("cache_bytes_for", &ParquetDataset::CacheBytesFor,
           "The cache an epoch holding that many decoded row groups at a time needs.")
      .def("set_cache_budget", &ParquetDataset::SetCacheBudget)
      .def("stage_rows", &ParquetDataset::StageRows,
           "Copy each row out of its row group when its sizes are read (a shuffled epoch's).")
      // "tensor", "str" or "bytes" per field: what a variable uint8 field's sample is.
      .def_property_readonly("leaves", [](ParquetDataset& d) {
             std::vector<std::string> out;
             for (const FieldSpec& f : d.fields())
               out.push_back(f.leaf == FieldLeaf::kStr ? "str" : f.leaf == FieldLeaf::kBytes ? "bytes" : "tensor");
             return out; })
      .def("stats", [](ParquetDataset& d) {
             ParquetStats s = d.stats();
             py::dict out;
             out["requests"] = s.requests;
             out["bytes_fetched"] = s.bytes_fetched;
             out["row_groups_decoded"] = s.row_groups_decoded;
             out["decoded_bytes"] = s.decoded_bytes;
             out["peak_decoded_bytes"] = s.peak_decoded_bytes;
             out["behind_timeouts"] = s.behind_timeouts;
             out["pages_decoded"] = s.pages_decoded;
             out["evictions"] = s.evictions;
             out["cache_budget"] = s.cache_budget;
             out["pool_keep"] = s.pool_keep;
             out["pool_kept_bytes"] = s.pool_kept_bytes;
             out["pool_reused"] = s.pool_reused;
             out["pool_fresh"] = s.pool_fresh;
             return out; })
      // This rank's order of an epoch, an EpochOrder (row groups shuffled
      // `window` at a time; the readers decode ahead in it).
      .def("order", [](ParquetDataset& d, uint64_t epoch, bool shuffle, uint64_t seed, uint32_t rank,
                       uint32_t world_size, bool pad) {
             OrderRecipe o;
             o.epoch = epoch, o.shuffle = shuffle, o.seed = seed, o.rank = rank, o.world_size = world_size, o.pad = pad;
             std::vector<int64_t> v;
             {
               py::gil_scoped_release nogil;
               v = d.Order(o);
             }
             return EpochOrderHandle{std::make_shared<VectorOrder>(std::move(v)), nullptr}; })
      // Every rank's order of an epoch, before the split (an EpochOrder).
      .def("global_order", [](ParquetDataset& d, uint64_t epoch, bool shuffle, uint64_t seed) {
             OrderRecipe o;
             o.epoch = epoch, o.shuffle = shuffle, o.seed = seed;
             std::vector<int64_t> v;
             {
               py::gil_scoped_release nogil;
               v = d.GlobalOrder(o);
             }
             return EpochOrderHandle{std::make_shared<VectorOrder>(std::move(v)), nullptr}; });
}
