// ParquetColumn: how one Arrow column of a decoded row group becomes a
// field of a row (include/stoker/parquet_dataset.h lists the kinds), and
// the copy of one row's value.
#ifndef STOKER_PARQUET_PARQUET_COLUMNS_H_
#define STOKER_PARQUET_PARQUET_COLUMNS_H_

#include <arrow/api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "stoker/native_dataset.h"

namespace stoker {

class ParquetColumn {
 public:
  enum class Kind : uint8_t { kScalar, kBool, kFixedList, kList, kLargeList, kBinary, kLargeBinary, kDictionary };

  // The column `name` of Arrow type `type`, or InvalidArgument saying
  // which types are read.
  static Result<ParquetColumn> Make(const std::string& name, const std::shared_ptr<arrow::DataType>& type);

  const FieldSpec& field() const { return field_; }
  bool variable() const { return field_.variable; }

  // Bytes of row `row` of `array` (one chunk of this column); a null's are
  // 0 for a variable field.
  uint64_t Bytes(const arrow::Array& array, int64_t row) const;
  // Copies row `row` of `array` to dst (Bytes() bytes; zeros for a null).
  // DataLoss naming the trouble (a null inside a list) is for the caller
  // to prefix with the file, row group and row.
  Status Copy(const arrow::Array& array, int64_t row, uint8_t* dst) const;

 private:
  Kind kind_ = Kind::kScalar;
  FieldSpec field_;
  uint32_t width_ = 0;     // bytes of one element
  int32_t list_size_ = 0;  // kFixedList
  std::shared_ptr<ParquetColumn> values_;  // kDictionary: the dictionary's values
};

// "int64", "fixed_size_list<item: float>[256]", ...: Arrow's name of a type.
std::string ArrowTypeName(const arrow::DataType& type);

}  // namespace stoker

#endif  // STOKER_PARQUET_PARQUET_COLUMNS_H_
