// How the members of a WebDataset-style tar shard become fields (see
// TarShardDataset in src/io/tar_shard_dataset.h and stoker.io.TarShardDataset):
//   kNpy    a .npy member: a tensor of the dtype and shape of the first
//           sample's (every sample must match);
//   kRaw    raw bytes of a declared dtype and shape;
//   kInt    an ASCII integer (WebDataset's .cls): an int64 scalar;
//   kBytes  any bytes: a variable-length uint8 tensor per sample.
#ifndef STOKER_TAR_FIELDS_H_
#define STOKER_TAR_FIELDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "stoker/native_dataset.h"

namespace stoker {

enum class TarFieldKind : uint8_t { kNpy, kRaw, kInt, kBytes };

struct TarFieldDecl {
  std::string ext;
  TarFieldKind kind = TarFieldKind::kBytes;
  ElementType dtype = ElementType::kUInt8;  // kRaw
  std::vector<int64_t> shape;               // kRaw
};

}  // namespace stoker

#endif  // STOKER_TAR_FIELDS_H_
