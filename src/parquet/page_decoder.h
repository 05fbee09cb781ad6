// PageDecoder: one data page of one column of a Parquet file, decoded
// alone (a global shuffle reads each row through its page, not its row
// group).  The page is found through the file's page index (its offset
// index: each page's place and first row); its bytes, and the column
// chunk's dictionary page when it has one, are read and given to Arrow's
// reader as a file of one column and one row group made for it in memory:
// a footer that describes the page as a column chunk, with the column's
// Arrow type (ARROW:schema), so that the page decodes as its row group
// would (fixed-size lists, dictionaries, dates, nulls).
#ifndef STOKER_PARQUET_PAGE_DECODER_H_
#define STOKER_PARQUET_PAGE_DECODER_H_

#include <arrow/api.h>
#include <arrow/io/interfaces.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stoker/status.h"

namespace stoker {

// Where each page of a file's column chunks lies, from its page index.
struct ColumnPages {
  int64_t dictionary_offset = -1, dictionary_bytes = 0;  // (-1: none)
  std::vector<int64_t> offset, bytes, first_row;          // per page
  int64_t rows = 0;                                       // the row group's
  // The page holding row `row` of the row group.
  size_t PageOf(int64_t row) const;
  int64_t RowsOf(size_t page) const {
    return (page + 1 < first_row.size() ? first_row[page + 1] : rows) - first_row[page];
  }
};

class PageDecoder {
 public:
  // The column `field` (a top-level field of one leaf, `leaf`) of a file
  // whose footer is `meta` and whose Arrow schema is `schema`.
  static Result<std::shared_ptr<PageDecoder>> Make(const std::shared_ptr<parquet::FileMetaData>& meta,
                                                   const std::shared_ptr<arrow::Schema>& schema, int field, int leaf);
  // Each row group's pages of this column, from `reader`'s page index;
  // InvalidArgument when the file has none.
  Result<std::vector<ColumnPages>> Pages(parquet::ParquetFileReader& reader, const std::string& path) const;
  // Page `page` of row group `g` (pages: its ColumnPages), read from
  // `file`, decoded: its rows as one Arrow array.
  Result<std::shared_ptr<arrow::Array>> Decode(arrow::io::RandomAccessFile& file, int g, const ColumnPages& pages,
                                               size_t page) const;

 private:
  PageDecoder() = default;
  std::shared_ptr<parquet::FileMetaData> meta_;
  int leaf_ = 0;
  parquet::SchemaDescriptor schema_;                       // the one column's
  std::shared_ptr<const arrow::KeyValueMetadata> arrow_;   // its ARROW:schema
};

}  // namespace stoker

#endif  // STOKER_PARQUET_PAGE_DECODER_H_
