#include "io/tfrecord_writer.h"

#include "io/example_fields.h"
#include "io/proto_wire.h"
#include "io/tfrecord_file.h"

#include <cstdint>

namespace stoker {

Result<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Create(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path));
  return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(std::move(f)));
}

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "float lists are written as little-endian IEEE floats");

using namespace example_fields;  // (io/example_fields.h: the field numbers)

uint32_t ListField(FeatureValue::Kind kind) {
  return kind == FeatureValue::Kind::kBytes ? kBytesList : kind == FeatureValue::Kind::kFloat ? kFloatList : kInt64List;
}

// Bytes of v's values as the list holds them: the floats, the packed
// varints of the int64s, or each bytes value as a field of its own.
size_t ValuesSize(const FeatureValue& v) {
  size_t n = 0;
  switch (v.kind) {
    case FeatureValue::Kind::kFloat: return 4 * v.count;
    case FeatureValue::Kind::kInt64:
      for (uint64_t i = 0; i < v.count; ++i) n += wire::VarintSize(static_cast<uint64_t>(v.ints[i]));
      return n;
    case FeatureValue::Kind::kBytes:
      for (std::string_view b : v.bytes) n += wire::FieldSize(b.size());
      return n;
  }
  return n;
}

// Size of the BytesList / FloatList / Int64List message whose values take
// `values` bytes (numbers packed into one field, as proto3 writes them; an
// empty list is an empty message).
size_t ListSize(const FeatureValue& v, size_t values) {
  if (v.kind == FeatureValue::Kind::kBytes) return values;
  return v.count ? wire::FieldSize(values) : 0;
}

}  // namespace

Result<std::string> SerializeExample(const std::vector<FeatureValue>& features) {
  // Sizes first (every length precedes its message), then one pass that
  // writes Example { features { feature { key, value: Feature { list } } } }.
  std::vector<size_t> values_size(features.size()), list_size(features.size()), entry_size(features.size());
  size_t features_size = 0;
  for (size_t i = 0; i < features.size(); ++i) {
    const FeatureValue& v = features[i];
    for (size_t j = 0; j < i; ++j)
      if (features[j].name == v.name) return Status::InvalidArgument("feature '" + v.name + "' given twice");
    values_size[i] = ValuesSize(v);
    list_size[i] = ListSize(v, values_size[i]);
    entry_size[i] = wire::FieldSize(v.name.size()) + wire::FieldSize(wire::FieldSize(list_size[i]));
    features_size += wire::FieldSize(entry_size[i]);
  }
  const size_t size = wire::FieldSize(features_size);
  if (size > size_t{INT32_MAX})  // (what protobuf's readers accept)
    return Status::InvalidArgument("it would be " + std::to_string(size) + " bytes: a tf.train.Example is at most 2 GiB");
  std::string data;
  data.reserve(size);
  wire::PutLength(&data, kExampleFeatures, features_size);
  for (size_t i = 0; i < features.size(); ++i) {
    const FeatureValue& v = features[i];
    wire::PutLength(&data, kFeaturesMap, entry_size[i]);
    wire::PutLength(&data, kEntryKey, v.name.size());
    data += v.name;
    wire::PutLength(&data, kEntryValue, wire::FieldSize(list_size[i]));
    wire::PutLength(&data, ListField(v.kind), list_size[i]);
    switch (v.kind) {
      case FeatureValue::Kind::kFloat:
        if (!v.count) break;
        wire::PutLength(&data, kListValue, values_size[i]);
        data.append(reinterpret_cast<const char*>(v.floats), 4 * v.count);
        break;
      case FeatureValue::Kind::kInt64:
        if (!v.count) break;
        wire::PutLength(&data, kListValue, values_size[i]);
        for (uint64_t k = 0; k < v.count; ++k) wire::PutVarint(&data, static_cast<uint64_t>(v.ints[k]));
        break;
      case FeatureValue::Kind::kBytes:
        for (std::string_view b : v.bytes) {
          wire::PutLength(&data, kListValue, b.size());
          data += b;
        }
        break;
    }
  }
  return data;
}

Status TFRecordWriter::Write(const std::vector<FeatureValue>& features) {
  if (!file_) return Status::InvalidArgument("this TFRecordWriter is closed");
  Result<std::string> data = SerializeExample(features);
  if (!data.ok())
    return Status::InvalidArgument("record " + std::to_string(records_) + ": " + data.status().message());
  AppendTFRecord(&buf_, data.value().data(), data.value().size());
  ++records_;
  return buf_.size() >= (8u << 20) ? Flush() : Status::OK();
}

Status TFRecordWriter::Flush() {
  STOKER_RETURN_IF_ERROR(file_->Append(buf_));
  buf_.clear();
  return Status::OK();
}

Status TFRecordWriter::Close() {
  if (!file_) return Status::OK();
  STOKER_RETURN_IF_ERROR(Flush());
  Status st = file_->Commit(/*sync=*/true);
  file_.reset();  // (a failed commit removes the temporary file)
  return st;
}

}  // namespace stoker
