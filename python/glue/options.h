// Python option strings to the core's enums (for the bindings): errors are
// ValueErrors naming the option and its choices.
#ifndef STOKER_GLUE_OPTIONS_H_
#define STOKER_GLUE_OPTIONS_H_

#include <string>
#include <tuple>
#include <vector>

#include "glue/errors.h"
#include "stoker/native_dataset.h"
#include "stoker/shard_index.h"
#include "stoker/tar_fields.h"

namespace stoker::glue {

inline OnError ParseOnError(const std::string& s) {
  if (s == "raise") return OnError::kRaise;
  if (s == "skip") return OnError::kSkip;
  Throw(Status::InvalidArgument("on_error='" + s + "' is not one of 'raise', 'skip'"));
}

inline TarFieldKind ParseTarKind(const std::string& s) {
  if (s == "npy") return TarFieldKind::kNpy;
  if (s == "raw") return TarFieldKind::kRaw;
  if (s == "int") return TarFieldKind::kInt;
  if (s == "bytes") return TarFieldKind::kBytes;
  Throw(Status::InvalidArgument("tar field kind '" + s + "' is not one of 'npy', 'raw', 'int', 'bytes'"));
}

inline const char* TarKindName(TarFieldKind k) {
  switch (k) {
    case TarFieldKind::kNpy: return "npy";
    case TarFieldKind::kRaw: return "raw";
    case TarFieldKind::kInt: return "int";
    default: return "bytes";
  }
}

// Python's (name, dtype, shape) feature declarations.
using FeatureArgs = std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>;
inline std::vector<FieldSpec> FeatureSpecs(const FeatureArgs& features) {
  std::vector<FieldSpec> specs;
  for (const auto& [name, dtype, shape] : features) specs.push_back(FieldSpec{name, Check(ParseElementType(dtype)), shape});
  return specs;
}

// Python's (extension, kind, dtype or "", shape) tar field declarations.
using TarFieldArgs = std::vector<std::tuple<std::string, std::string, std::string, std::vector<int64_t>>>;
inline std::vector<TarFieldDecl> TarDecls(const TarFieldArgs& fields) {
  std::vector<TarFieldDecl> decls;
  for (const auto& [ext, kind, dtype, shape] : fields)
    decls.push_back({ext, ParseTarKind(kind), dtype.empty() ? ElementType::kUInt8 : Check(ParseElementType(dtype)), shape});
  return decls;
}

inline ShardFormat ParseShardFormat(const std::string& s) {
  if (s == "tfrecord") return ShardFormat::kTFRecord;
  if (s == "tar") return ShardFormat::kTar;
  Throw(Status::InvalidArgument("format='" + s + "' is not one of 'tfrecord', 'tar'"));
}

}  // namespace stoker::glue

#endif  // STOKER_GLUE_OPTIONS_H_
