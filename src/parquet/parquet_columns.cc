#include "parquet/parquet_columns.h"

#include <cstring>

namespace stoker {

namespace {

// A number's element type, for Arrow's fixed-width number types (and the
// dates, times and timestamps, as their integers); false otherwise.
bool NumberType(const arrow::DataType& t, ElementType* out) {
  switch (t.id()) {
    case arrow::Type::INT8: *out = ElementType::kInt8; return true;
    case arrow::Type::INT16: *out = ElementType::kInt16; return true;
    case arrow::Type::INT32: case arrow::Type::DATE32: case arrow::Type::TIME32: *out = ElementType::kInt32; return true;
    case arrow::Type::INT64: case arrow::Type::DATE64: case arrow::Type::TIME64: case arrow::Type::TIMESTAMP:
    case arrow::Type::DURATION: *out = ElementType::kInt64; return true;
    case arrow::Type::UINT8: *out = ElementType::kUInt8; return true;
    case arrow::Type::UINT16: *out = ElementType::kUInt16; return true;
    case arrow::Type::UINT32: *out = ElementType::kUInt32; return true;
    case arrow::Type::UINT64: *out = ElementType::kUInt64; return true;
    case arrow::Type::HALF_FLOAT: *out = ElementType::kFloat16; return true;
    case arrow::Type::FLOAT: *out = ElementType::kFloat32; return true;
    case arrow::Type::DOUBLE: *out = ElementType::kFloat64; return true;
    default: return false;
  }
}

// The bytes of elements [first, first + n) of a number array (no nulls in
// it: checked by the caller).
const uint8_t* Elements(const arrow::Array& a, int64_t first, uint32_t width) {
  const auto& d = *a.data();
  return d.buffers[1]->data() + static_cast<uint64_t>(d.offset + first) * width;
}

Status NullsInside(const arrow::Array& values, int64_t first, int64_t n) {
  if (values.null_count() == 0) return Status::OK();
  for (int64_t i = first; i < first + n; ++i)
    if (values.IsNull(i)) return Status::DataLoss("element " + std::to_string(i - first) + " of the list is null");
  return Status::OK();
}

}  // namespace

std::string ArrowTypeName(const arrow::DataType& type) { return type.ToString(); }

Result<ParquetColumn> ParquetColumn::Make(const std::string& name, const std::shared_ptr<arrow::DataType>& type) {
  ParquetColumn c;
  c.field_.name = name;
  auto unsupported = [&]() {
    return Status::InvalidArgument(
        "column '" + name + "' is " + ArrowTypeName(*type) +
        ": stoker reads numbers (and dates, times, timestamps as integers), booleans, fixed-size lists and lists of "
        "numbers, strings, binary and dictionary-encoded columns of these; leave it out with columns=");
  };
  ElementType et;
  if (NumberType(*type, &et)) {
    c.kind_ = Kind::kScalar;
    c.field_.dtype = et;
    c.width_ = ElementSize(et);
    return c;
  }
  switch (type->id()) {
    case arrow::Type::BOOL:
      c.kind_ = Kind::kBool;
      c.field_.dtype = ElementType::kBool;
      c.width_ = 1;
      return c;
    case arrow::Type::FIXED_SIZE_LIST: {
      const auto& t = static_cast<const arrow::FixedSizeListType&>(*type);
      if (!NumberType(*t.value_type(), &et) || t.list_size() <= 0) return unsupported();
      c.kind_ = Kind::kFixedList;
      c.field_.dtype = et;
      c.field_.shape = {t.list_size()};
      c.width_ = ElementSize(et);
      c.list_size_ = t.list_size();
      return c;
    }
    case arrow::Type::LIST: case arrow::Type::LARGE_LIST: {
      const auto& t = static_cast<const arrow::BaseListType&>(*type);
      if (!NumberType(*t.value_type(), &et)) return unsupported();
      c.kind_ = type->id() == arrow::Type::LIST ? Kind::kList : Kind::kLargeList;
      c.field_.dtype = et;
      c.field_.variable = true;
      c.width_ = ElementSize(et);
      return c;
    }
    case arrow::Type::STRING: case arrow::Type::BINARY: case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY: {
      const bool large = type->id() == arrow::Type::LARGE_STRING || type->id() == arrow::Type::LARGE_BINARY;
      const bool text = type->id() == arrow::Type::STRING || type->id() == arrow::Type::LARGE_STRING;
      c.kind_ = large ? Kind::kLargeBinary : Kind::kBinary;
      c.field_.dtype = ElementType::kUInt8;
      c.field_.variable = true;
      c.field_.leaf = text ? FieldLeaf::kStr : FieldLeaf::kBytes;
      c.width_ = 1;
      return c;
    }
    case arrow::Type::DICTIONARY: {
      const auto& t = static_cast<const arrow::DictionaryType&>(*type);
      STOKER_ASSIGN_OR_RETURN(ParquetColumn values, Make(name, t.value_type()));
      if (values.kind_ == Kind::kDictionary) return unsupported();
      c = values;
      c.kind_ = Kind::kDictionary;
      c.values_ = std::make_shared<ParquetColumn>(std::move(values));
      return c;
    }
    default:
      return unsupported();
  }
}

uint64_t ParquetColumn::Bytes(const arrow::Array& a, int64_t row) const {
  if (!field_.variable) return field_.bytes();
  if (a.IsNull(row)) return 0;
  switch (kind_) {
    case Kind::kList: return static_cast<uint64_t>(static_cast<const arrow::ListArray&>(a).value_length(row)) * width_;
    case Kind::kLargeList:
      return static_cast<uint64_t>(static_cast<const arrow::LargeListArray&>(a).value_length(row)) * width_;
    case Kind::kBinary: return static_cast<const arrow::BinaryArray&>(a).GetView(row).size();
    case Kind::kLargeBinary: return static_cast<const arrow::LargeBinaryArray&>(a).GetView(row).size();
    case Kind::kDictionary: {
      const auto& d = static_cast<const arrow::DictionaryArray&>(a);
      return values_->Bytes(*d.dictionary(), d.GetValueIndex(row));
    }
    default: return field_.bytes();
  }
}

Status ParquetColumn::Copy(const arrow::Array& a, int64_t row, uint8_t* dst) const {
  if (a.IsNull(row)) {
    if (!field_.variable) std::memset(dst, 0, field_.bytes());
    return Status::OK();
  }
  switch (kind_) {
    case Kind::kScalar:
      std::memcpy(dst, Elements(a, row, width_), width_);
      return Status::OK();
    case Kind::kBool:
      *dst = static_cast<const arrow::BooleanArray&>(a).Value(row) ? 1 : 0;
      return Status::OK();
    case Kind::kFixedList: {
      const auto& l = static_cast<const arrow::FixedSizeListArray&>(a);
      const int64_t first = l.value_offset(row);
      STOKER_RETURN_IF_ERROR(NullsInside(*l.values(), first, list_size_));
      std::memcpy(dst, Elements(*l.values(), first, width_), static_cast<uint64_t>(list_size_) * width_);
      return Status::OK();
    }
    case Kind::kList: case Kind::kLargeList: {
      const auto& l = static_cast<const arrow::BaseListArray<arrow::ListType>&>(a);
      int64_t first, n;
      const arrow::Array* values;
      if (kind_ == Kind::kList) {
        first = l.value_offset(row), n = l.value_length(row), values = l.values().get();
      } else {
        const auto& ll = static_cast<const arrow::LargeListArray&>(a);
        first = ll.value_offset(row), n = ll.value_length(row), values = ll.values().get();
      }
      STOKER_RETURN_IF_ERROR(NullsInside(*values, first, n));
      if (n > 0) std::memcpy(dst, Elements(*values, first, width_), static_cast<uint64_t>(n) * width_);
      return Status::OK();
    }
    case Kind::kBinary: case Kind::kLargeBinary: {
      const std::string_view v = kind_ == Kind::kBinary ? static_cast<const arrow::BinaryArray&>(a).GetView(row)
                                                        : static_cast<const arrow::LargeBinaryArray&>(a).GetView(row);
      if (!v.empty()) std::memcpy(dst, v.data(), v.size());
      return Status::OK();
    }
    case Kind::kDictionary: {
      const auto& d = static_cast<const arrow::DictionaryArray&>(a);
      return values_->Copy(*d.dictionary(), d.GetValueIndex(row), dst);
    }
  }
  return Status::Internal("unknown column kind");
}

}  // namespace stoker
