// The field numbers of proto/example.proto (tf.train.Example), which
// io/example_decoder.cc reads and io/tfrecord_writer.cc writes through
// io/proto_wire.h.
#ifndef STOKER_IO_EXAMPLE_FIELDS_H_
#define STOKER_IO_EXAMPLE_FIELDS_H_

#include <cstdint>

namespace stoker::example_fields {

constexpr uint32_t kExampleFeatures = 1;                            // Example.features
constexpr uint32_t kFeaturesMap = 1;                                // Features.feature: map entries
constexpr uint32_t kEntryKey = 1, kEntryValue = 2;                  // a map entry's key and Feature
constexpr uint32_t kBytesList = 1, kFloatList = 2, kInt64List = 3;  // Feature's oneof
constexpr uint32_t kListValue = 1;                                  // BytesList / FloatList / Int64List.value

}  // namespace stoker::example_fields

#endif  // STOKER_IO_EXAMPLE_FIELDS_H_
