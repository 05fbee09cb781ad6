#include "io/tfrecord_writer.h"

#include "example.pb.h"
#include "io/tfrecord_file.h"

namespace stoker {

Result<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Create(const std::string& path) {
  STOKER_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path));
  return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(std::move(f)));
}

Status TFRecordWriter::Write(const std::vector<FeatureValue>& features) {
  if (!file_) return Status::InvalidArgument("this TFRecordWriter is closed");
  tf::Example ex;
  auto* map = ex.mutable_features()->mutable_feature();
  for (const FeatureValue& v : features) {
    if (map->count(v.name)) return Status::InvalidArgument("feature '" + v.name + "' given twice");
    tf::Feature& f = (*map)[v.name];
    switch (v.kind) {
      case FeatureValue::Kind::kFloat:
        f.mutable_float_list()->mutable_value()->Add(v.floats, v.floats + v.count);
        break;
      case FeatureValue::Kind::kInt64:
        f.mutable_int64_list()->mutable_value()->Add(v.ints, v.ints + v.count);
        break;
      case FeatureValue::Kind::kBytes:
        for (std::string_view b : v.bytes) f.mutable_bytes_list()->add_value(std::string(b));
        break;
    }
  }
  std::string data;
  if (!ex.SerializeToString(&data))
    return Status::InvalidArgument("record " + std::to_string(records_) + " could not be serialized (over 2 GiB?)");
  AppendTFRecord(&buf_, data.data(), data.size());
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
