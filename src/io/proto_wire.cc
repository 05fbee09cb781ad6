#include "io/proto_wire.h"

#include <cstring>

namespace stoker::wire {

bool Reader::Varint(uint64_t* v) {
  uint64_t x = 0;
  for (int i = 0; i < 10; ++i) {
    if (p_ == end_) return Fail();
    const uint8_t b = *p_++;
    if (i == 9 && b > 1) return Fail();  // more than 64 bits
    x |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return Fail();
}

bool Reader::Next(uint32_t* field, WireType* type) {
  if (p_ == end_ || failed_) return false;
  uint64_t tag;
  if (!Varint(&tag)) return false;
  if (tag > UINT32_MAX || (tag >> 3) == 0 || (tag & 7) > kFixed32) return Fail();
  *field = static_cast<uint32_t>(tag >> 3);
  *type = static_cast<WireType>(tag & 7);
  return true;
}

bool Reader::Fixed32(uint32_t* v) {
  if (left() < 4) return Fail();
  std::memcpy(v, p_, 4);
  p_ += 4;
  return true;
}

bool Reader::Fixed64(uint64_t* v) {
  if (left() < 8) return Fail();
  std::memcpy(v, p_, 8);
  p_ += 8;
  return true;
}

bool Reader::Bytes(const uint8_t** data, size_t* size) {
  uint64_t n;
  if (!Varint(&n)) return false;
  if (n > left()) return Fail();
  *data = p_;
  *size = static_cast<size_t>(n);
  p_ += n;
  return true;
}

bool Reader::SkipAt(uint32_t field, WireType type, int depth) {
  uint64_t u64;
  uint32_t u32;
  const uint8_t* data;
  size_t size;
  switch (type) {
    case kVarint: return Varint(&u64);
    case kFixed64: return Fixed64(&u64);
    case kLengthDelimited: return Bytes(&data, &size);
    case kFixed32: return Fixed32(&u32);
    case kStartGroup: {
      if (depth >= 8) return Fail();
      uint32_t f;
      WireType t;
      while (Next(&f, &t)) {
        if (t == kEndGroup) return f == field ? true : Fail();
        if (!SkipAt(f, t, depth + 1)) return false;
      }
      return Fail();  // the input ended inside the group
    }
    case kEndGroup: return Fail();  // one that no group opened
  }
  return Fail();
}

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, ++n;
  return n;
}

void PutVarint(std::string* out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

void PutTag(std::string* out, uint32_t field, WireType type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | type);
}

void PutLength(std::string* out, uint32_t field, size_t size) {
  PutTag(out, field, kLengthDelimited);
  PutVarint(out, size);
}

}  // namespace stoker::wire
