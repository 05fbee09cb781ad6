// libFuzzer target: TFRecord container, index and tf.train.Example decoding.
// The first byte picks what the rest is: 0 a TFRecord file read with CRC
// checks, 1 the same without (so mutated records reach the decoder), 2 a
// bare Example for the decoder.  Every error must be a Status, never a
// crash, an overrun or a hang.
#include <cstdint>
#include <vector>

#include "fuzz_input.h"
#include "io/example_decoder.h"
#include "io/tfrecord_dataset.h"

using namespace stoker;

namespace {

const std::vector<FieldSpec>& Specs() {
  static const std::vector<FieldSpec> specs = {{"x", ElementType::kFloat32, {2, 3}},
                                               {"y", ElementType::kInt64, {}},
                                               {"raw", ElementType::kInt16, {4}},
                                               {"h", ElementType::kFloat16, {2}}};
  return specs;
}

struct Dst {
  uint8_t x[24], y[8], raw[8], h[4];
  uint8_t* p[4] = {x, y, raw, h};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0] % 3;
  ++data;
  --size;
  Dst dst;
  if (mode == 2) {
    ExampleDecoder(Specs()).Decode(data, size, dst.p).ok();
    return 0;
  }
  const std::string path = fuzz::AsFile(data, size);
  for (OnError on_error : {OnError::kRaise, OnError::kSkip}) {
    TFRecordOptions o;
    o.index_cache = false;
    o.verify_crc = mode == 0;
    o.on_error = on_error;
    auto ds = TFRecordDataset::Open({path}, Specs(), o);
    if (!ds.ok()) continue;
    for (uint64_t i = 0; i < ds.value()->size() && i < 64; ++i) ds.value()->Read(i, dst.p).ok();
  }
  return 0;
}
