// Writes tf.train.Example records into a TFRecord file (the wire format of
// proto/example.proto, io/proto_wire.h), so that data for the native path
// can be produced without TensorFlow.  The file is written under a
// temporary name and renamed into place by Close().
#ifndef STOKER_IO_TFRECORD_WRITER_H_
#define STOKER_IO_TFRECORD_WRITER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "stoker/status.h"

namespace stoker {

// One feature of one record.
struct FeatureValue {
  enum class Kind : uint8_t { kFloat, kInt64, kBytes };
  std::string name;
  Kind kind = Kind::kFloat;
  const float* floats = nullptr;     // kFloat: count values
  const int64_t* ints = nullptr;     // kInt64: count values
  std::vector<std::string_view> bytes;  // kBytes: the values
  uint64_t count = 0;
};

// The tf.train.Example of `features`, serialized (features in the order
// given; InvalidArgument for a name given twice or over 2 GiB).
Result<std::string> SerializeExample(const std::vector<FeatureValue>& features);

class TFRecordWriter {
 public:
  static Result<std::unique_ptr<TFRecordWriter>> Create(const std::string& path);
  // Without Close(), the file never appears (core/atomic_file.h).
  Status Write(const std::vector<FeatureValue>& features);
  // fsync, rename into place.
  Status Close();
  uint64_t records() const { return records_; }

 private:
  explicit TFRecordWriter(AtomicFile file) : file_(std::move(file)) {}
  Status Flush();
  std::optional<AtomicFile> file_;  // (empty once closed)
  std::string buf_;
  uint64_t records_ = 0;
};

}  // namespace stoker

#endif  // STOKER_IO_TFRECORD_WRITER_H_
