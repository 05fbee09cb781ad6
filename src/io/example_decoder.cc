#include "io/example_decoder.h"

#include "core/copy.h"
#include "io/example_fields.h"
#include "io/half.h"
#include "io/proto_wire.h"

#include <cstring>
#include <limits>
#include <string_view>

namespace stoker {

namespace {

static_assert(std::numeric_limits<float>::is_iec559, "float lists are copied as IEEE floats");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "packed values are copied as little-endian");

using namespace example_fields;  // (io/example_fields.h: the field numbers)

const char* KindName(uint32_t kind) {
  return kind == kBytesList ? "bytes_list" : kind == kFloatList ? "float_list" : kind == kInt64List ? "int64_list"
                                                                                                     : "empty feature";
}

std::string Declared(const FieldSpec& f) { return std::string(DTypeNameOf(f.dtype)) + " " + ShapeString(f.shape); }

bool IsFloat(ElementType t) {
  return t == ElementType::kFloat32 || t == ElementType::kFloat64 || t == ElementType::kFloat16 ||
         t == ElementType::kBFloat16;
}

void PutFloat(ElementType t, uint8_t* dst, uint64_t i, float v) {
  switch (t) {
    case ElementType::kFloat32: std::memcpy(dst + 4 * i, &v, 4); break;
    case ElementType::kFloat64: { const double d = v; std::memcpy(dst + 8 * i, &d, 8); break; }
    case ElementType::kFloat16: { const uint16_t h = FloatToHalf(v); std::memcpy(dst + 2 * i, &h, 2); break; }
    default: { const uint16_t h = FloatToBFloat16(v); std::memcpy(dst + 2 * i, &h, 2); break; }
  }
}

// Stores int64 v as integer type t; false when it does not fit.
bool PutInt(ElementType t, uint8_t* dst, uint64_t i, int64_t v) {
  auto put = [&](int64_t lo, uint64_t hi, auto sample) {
    using T = decltype(sample);
    if (v < lo || (v > 0 && static_cast<uint64_t>(v) > hi)) return false;
    const T x = static_cast<T>(v);
    std::memcpy(dst + sizeof(T) * i, &x, sizeof(T));
    return true;
  };
  switch (t) {
    case ElementType::kInt64: return put(INT64_MIN, INT64_MAX, int64_t{});
    case ElementType::kUInt64: return put(0, UINT64_MAX, uint64_t{});
    case ElementType::kInt32: return put(INT32_MIN, INT32_MAX, int32_t{});
    case ElementType::kUInt32: return put(0, UINT32_MAX, uint32_t{});
    case ElementType::kInt16: return put(INT16_MIN, INT16_MAX, int16_t{});
    case ElementType::kUInt16: return put(0, UINT16_MAX, uint16_t{});
    case ElementType::kInt8: return put(INT8_MIN, INT8_MAX, int8_t{});
    case ElementType::kUInt8: return put(0, UINT8_MAX, uint8_t{});
    case ElementType::kBool: return put(0, 1, uint8_t{});
    default: return false;
  }
}

class FeatureWriter {
 public:
  FeatureWriter(const FieldSpec& f, uint8_t* dst, Crc32cCursor* crc)
      : f_(f), dst_(dst), crc_(crc), want_(NumElements(f.shape)), bytes_(f.bytes()) {}

  // Decodes the Feature message in [p, p+n).
  Status Decode(const uint8_t* p, size_t n) {
    wire::Reader in(p, n);
    uint32_t kind = 0, field;
    wire::WireType type;
    const uint8_t* list = nullptr;
    size_t list_len = 0;
    while (in.Next(&field, &type)) {
      if (field >= kBytesList && field <= kInt64List && type == wire::kLengthDelimited) {
        if (!in.Bytes(&list, &list_len)) return Malformed();
        kind = field;  // a oneof: the last one wins
      } else if (!in.Skip(field, type)) {
        return Malformed();
      }
    }
    if (in.failed()) return Malformed();
    if (kind == kFloatList && !IsFloat(f_.dtype)) return WrongKind(kind, "int64_list or bytes_list");
    if (kind == kInt64List && (IsFloat(f_.dtype) || f_.dtype == ElementType::kComplex64 ||
                               f_.dtype == ElementType::kComplex128))
      return WrongKind(kind, "float_list or bytes_list");
    if (kind == 0) return WrongKind(kind, "a value");
    wire::Reader lin(list, list_len);
    while (lin.Next(&field, &type)) {
      if (field != kListValue) {
        if (!lin.Skip(field, type)) return Malformed();
        continue;
      }
      Status st = kind == kFloatList ? Float(lin, type) : kind == kInt64List ? Int(lin, type) : Bytes(lin, type);
      if (!st.ok()) return st;
    }
    if (lin.failed()) return Malformed();
    if (kind == kBytesList) {
      if (got_ != bytes_)
        return Status::DataLoss("feature '" + f_.name + "' is a bytes_list of " + std::to_string(got_) +
                                " bytes; declared " + Declared(f_) + " needs " + std::to_string(bytes_) + " bytes");
    } else if (got_ != want_) {
      return Count(kind, got_);
    }
    return Status::OK();
  }

 private:
  Status Malformed() const {
    return Status::DataLoss("feature '" + f_.name + "' is not a valid tf.train.Feature (malformed protobuf)");
  }
  Status WrongKind(uint32_t kind, const char* need) const {
    return Status::DataLoss("feature '" + f_.name + "' is " + (kind ? "a " : "an ") + KindName(kind) +
                            "; declared " + Declared(f_) + " needs " + need);
  }
  Status Count(uint32_t kind, uint64_t have) const {
    return Status::DataLoss("feature '" + f_.name + "' is a " + KindName(kind) + " of " + std::to_string(have) +
                            " values; declared " + Declared(f_) + " needs " + std::to_string(want_));
  }

  Status Float(wire::Reader& in, wire::WireType type) {
    if (type == wire::kLengthDelimited) {  // packed
      const uint8_t* src;
      size_t len;
      if (!in.Bytes(&src, &len) || len % 4 != 0) return Malformed();
      const uint64_t k = len / 4;
      if (got_ + k > want_) return Count(kFloatList, got_ + k);
      if (f_.dtype == ElementType::kFloat32) {
        CopyOut(dst_ + 4 * got_, src, len);
      } else {
        for (uint64_t i = 0; i < k; ++i) {
          float v;
          std::memcpy(&v, src + 4 * i, 4);
          PutFloat(f_.dtype, dst_, got_ + i, v);
        }
      }
      got_ += k;
      return Status::OK();
    }
    uint32_t bits;
    if (type != wire::kFixed32 || !in.Fixed32(&bits)) return Malformed();
    if (got_ + 1 > want_) return Count(kFloatList, got_ + 1);
    float v;
    std::memcpy(&v, &bits, 4);
    PutFloat(f_.dtype, dst_, got_++, v);
    return Status::OK();
  }

  Status OneInt(uint64_t raw) {
    if (got_ + 1 > want_) return Count(kInt64List, got_ + 1);
    const int64_t v = static_cast<int64_t>(raw);
    if (!PutInt(f_.dtype, dst_, got_, v))
      return Status::DataLoss("feature '" + f_.name + "': value " + std::to_string(v) + " (element " +
                              std::to_string(got_) + ") does not fit declared " + Declared(f_));
    ++got_;
    return Status::OK();
  }

  Status Int(wire::Reader& in, wire::WireType type) {
    uint64_t raw;
    if (type == wire::kVarint) {
      if (!in.Varint(&raw)) return Malformed();
      return OneInt(raw);
    }
    const uint8_t* packed;
    size_t len;
    if (type != wire::kLengthDelimited || !in.Bytes(&packed, &len)) return Malformed();
    wire::Reader values(packed, len);
    while (values.left() > 0) {
      if (!values.Varint(&raw)) return Malformed();
      STOKER_RETURN_IF_ERROR(OneInt(raw));
    }
    return Status::OK();
  }

  Status Bytes(wire::Reader& in, wire::WireType type) {
    const uint8_t* src;
    size_t len;
    if (type != wire::kLengthDelimited || !in.Bytes(&src, &len)) return Malformed();
    if (got_ + len > bytes_)
      return Status::DataLoss("feature '" + f_.name + "' is a bytes_list of more than " + std::to_string(bytes_) +
                              " bytes; declared " + Declared(f_) + " needs exactly " + std::to_string(bytes_));
    CopyOut(dst_ + got_, src, len);
    got_ += len;
    return Status::OK();
  }

  void CopyOut(uint8_t* dst, const uint8_t* src, size_t n) {
    if (crc_) crc_->Copy(dst, src, n);
    else CollateCopy(dst, src, n);
  }

  const FieldSpec& f_;
  uint8_t* dst_;
  Crc32cCursor* crc_;
  uint64_t want_, bytes_, got_ = 0;
};

}  // namespace

Status ExampleDecoder::Decode(const uint8_t* data, size_t n, uint8_t* const* dst, Crc32cCursor* crc) const {
  std::vector<bool> seen(features_.size(), false);
  std::vector<std::string_view> keys;  // for a message naming what the record has
  auto malformed = [] { return Status::DataLoss("not a valid tf.train.Example (malformed protobuf)"); };
  wire::Reader in(data, n);
  uint32_t field;
  wire::WireType type;
  while (in.Next(&field, &type)) {
    const uint8_t* features;
    size_t features_len;
    if (field != kExampleFeatures || type != wire::kLengthDelimited) {
      if (!in.Skip(field, type)) return malformed();
      continue;
    }
    if (!in.Bytes(&features, &features_len)) return malformed();
    wire::Reader fin(features, features_len);
    while (fin.Next(&field, &type)) {
      const uint8_t* entry;
      size_t entry_len;
      if (field != kFeaturesMap || type != wire::kLengthDelimited) {
        if (!fin.Skip(field, type)) return malformed();
        continue;
      }
      if (!fin.Bytes(&entry, &entry_len)) return malformed();
      wire::Reader ein(entry, entry_len);
      std::string_view key;
      const uint8_t* value = nullptr;
      size_t value_len = 0;
      while (ein.Next(&field, &type)) {
        if ((field == kEntryKey || field == kEntryValue) && type == wire::kLengthDelimited) {
          const uint8_t* at;
          size_t len;
          if (!ein.Bytes(&at, &len)) return malformed();
          if (field == kEntryKey) key = std::string_view(reinterpret_cast<const char*>(at), len);
          else value = at, value_len = len;
        } else if (!ein.Skip(field, type)) {
          return malformed();
        }
      }
      if (ein.failed()) return malformed();
      if (keys.size() < 16) keys.push_back(key);
      for (size_t f = 0; f < features_.size(); ++f) {
        if (features_[f].name != key) continue;
        if (!value) return Status::DataLoss("feature '" + features_[f].name + "' has no value");
        FeatureWriter w(features_[f], dst[f], crc);
        STOKER_RETURN_IF_ERROR(w.Decode(value, value_len));
        seen[f] = true;
        break;
      }
    }
    if (fin.failed()) return malformed();
  }
  if (in.failed()) return malformed();
  for (size_t f = 0; f < features_.size(); ++f)
    if (!seen[f]) {
      // Name what the record has, to make a typo obvious.
      std::string has;
      for (std::string_view k : keys) has += (has.empty() ? "'" : ", '") + std::string(k) + "'";
      return Status::DataLoss("feature '" + features_[f].name + "' is missing from the record (it has " +
                              (has.empty() ? std::string("no features") : has) + ")");
    }
  return Status::OK();
}

}  // namespace stoker
