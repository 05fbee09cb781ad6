#include "io/tfrecord_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "example.pb.h"
#include "io/tfrecord_file.h"

namespace stoker {

Result<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Create(const std::string& path) {
  std::unique_ptr<TFRecordWriter> w(new TFRecordWriter());
  w->path_ = path;
  w->tmp_ = path + ".tmp." + std::to_string(getpid());
  w->fd_ = open(w->tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return Status::IOError("create " + w->tmp_, errno);
  return w;
}

TFRecordWriter::~TFRecordWriter() {
  if (fd_ >= 0) {
    close(fd_);
    unlink(tmp_.c_str());
  }
}

Status TFRecordWriter::Write(const std::vector<FeatureValue>& features) {
  if (fd_ < 0) return Status::InvalidArgument("TFRecordWriter for " + path_ + " is closed");
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
  size_t done = 0;
  while (done < buf_.size()) {
    const ssize_t n = write(fd_, buf_.data() + done, buf_.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError("write " + tmp_, errno);
    }
    done += static_cast<size_t>(n);
  }
  buf_.clear();
  return Status::OK();
}

Status TFRecordWriter::Close() {
  if (fd_ < 0) return Status::OK();
  STOKER_RETURN_IF_ERROR(Flush());
  if (fsync(fd_) != 0) return Status::IOError("fsync " + tmp_, errno);
  close(fd_);
  fd_ = -1;
  if (rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int e = errno;
    unlink(tmp_.c_str());
    return Status::IOError("rename " + tmp_ + " to " + path_, e);
  }
  return Status::OK();
}

}  // namespace stoker
