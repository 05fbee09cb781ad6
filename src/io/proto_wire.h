// Protobuf's wire format (https://protobuf.dev/programming-guides/encoding/),
// read and written without the protobuf library: tags, varints, fixed-width
// values and length-delimited fields.  tf.train.Example is the only message
// stoker reads or writes, and walking its few fields needs nothing more; the
// library (2 MB of protobuf-lite in a wheel, and its ABI) stays a test-only
// dependency that cross-checks this code in both directions
// (tests/unit/proto_wire_test.cc, example_decoder_test.cc).
#ifndef STOKER_IO_PROTO_WIRE_H_
#define STOKER_IO_PROTO_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace stoker::wire {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// Reads fields from [data, data + size).  Every read returns false on input
// that is not valid wire format (a varint longer than 10 bytes, a length past
// the end, field number 0, wire type 6 or 7, an unmatched group) and then
// failed() is true; Next() also returns false, with failed() false, at the
// clean end of the input.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}

  // The next field's number and wire type.
  bool Next(uint32_t* field, WireType* type);
  bool Varint(uint64_t* v);
  bool Fixed32(uint32_t* v);
  bool Fixed64(uint64_t* v);
  // The payload of a length-delimited field (a view into the input).
  bool Bytes(const uint8_t** data, size_t* size);
  // Skips the value of a field of this type (groups nested at most 8 deep).
  bool Skip(uint32_t field, WireType type) { return SkipAt(field, type, 0); }

  bool failed() const { return failed_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }

 private:
  bool Fail() {
    failed_ = true;
    return false;
  }
  bool SkipAt(uint32_t field, WireType type, int depth);

  const uint8_t* p_;
  const uint8_t* end_;
  bool failed_ = false;
};

// Writers append to `out`.
size_t VarintSize(uint64_t v);
void PutVarint(std::string* out, uint64_t v);
void PutTag(std::string* out, uint32_t field, WireType type);
// Tag, length, then the length's worth of bytes that the caller appends.
void PutLength(std::string* out, uint32_t field, size_t size);
// Size of a length-delimited field of `size` payload bytes, tag included (a
// field number below 16: a one-byte tag).
inline size_t FieldSize(size_t size) { return 1 + VarintSize(size) + size; }

}  // namespace stoker::wire

#endif  // STOKER_IO_PROTO_WIRE_H_
