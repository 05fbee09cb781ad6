#include "stoker/status.h"

#include <cstring>

namespace stoker {

Status Status::IOError(const std::string& what, int err) {
  return Status(Code::kIOError,
                what + ": " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

std::string Status::ToString() const {
  const char* name = "OK";
  switch (code_) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: name = "InvalidArgument"; break;
    case Code::kIOError: name = "IOError"; break;
    case Code::kResourceExhausted: name = "ResourceExhausted"; break;
    case Code::kCancelled: name = "Cancelled"; break;
    case Code::kTimeout: name = "Timeout"; break;
    case Code::kClosed: name = "Closed"; break;
    case Code::kWorkerDied: name = "WorkerDied"; break;
    case Code::kInterrupted: name = "Interrupted"; break;
    case Code::kInternal: name = "Internal"; break;
    case Code::kDataLoss: name = "DataLoss"; break;
    case Code::kNotFound: name = "NotFound"; break;
  }
  return std::string(name) + ": " + msg_;
}

}  // namespace stoker
