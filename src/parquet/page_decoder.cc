// PageDecoder (page_decoder.h).
#include "parquet/page_decoder.h"

#include <arrow/io/memory.h>
#include <arrow/ipc/writer.h>
#include <arrow/util/base64.h>
#include <parquet/arrow/reader.h>
#include <parquet/page_index.h>
#include <parquet/properties.h>
#include <parquet/schema.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace stoker {

size_t ColumnPages::PageOf(int64_t row) const {
  return static_cast<size_t>(std::upper_bound(first_row.begin(), first_row.end(), row) - first_row.begin()) - 1;
}

Result<std::shared_ptr<PageDecoder>> PageDecoder::Make(const std::shared_ptr<parquet::FileMetaData>& meta,
                                                       const std::shared_ptr<arrow::Schema>& schema, int field,
                                                       int leaf) {
  std::shared_ptr<PageDecoder> d(new PageDecoder());
  d->meta_ = meta;
  d->leaf_ = leaf;
  const parquet::schema::GroupNode* root = meta->schema()->group_node();
  parquet::schema::NodePtr node = root->field(field);
  d->schema_.Init(parquet::schema::GroupNode::Make(root->name(), parquet::Repetition::REQUIRED, {node}));
  // The column's Arrow type, as Arrow's writer records a file's: its IPC
  // schema in base64 under ARROW:schema.
  auto one = arrow::schema({schema->field(field)});
  auto ipc = arrow::ipc::SerializeSchema(*one);
  if (!ipc.ok()) return Status::Internal("ParquetDataset: " + ipc.status().message());
  d->arrow_ = arrow::key_value_metadata({"ARROW:schema"}, {arrow::util::base64_encode((*ipc)->ToString())});
  return d;
}

Result<std::vector<ColumnPages>> PageDecoder::Pages(parquet::ParquetFileReader& reader, const std::string& path) const {
  std::vector<ColumnPages> out;
  std::shared_ptr<parquet::PageIndexReader> index;
  try {
    index = reader.GetPageIndexReader();
  } catch (const std::exception& e) {
    return Status::DataLoss(path + ": its page index cannot be read: " + e.what());
  }
  for (int g = 0; g < meta_->num_row_groups(); ++g) {
    std::shared_ptr<parquet::OffsetIndex> offsets;
    try {
      auto rg = index ? index->RowGroup(g) : nullptr;
      offsets = rg ? rg->GetOffsetIndex(leaf_) : nullptr;
    } catch (const std::exception& e) {
      return Status::DataLoss(path + ", row group " + std::to_string(g) + ": its page index cannot be read: " + e.what());
    }
    if (!offsets)
      return Status::InvalidArgument(path + " has no page index (row group " + std::to_string(g) + ", column '" +
                                     meta_->schema()->Column(leaf_)->path()->ToDotString() +
                                     "'): a global shuffle finds each row's page through it; write the files with "
                                     "pyarrow.parquet.write_table(..., write_page_index=True), or shuffle by "
                                     "windows of row groups (shuffle_window=N)");
    ColumnPages p;
    auto chunk = meta_->RowGroup(g)->ColumnChunk(leaf_);
    p.rows = meta_->RowGroup(g)->num_rows();
    for (const parquet::PageLocation& loc : offsets->page_locations()) {
      p.offset.push_back(loc.offset);
      p.bytes.push_back(loc.compressed_page_size);
      p.first_row.push_back(loc.first_row_index);
    }
    if (chunk->has_dictionary_page() && !p.offset.empty()) {
      p.dictionary_offset = chunk->dictionary_page_offset();
      p.dictionary_bytes = p.offset[0] - p.dictionary_offset;
    }
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::shared_ptr<arrow::Array>> PageDecoder::Decode(arrow::io::RandomAccessFile& file, int g,
                                                          const ColumnPages& pages, size_t page) const {
  auto chunk = meta_->RowGroup(g)->ColumnChunk(leaf_);
  const int64_t rows = pages.RowsOf(page);
  // "PAR1", the dictionary page, the data page, the footer, its length, "PAR1".
  std::string bytes = "PAR1";
  int64_t dict_at = -1;
  auto read = [&](int64_t offset, int64_t n) -> Status {
    auto got = file.ReadAt(offset, n);
    if (!got.ok()) return Status::IOError(got.status().message());
    if ((*got)->size() != n) return Status::DataLoss("the file ends inside a page (truncated?)");
    bytes.append(reinterpret_cast<const char*>((*got)->data()), static_cast<size_t>(n));
    return Status::OK();
  };
  if (pages.dictionary_offset >= 0) {
    dict_at = static_cast<int64_t>(bytes.size());
    STOKER_RETURN_IF_ERROR(read(pages.dictionary_offset, pages.dictionary_bytes));
  }
  const int64_t data_at = static_cast<int64_t>(bytes.size());
  STOKER_RETURN_IF_ERROR(read(pages.offset[page], pages.bytes[page]));
  const int64_t chunk_bytes = static_cast<int64_t>(bytes.size()) - 4;
  try {
    auto props = parquet::WriterProperties::Builder().compression(chunk->compression())->build();
    auto builder = parquet::FileMetaDataBuilder::Make(&schema_, props);
    auto* rg = builder->AppendRowGroup();
    rg->set_num_rows(rows);
    auto* cc = rg->NextColumnChunk();
    std::map<parquet::Encoding::type, int32_t> dict_stats, data_stats;
    if (dict_at >= 0) dict_stats[parquet::Encoding::PLAIN] = 1;
    data_stats[parquet::Encoding::PLAIN] = 1;
    // (num_values: the reader stops at the chunk's end, past the one page)
    cc->Finish(INT32_MAX, dict_at >= 0 ? dict_at : 0, 0, data_at, chunk_bytes, chunk_bytes, dict_at >= 0, false,
               dict_stats, data_stats);
    rg->Finish(chunk_bytes);
    std::unique_ptr<parquet::FileMetaData> footer = builder->Finish(arrow_);
    auto sink = arrow::io::BufferOutputStream::Create();
    if (!sink.ok()) return Status::Internal(sink.status().message());
    footer->WriteTo(sink->get());
    auto buf = (*sink)->Finish();
    if (!buf.ok()) return Status::Internal(buf.status().message());
    const auto len = static_cast<uint32_t>((*buf)->size());
    bytes.append(reinterpret_cast<const char*>((*buf)->data()), static_cast<size_t>(len));
    char tail[8];
    std::memcpy(tail, &len, 4);  // (little-endian, as Parquet's)
    std::memcpy(tail + 4, "PAR1", 4);
    bytes.append(tail, 8);
    auto input = std::make_shared<arrow::io::BufferReader>(arrow::Buffer::FromString(std::move(bytes)));
    parquet::ArrowReaderProperties arrow_props;
    arrow_props.set_use_threads(false);
    auto made = parquet::arrow::FileReader::Make(arrow::default_memory_pool(), parquet::ParquetFileReader::Open(input),
                                                 arrow_props);
    if (!made.ok()) return Status::DataLoss(made.status().message());
    auto read_table = (*made)->ReadTable();
    if (!read_table.ok()) return Status::DataLoss(read_table.status().message());
    std::shared_ptr<arrow::Table> t = *read_table;
    if (t->num_rows() != rows)
      return Status::DataLoss("a page of " + std::to_string(t->num_rows()) + " rows where the page index says " +
                              std::to_string(rows));
    auto combined = t->CombineChunks();
    if (!combined.ok()) return Status::DataLoss(combined.status().message());
    return (*combined)->column(0)->chunk(0);
  } catch (const std::exception& e) {
    return Status::DataLoss(e.what());
  }
}

}  // namespace stoker
