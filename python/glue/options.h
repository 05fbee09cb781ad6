// Python option strings to the core's enums (for the bindings): errors are
// ValueErrors naming the option and its choices.
#ifndef STOKER_GLUE_OPTIONS_H_
#define STOKER_GLUE_OPTIONS_H_

#include <string>

#include "glue/errors.h"
#include "stoker/native_dataset.h"
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

}  // namespace stoker::glue

#endif  // STOKER_GLUE_OPTIONS_H_
