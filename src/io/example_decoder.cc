#include "io/example_decoder.h"

#include "collate/collate_copy.h"
#include "io/half.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <cstring>
#include <limits>
#include <string_view>

namespace stoker {

namespace {

using google::protobuf::io::CodedInputStream;
using WFL = google::protobuf::internal::WireFormatLite;

static_assert(std::numeric_limits<float>::is_iec559, "float lists are copied as IEEE floats");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "packed values are copied as little-endian");

// Field numbers of proto/example.proto.
constexpr int kExampleFeatures = 1, kFeaturesMap = 1, kEntryKey = 1, kEntryValue = 2;
constexpr int kBytesList = 1, kFloatList = 2, kInt64List = 3, kListValue = 1;

const char* KindName(int kind) {
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
  Status Decode(const uint8_t* p, int n) {
    CodedInputStream in(p, n);
    int kind = 0;
    const uint8_t* list = nullptr;
    int list_len = 0;
    while (uint32_t tag = in.ReadTag()) {
      const int field = WFL::GetTagFieldNumber(tag);
      if (field >= kBytesList && field <= kInt64List && WFL::GetTagWireType(tag) == WFL::WIRETYPE_LENGTH_DELIMITED) {
        uint32_t len;
        if (!in.ReadVarint32(&len)) return Malformed();
        list = p + in.CurrentPosition();
        list_len = static_cast<int>(len);
        if (!in.Skip(static_cast<int>(len))) return Malformed();
        kind = field;  // a oneof: the last one wins
      } else if (!WFL::SkipField(&in, tag)) {
        return Malformed();
      }
    }
    if (!in.ConsumedEntireMessage()) return Malformed();
    if (kind == kFloatList && !IsFloat(f_.dtype)) return WrongKind(kind, "int64_list or bytes_list");
    if (kind == kInt64List && (IsFloat(f_.dtype) || f_.dtype == ElementType::kComplex64 ||
                               f_.dtype == ElementType::kComplex128))
      return WrongKind(kind, "float_list or bytes_list");
    if (kind == 0) return WrongKind(kind, "a value");
    CodedInputStream lin(list, list_len);
    while (uint32_t tag = lin.ReadTag()) {
      if (WFL::GetTagFieldNumber(tag) != kListValue) {
        if (!WFL::SkipField(&lin, tag)) return Malformed();
        continue;
      }
      Status st = kind == kFloatList ? Float(lin, list, WFL::GetTagWireType(tag))
                  : kind == kInt64List ? Int(lin, list, WFL::GetTagWireType(tag))
                                       : Bytes(lin, list, WFL::GetTagWireType(tag));
      if (!st.ok()) return st;
    }
    if (!lin.ConsumedEntireMessage()) return Malformed();
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
  Status WrongKind(int kind, const char* need) const {
    return Status::DataLoss("feature '" + f_.name + "' is " + (kind ? "a " : "an ") + KindName(kind) +
                            "; declared " + Declared(f_) + " needs " + need);
  }
  Status Count(int kind, uint64_t have) const {
    return Status::DataLoss("feature '" + f_.name + "' is a " + KindName(kind) + " of " + std::to_string(have) +
                            " values; declared " + Declared(f_) + " needs " + std::to_string(want_));
  }

  Status Float(CodedInputStream& in, const uint8_t* base, int wire) {
    if (wire == WFL::WIRETYPE_LENGTH_DELIMITED) {  // packed
      uint32_t len;
      if (!in.ReadVarint32(&len) || len % 4 != 0) return Malformed();
      const uint64_t k = len / 4;
      if (got_ + k > want_) return Count(kFloatList, got_ + k);
      const uint8_t* src = base + in.CurrentPosition();
      if (!in.Skip(static_cast<int>(len))) return Malformed();
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
    if (wire != WFL::WIRETYPE_FIXED32) return Malformed();
    uint32_t bits;
    if (!in.ReadLittleEndian32(&bits)) return Malformed();
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

  Status Int(CodedInputStream& in, const uint8_t*, int wire) {
    uint64_t raw;
    if (wire == WFL::WIRETYPE_VARINT) {
      if (!in.ReadVarint64(&raw)) return Malformed();
      return OneInt(raw);
    }
    if (wire != WFL::WIRETYPE_LENGTH_DELIMITED) return Malformed();
    int len;
    if (!in.ReadVarintSizeAsInt(&len)) return Malformed();
    const auto limit = in.PushLimit(len);
    while (in.BytesUntilLimit() > 0) {
      if (!in.ReadVarint64(&raw)) return Malformed();
      Status st = OneInt(raw);
      if (!st.ok()) return st;
    }
    in.PopLimit(limit);
    return Status::OK();
  }

  Status Bytes(CodedInputStream& in, const uint8_t* base, int wire) {
    if (wire != WFL::WIRETYPE_LENGTH_DELIMITED) return Malformed();
    uint32_t len;
    if (!in.ReadVarint32(&len)) return Malformed();
    const uint8_t* src = base + in.CurrentPosition();
    if (!in.Skip(static_cast<int>(len))) return Malformed();
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
  if (n > static_cast<size_t>(std::numeric_limits<int>::max()))
    return Status::DataLoss("a record of " + std::to_string(n) + " bytes is larger than protobuf's 2 GiB limit");
  const int total = static_cast<int>(n);
  std::vector<bool> seen(features_.size(), false);
  std::vector<std::string_view> keys;  // for a message naming what the record has
  auto malformed = [] { return Status::DataLoss("not a valid tf.train.Example (malformed protobuf)"); };
  CodedInputStream in(data, total);
  in.SetRecursionLimit(8);
  while (uint32_t tag = in.ReadTag()) {
    if (WFL::GetTagFieldNumber(tag) != kExampleFeatures || WFL::GetTagWireType(tag) != WFL::WIRETYPE_LENGTH_DELIMITED) {
      if (!WFL::SkipField(&in, tag)) return malformed();
      continue;
    }
    int flen;
    if (!in.ReadVarintSizeAsInt(&flen)) return malformed();
    const auto features_limit = in.PushLimit(flen);
    while (uint32_t ftag = in.ReadTag()) {
      if (WFL::GetTagFieldNumber(ftag) != kFeaturesMap || WFL::GetTagWireType(ftag) != WFL::WIRETYPE_LENGTH_DELIMITED) {
        if (!WFL::SkipField(&in, ftag)) return malformed();
        continue;
      }
      int elen;
      if (!in.ReadVarintSizeAsInt(&elen)) return malformed();
      const auto entry_limit = in.PushLimit(elen);
      std::string_view key;
      const uint8_t* value = nullptr;
      int value_len = 0;
      while (uint32_t etag = in.ReadTag()) {
        const int field = WFL::GetTagFieldNumber(etag);
        if ((field == kEntryKey || field == kEntryValue) && WFL::GetTagWireType(etag) == WFL::WIRETYPE_LENGTH_DELIMITED) {
          int len;
          if (!in.ReadVarintSizeAsInt(&len)) return malformed();
          const uint8_t* at = data + in.CurrentPosition();
          if (!in.Skip(len)) return malformed();
          if (field == kEntryKey) key = std::string_view(reinterpret_cast<const char*>(at), static_cast<size_t>(len));
          else value = at, value_len = len;
        } else if (!WFL::SkipField(&in, etag)) {
          return malformed();
        }
      }
      if (!in.ConsumedEntireMessage()) return malformed();
      in.PopLimit(entry_limit);
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
    if (!in.ConsumedEntireMessage()) return malformed();
    in.PopLimit(features_limit);
  }
  if (!in.ConsumedEntireMessage() || in.CurrentPosition() != total) return malformed();
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
