// The byte format of one batch inside a slot's region (spec:
// docs/design/batch_format.md).
//
//   [BatchHeader][tree bytes][pad to 64][leaf data, each leaf 64-aligned]
//
// The tree is a pre-order encoding of the batch's structure; leaves (tensors
// and arrays) point at their bytes by offset from the region start.  All
// integers are little-endian.  A reader validates every offset and length
// against the region size, so a corrupt or truncated region is an error,
// never an out-of-bounds read.
#ifndef STOKER_SHM_BATCH_FORMAT_H_
#define STOKER_SHM_BATCH_FORMAT_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "stoker/status.h"

namespace stoker {

inline constexpr uint32_t kBatchMagic = 0x42544B53;  // "SKTB"
inline constexpr uint32_t kBatchVersion = 1;
inline constexpr uint64_t kLeafAlign = 64;

struct BatchHeader {
  uint32_t magic;
  uint32_t version;
  uint64_t tree_offset;   // from region start
  uint64_t tree_bytes;
  uint64_t total_bytes;   // header + tree + data
};
static_assert(sizeof(BatchHeader) == 32);

enum class DType : uint8_t {
  kBool = 0, kUInt8, kInt8, kInt16, kInt32, kInt64, kUInt16, kUInt32, kUInt64,
  kFloat16, kBFloat16, kFloat32, kFloat64, kComplex64, kComplex128,
  kNumDTypes
};
inline uint32_t DTypeSize(DType d) {
  static constexpr uint8_t kSizes[] = {1, 1, 1, 2, 4, 8, 2, 4, 8, 2, 2, 4, 8, 8, 16};
  return kSizes[static_cast<int>(d)];
}
inline const char* DTypeName(DType d) {
  static constexpr const char* kNames[] = {"bool", "uint8", "int8", "int16", "int32",
                                           "int64", "uint16", "uint32", "uint64", "float16",
                                           "bfloat16", "float32", "float64", "complex64",
                                           "complex128"};
  return kNames[static_cast<int>(d)];
}

// Node tags of the structure tree.
enum class Tag : uint8_t {
  kTensor = 'T',    // u8 dtype, u8 ndim, i64 shape[ndim], u64 offset, u64 nbytes
  kArray = 'A',     // same fields; surfaces as a numpy array even in torch mode
  kList = 'L',      // u32 n, n children
  kTuple = 'U',     // u32 n, n children
  kDict = 'D',      // u32 n, n (key, value) child pairs
  kNamedTuple = 'N',// child: the type (a kPickle node), u32 n, n children
  kStr = 'S',       // u32 len, utf-8 bytes
  kBytes = 'B',     // u32 len, bytes
  kStrAt = 's',     // u64 offset, u64 nbytes: a str whose UTF-8 bytes are a leaf
  kBytesAt = 'y',   // u64 offset, u64 nbytes: a bytes object whose bytes are a leaf
  kInt = 'I',       // i64
  kFloat = 'F',     // f64
  kBool = 'b',      // u8
  kNone = 'n',
  kPickle = 'P',    // u32 nleaves, nleaves leaf nodes, u32 len, pickle bytes
                    // (persistent ids 0..nleaves-1 name the leaves)
};

inline constexpr int kMaxDims = 32;

// Appends tree bytes.
class TreeWriter {
 public:
  template <typename T>
  void Put(T v) { buf_.append(reinterpret_cast<const char*>(&v), sizeof(T)); }
  void PutTag(Tag t) { Put<uint8_t>(static_cast<uint8_t>(t)); }
  void PutBytes(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  size_t size() const { return buf_.size(); }
  // Overwrites a previously written u64 (used to patch leaf offsets).
  void Patch64(size_t pos, uint64_t v) { std::memcpy(&buf_[pos], &v, sizeof v); }
  const std::string& bytes() const { return buf_; }
  void clear() { buf_.clear(); }

 private:
  std::string buf_;
};

// Reads tree bytes with bounds checks.
class TreeReader {
 public:
  TreeReader(const uint8_t* p, uint64_t n) : p_(p), end_(p + n) {}
  template <typename T>
  bool Get(T* v) {
    if (static_cast<uint64_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  bool GetBytes(uint64_t n, const uint8_t** out) {
    if (static_cast<uint64_t>(end_ - p_) < n) return false;
    *out = p_;
    p_ += n;
    return true;
  }
  bool done() const { return p_ == end_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace stoker

#endif  // STOKER_SHM_BATCH_FORMAT_H_
