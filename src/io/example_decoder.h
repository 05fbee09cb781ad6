// Decodes a serialized tf.train.Example into declared fixed-shape tensors,
// writing each feature's values straight into its destination.  The walk
// reads the wire format (io/proto_wire.h) with the field numbers of
// proto/example.proto rather than materialising an Example message, which
// would copy every value once more; the protobuf library's generated Example
// class is what the tests cross-check with.
//
// Features map to dtypes as:
//   float_list -> float32 (copied as is), float64, float16, bfloat16
//   int64_list -> int64 (as is), and the other integer types and bool, with
//                 a range check
//   bytes_list -> any dtype: the values' bytes, concatenated, are the
//                 tensor's raw bytes (e.g. array.tobytes())
#ifndef STOKER_IO_EXAMPLE_DECODER_H_
#define STOKER_IO_EXAMPLE_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "io/crc32c.h"
#include "stoker/native_dataset.h"

namespace stoker {

class ExampleDecoder {
 public:
  explicit ExampleDecoder(std::vector<FieldSpec> features) : features_(std::move(features)) {}
  // Field f of the sample goes to dst[f] (features[f].bytes() bytes).
  // DataLoss saying which feature and what was expected; the caller adds
  // the file and record.
  // With `crc`, values copied as they are go through crc->Copy, which
  // checksums them on the way (the caller then Finish()es the record's CRC).
  Status Decode(const uint8_t* data, size_t n, uint8_t* const* dst, Crc32cCursor* crc = nullptr) const;
  const std::vector<FieldSpec>& features() const { return features_; }

 private:
  std::vector<FieldSpec> features_;
};

}  // namespace stoker

#endif  // STOKER_IO_EXAMPLE_DECODER_H_
