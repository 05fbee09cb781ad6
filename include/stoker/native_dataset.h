// stoker::NativeDataset: a dataset whose samples C++ code reads straight
// into the slot pool, with no Python in the hot path (stoker.io in Python).
//
// A sample is one or more fields, each a fixed-shape tensor.  Read() is
// called from several loader threads at once and must be thread-safe.
#ifndef STOKER_NATIVE_DATASET_H_
#define STOKER_NATIVE_DATASET_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "stoker/order_recipe.h"
#include "stoker/status.h"

namespace stoker {

// Element types, as in the batch format (src/shm/batch_format.h: DType).
enum class ElementType : uint8_t {
  kBool = 0, kUInt8, kInt8, kInt16, kInt32, kInt64, kUInt16, kUInt32, kUInt64,
  kFloat16, kBFloat16, kFloat32, kFloat64, kComplex64, kComplex128,
};

// What a variable uint8 field's sample is in a batch: a 1-D tensor, or
// its bytes as a str (UTF-8) or bytes object (Parquet's string and binary
// columns).
enum class FieldLeaf : uint8_t { kTensor = 0, kStr = 1, kBytes = 2 };

// How a batch holds a variable field's samples (a sample alone, with
// batch_size=None, is its 1-D tensor, str or bytes whatever the layout):
//   kEach     a list of B values (1-D tensors, or str / bytes by its leaf);
//   kOffsets  {"values": the B samples' elements end to end, 1-D,
//              "offsets": int64 [B + 1]}: sample i is
//              values[offsets[i]:offsets[i + 1]] (str / bytes: uint8);
//   kPadded   {"values": [B, L], L the batch's longest sample, each row
//              zero-filled past its sample, "lengths": int64 [B]}.
// Offsets and lengths count elements, not bytes.
enum class FieldLayout : uint8_t { kEach = 0, kOffsets = 1, kPadded = 2 };

struct FieldSpec {
  std::string name;            // "" for a dataset whose batch is one tensor
  ElementType dtype = ElementType::kFloat32;
  std::vector<int64_t> shape;  // of one sample
  // A variable-length field: each sample is a 1-D tensor of dtype whose
  // length SampleBytes() tells; a batch holds a list of them.  shape is {}.
  bool variable = false;
  FieldLeaf leaf = FieldLeaf::kTensor;  // (variable uint8 fields)
  FieldLayout layout = FieldLayout::kEach;  // (variable fields, in a batch)
  uint64_t bytes() const;      // of one sample (fixed fields)
};

// What the readers do with a record whose content is bad (DataLoss: bad
// CRC, truncated, a feature of the wrong type or shape).
enum class OnError : uint8_t { kRaise = 0, kSkip = 1 };

// How a sample (and so a batch) is laid out: a dict by field name (one
// unnamed field: the tensor itself), or a tuple of the fields in order (a
// batch: a list, as torch's default_collate makes of tuples).
enum class SampleStructure : uint8_t { kDict = 0, kTuple = 1 };

class NativeDataset {
 public:
  virtual ~NativeDataset() = default;
  virtual uint64_t size() const = 0;
  virtual const std::vector<FieldSpec>& fields() const = 0;
  // Writes sample `index`: field f to dst[f] (fields()[f].bytes() bytes).
  // Errors name the file, the record and the offset.  Thread-safe.
  virtual Status Read(uint64_t index, uint8_t* const* dst) = 0;
  // A batch's samples: sample indices[k] (k < n) to dsts[k * F + f], F =
  // fields().size(), all or an error.  By default Read each; a dataset that
  // reads neighbouring records at once overrides it (RecordFileDataset: one
  // read for a run of adjacent records; MixedDataset: each source its own
  // samples).  Not called where a bad sample is to be skipped
  // (on_error=skip): the loader calls Read per sample there.  Thread-safe.
  virtual Status ReadBatch(const uint64_t* indices, uint64_t n, uint8_t* const* dsts);
  // A short description for messages ("raw file /data/x.bin").
  virtual std::string Describe() const = 0;
  // One sample, for messages: its file where it has one of its own.
  virtual std::string DescribeSample(uint64_t index) const {
    return "sample " + std::to_string(index) + " of " + Describe();
  }
  virtual SampleStructure structure() const { return SampleStructure::kDict; }

  // Variable fields only: the bytes of each field of sample `index`
  // (bytes[f]; fixed fields get fields()[f].bytes()).
  virtual Status SampleBytes(uint64_t index, uint64_t* bytes);
  bool has_variable_fields() const;

  // Called by a loader when epoch `epoch` starts, before it asks for size()
  // and Order(): a dataset whose contents change between epochs (the
  // streaming cache) takes its snapshot here.  May block (waiting for data).
  virtual Status BeginEpoch(uint64_t epoch) {
    SetEpoch(epoch);
    return Status::OK();
  }
  // This rank's sample order for the epoch.  The default is torch's
  // DistributedSampler's: a permutation of [0, size()) drawn from (seed,
  // epoch) when shuffling, padded (repeating from the start) or cut to a
  // multiple of world_size, then every world_size-th from rank.  A dataset
  // that streams its data orders samples so that they come shard by shard.
  virtual std::vector<int64_t> Order(const OrderRecipe& o);
  // Called (from any thread) when the loader stops using the dataset's
  // current epoch early; a streaming dataset stops waiting for data.
  virtual void Interrupt() {}
  // What a loader's saved state must hold to repeat the current epoch, for
  // a dataset whose epochs differ (a growing streaming dataset: its shard
  // list); "" for the others.  RestoreEpoch makes the next BeginEpoch
  // repeat the epoch `state` describes.
  virtual std::string EpochState() const { return ""; }
  virtual Status RestoreEpoch(const std::string& state) {
    return state.empty() ? Status::OK()
                         : Status::InvalidArgument(Describe() + ": the saved state is of another kind of dataset "
                                                   "(it describes an epoch's shards)");
  }

  // The seed a loader draws from its generator for the epoch, for
  // transforms whose randomness comes from the loader's generator.
  virtual void SetSeed(uint64_t) {}
  // The epoch, for transforms whose randomness depends on it.
  virtual void SetEpoch(uint64_t epoch) { epoch_.store(epoch, std::memory_order_relaxed); }
  uint64_t epoch() const { return epoch_.load(std::memory_order_relaxed); }

  // Bad records: raise (the default) or skip and count.  Records found bad
  // while opening (a damaged file tail) are counted at open.
  void set_on_error(OnError e) { on_error_ = e; }
  OnError on_error() const { return on_error_; }
  void CountSkipped(const Status& why);
  uint64_t skipped() const { return skipped_.load(std::memory_order_relaxed); }
  std::string last_skipped() const;

 private:
  std::atomic<uint64_t> epoch_{0};
  OnError on_error_ = OnError::kRaise;
  std::atomic<uint64_t> skipped_{0};
  mutable std::mutex skip_mu_;
  std::string last_skipped_;
};

// InvalidArgument (starting with `what`) unless every dimension is > 0 and
// a sample's size fits in 64 bits.
Status ValidateFieldSpec(const FieldSpec& f, const std::string& what);

// Elements in a shape (1 for a scalar's ()).
uint64_t NumElements(const std::vector<int64_t>& shape);
// "(2, 3)", "(4,)", "()": a shape as Python writes it, for messages.
std::string ShapeString(const std::vector<int64_t>& shape);

// Size in bytes of one element; 0 for an unknown code.
uint32_t ElementSize(ElementType t);
// "float32", "int64", ... (numpy names).
const char* DTypeNameOf(ElementType t);
// Parses "float32", "int64", ... (numpy names).
Result<ElementType> ParseElementType(const std::string& name);

}  // namespace stoker

#endif  // STOKER_NATIVE_DATASET_H_
