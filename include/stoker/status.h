// stoker/status.h -- error values of the C++ core.
//
// A Status is either OK or an error code with a message that tells the user
// what went wrong and, where possible, what to do about it.  The core never
// throws; every fallible call returns a Status or a Result<T>.  Conversion to
// exceptions happens only at the Python boundary.
//
// Thread safety: Status and Result are plain values; distinct objects may be
// used from distinct threads without synchronisation.
#ifndef STOKER_STATUS_H_
#define STOKER_STATUS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace stoker {

class Status {
 public:
  enum class Code : uint8_t {
    kOk = 0,
    kInvalidArgument,   // the caller passed something unusable
    kIOError,           // a system call failed; the message names it and errno
    kResourceExhausted, // a memory budget or table is full
    kTimeout,           // a deadline passed
    kClosed,            // the peer shut the channel down (a value, not a fault)
    kWorkerDied,        // a worker process exited while holding work
    kInterrupted,       // a signal arrived while waiting; the caller may retry
    kCancelled,         // the task was taken back (e.g. to free memory); it runs again later
    kInternal,          // a broken invariant: a bug in stoker
    kDataLoss,          // a file's content is corrupt or truncated (bad CRC, short record)
    kNotFound,          // a named object (a store's key, its bucket) does not exist
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {Code::kInvalidArgument, std::move(msg)}; }
  static Status ResourceExhausted(std::string msg) { return {Code::kResourceExhausted, std::move(msg)}; }
  static Status Timeout(std::string msg) { return {Code::kTimeout, std::move(msg)}; }
  static Status Closed(std::string msg) { return {Code::kClosed, std::move(msg)}; }
  static Status WorkerDied(std::string msg) { return {Code::kWorkerDied, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }
  static Status Interrupted(std::string msg) { return {Code::kInterrupted, std::move(msg)}; }
  static Status Cancelled(std::string msg) { return {Code::kCancelled, std::move(msg)}; }
  static Status DataLoss(std::string msg) { return {Code::kDataLoss, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  // A status of any code (e.g. one carried across processes as a code byte).
  static Status FromCode(Code c, std::string msg) { return {c, std::move(msg)}; }
  // An I/O error for the system call `what` that failed with `err` (an errno value).
  static Status IOError(const std::string& what, int err);
  // An I/O failure that is no system call's (a server's answer, a network
  // error): the message says all there is, with no errno added.
  static Status IOError(std::string msg) { return {Code::kIOError, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return msg_; }
  bool IsClosed() const { return code_ == Code::kClosed; }
  bool IsTimeout() const { return code_ == Code::kTimeout; }
  bool IsInterrupted() const { return code_ == Code::kInterrupted; }
  bool IsResourceExhausted() const { return code_ == Code::kResourceExhausted; }
  bool IsCancelled() const { return code_ == Code::kCancelled; }
  bool IsDataLoss() const { return code_ == Code::kDataLoss; }
  // "IOError: mmap of 4096 bytes: Cannot allocate memory (errno 12)"
  std::string ToString() const;

 private:
  Status(Code c, std::string m) : code_(c), msg_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string msg_;
};

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}   // NOLINT: REQUIRES: !status.ok()
  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace stoker

// Propagates a non-OK Status out of the enclosing function.
#define STOKER_RETURN_IF_ERROR(expr)           \
  do {                                         \
    ::stoker::Status _st = (expr);             \
    if (!_st.ok()) return _st;                 \
  } while (0)

#define STOKER_CONCAT_INNER(a, b) a##b
#define STOKER_CONCAT(a, b) STOKER_CONCAT_INNER(a, b)
#define STOKER_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
// Evaluates a Result<T> expression; on error returns its Status, else assigns.
#define STOKER_ASSIGN_OR_RETURN(lhs, expr) \
  STOKER_ASSIGN_OR_RETURN_IMPL(STOKER_CONCAT(_res_, __LINE__), lhs, expr)

#endif  // STOKER_STATUS_H_
