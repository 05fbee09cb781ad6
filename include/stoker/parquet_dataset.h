// stoker::ParquetDataset: the rows of Parquet files as a NativeDataset
// (stoker.io.ParquetDataset in Python), read with Apache Arrow's C++
// Parquet reader (the libarrow and libparquet that the pyarrow wheel ships;
// docs/parquet.md says why).  Arrow's headers stay out of this one.
//
// A sample is a row: a field per column (or per requested column), in the
// schema's order:
//   - a number (int8..uint64, float16/32/64, bool; date, time and
//     timestamp columns as their int32/int64 values): a scalar field;
//   - a fixed-size list of numbers: a fixed field of that length;
//   - a list of numbers: a variable field (a 1-D tensor per row), whose
//     batch is values + offsets by default (ParquetOptions::lists);
//   - a string or binary value: a variable uint8 field whose batch is a
//     list of str (FieldLeaf::kStr) or bytes (kBytes) by default, or its
//     bytes + offsets (ParquetOptions::strings);
//   - a dictionary-encoded column: its values, decoded.
// A null is an error naming the file, row group, column and row, unless
// null_mask is set: then each nullable column gets a bool field
// "<column>.valid" beside it, and a null value reads as zeros (empty).
//
// Rows are read out of decoded row groups, each decoded once and kept in
// a cache of at most cache_bytes; the order of a shuffled epoch
// (OrderRecipe::GlobalByShards with row groups as the shards) visits the
// row groups in a shuffled order, `window` of them at a time, so that a
// full epoch decodes each row group once when the cache holds a window.
// Only the requested columns' chunks are read from the files.  With window
// 0 a shuffled epoch is a shuffle of every row, each read through its data
// pages (found through the files' page index) instead of its row group.
#ifndef STOKER_PARQUET_DATASET_H_
#define STOKER_PARQUET_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stoker/native_dataset.h"
#include "stoker/store.h"

namespace stoker {

// Paths are local files, or URLs of files in a store (stoker/store.h):
// http(s)://host/dir/a.parquet, s3://bucket/prefix/a.parquet, of which only
// the footer (Arrow reads a file's last 64 KiB for it) and the column chunks
// read are fetched, by range requests; "s3://bucket/prefix/" (a trailing
// slash) is every .parquet object under the prefix.
struct ParquetOptions {
  std::vector<std::string> columns;  // empty: every column of the first file
  uint32_t window = 32;              // row groups read together in a shuffled epoch; 0: a global shuffle
                                     // (each row through its pages: the files need a page index)
  bool null_mask = false;            // nulls: an error (false), or "<column>.valid" fields
  // How a batch holds list columns, and string and binary ones
  // (FieldLayout, include/stoker/native_dataset.h).
  FieldLayout lists = FieldLayout::kOffsets;
  FieldLayout strings = FieldLayout::kEach;
  uint64_t cache_bytes = 0;          // decoded row groups kept; 0: the window's largest, and 64 MiB more
  StoreOptions store;                // remote files
};

// Counters of the reads, for stats() and tests.
struct ParquetStats {
  uint64_t row_groups_decoded = 0;  // decodes, including a row group decoded again after eviction
  uint64_t decoded_bytes = 0;       // held by the cache now
  uint64_t peak_decoded_bytes = 0;
  uint64_t evictions = 0;
  uint64_t pages_decoded = 0;       // a global shuffle's (window 0) pages decoded
  uint64_t behind_timeouts = 0;     // waits for row groups behind a reader that ran out (RowGroupCache)
  uint64_t cache_budget = 0;        // the most the cache holds (ParquetOptions::cache_bytes, or chosen)
  uint64_t requests = 0, bytes_fetched = 0;  // remote files: range requests (and sizes asked), bytes received
  // The decode pool's (src/parquet/decode_pool.h): the most it keeps of
  // freed blocks for the next decodes (beside cache_budget), what it keeps
  // now, and the large blocks given from them or made fresh.
  uint64_t pool_keep = 0, pool_kept_bytes = 0, pool_reused = 0, pool_fresh = 0;
};

class ParquetDataset : public NativeDataset {
 public:
  // Footers of every file are read here; errors name the file (and the
  // column where schemas disagree).
  static Result<std::unique_ptr<ParquetDataset>> Open(const std::vector<std::string>& paths, const ParquetOptions& o);
  ~ParquetDataset() override;

  uint64_t size() const override;
  const std::vector<FieldSpec>& fields() const override;
  Status Read(uint64_t index, uint8_t* const* dst) override;
  Status SampleBytes(uint64_t index, uint64_t* bytes) override;
  std::string Describe() const override;
  std::string DescribeSample(uint64_t index) const override;
  // The row groups as shards, `window` of them shuffled together, this
  // rank's contiguous part of it; the readers decode ahead in it.
  std::vector<int64_t> Order(const OrderRecipe& o) override;
  // Every rank's order of the epoch, before the split (the epoch protocol's
  // global order: a resume on another topology splits its remainder).
  std::vector<int64_t> GlobalOrder(const OrderRecipe& o) const;

  // {first row, rows} of each row group, in file order.
  const std::vector<std::pair<uint64_t, uint64_t>>& row_groups() const;
  // The cache an epoch holding `row_groups` decoded row groups at a time
  // needs: the largest ones' estimated decoded bytes, and 64 MiB.  (Open's
  // default, without cache_bytes: the shuffle window and 2.)
  uint64_t CacheBytesFor(uint32_t row_groups) const;
  // Sets the decoded row groups' budget (a loader sizes it to its epochs).
  void SetCacheBudget(uint64_t bytes);
  // Whether its epochs are shuffled by windows, read by a Mix whose source
  // it is (the dataset's own epochs set it themselves): each row is then
  // copied out of its row group when its sizes are read (parquet_dataset.cc's
  // Staged), and a reader that needs room in the cache waits for the row
  // groups begun and not finished (RowGroupCache::SetWaitForBegun).
  void StageRows(bool on);
  uint32_t window() const;
  ParquetStats stats() const;

 private:
  // A global shuffle's row, through its pages: its fields' bytes (bytes),
  // or the row copied (dst).
  Status PageRowBytes(uint64_t index, uint64_t* bytes, uint8_t* const* dst);
  struct Impl;
  explicit ParquetDataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace stoker

#endif  // STOKER_PARQUET_DATASET_H_
