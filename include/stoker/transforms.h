// Native transforms: per-sample work on one field that keeps the read path
// free of Python (dtype cast, normalize, crop / random crop, flip, reshape),
// chained per field with TransformDataset.
//
// Randomness (RandomCrop, Flip with p < 1) is a function of (seed, epoch,
// sample index, position in the chain): the same sample in the same epoch
// gets the same crop whichever thread reads it, and a resumed run repeats it.
#ifndef STOKER_TRANSFORMS_H_
#define STOKER_TRANSFORMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "stoker/native_dataset.h"
#include "stoker/status.h"

namespace stoker {

class Transform {
 public:
  virtual ~Transform() = default;
  // The output for an input of `in`; InvalidArgument saying why it cannot apply.
  virtual Result<FieldSpec> OutputSpec(const FieldSpec& in) const = 0;
  // Writes the output for `src` (of spec `in`) to `dst`; `random` is this
  // sample's random word.
  virtual void Apply(const FieldSpec& in, const uint8_t* src, uint8_t* dst, uint64_t random) const = 0;
  // Reshape: the bytes do not change, no copy is needed.
  virtual bool IsView() const { return false; }
  virtual std::string Describe() const = 0;
};

// Element-wise conversion to `to` (C casts; floats to integers saturate, NaN -> 0).
std::shared_ptr<Transform> MakeCast(ElementType to);
// (x - mean[c]) / std[c] with c the index along `axis` (one value: all
// elements); float32 out (float64 for float64 in).
Result<std::shared_ptr<Transform>> MakeNormalize(std::vector<double> mean, std::vector<double> stddev, int axis = 0);
// The window [offset, offset+size) of the last size.size() dimensions.
Result<std::shared_ptr<Transform>> MakeCrop(std::vector<int64_t> offset, std::vector<int64_t> size);
// A window of `size` of the last size.size() dimensions at a random offset.
Result<std::shared_ptr<Transform>> MakeRandomCrop(std::vector<int64_t> size);
// Reverses `axis` (negative: from the end) with probability p.
Result<std::shared_ptr<Transform>> MakeFlip(int axis, double p);
// A new shape with the same number of elements (one -1 is inferred).
Result<std::shared_ptr<Transform>> MakeReshape(std::vector<int64_t> shape);

using TransformChain = std::vector<std::shared_ptr<Transform>>;

// `base` with chains applied to its fields (field name -> chain; "" names a
// single unnamed field).  InvalidArgument for an unknown field, a variable
// field, or a chain that cannot apply to its field's spec.
Result<std::shared_ptr<NativeDataset>> TransformDataset(std::shared_ptr<NativeDataset> base,
                                                        std::vector<std::pair<std::string, TransformChain>> chains,
                                                        uint64_t seed);

}  // namespace stoker

#endif  // STOKER_TRANSFORMS_H_
