// Status and Result<T>: errors as values at every module boundary.
//
// A Status is either OK or a (code, message) pair. The message is written for an operator: it
// names what is wrong and, where it helps, what would be accepted (e.g.
// "sharing.timeSlicing.resources[0].replicas: must be 2..48, got 60"). Result<T> holds either a
// value or a non-OK Status. Neither type throws; exceptions never cross a gRPC handler, an HTTP
// handler or the C ABI. Reading the value of a Result that holds an error is a bug in the
// caller: it prints the error to stderr and aborts (it does not throw).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace gpushare {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the input is malformed or out of range
  kNotFound,            // a named thing does not exist
  kAlreadyExists,       // creating something that is there
  kFailedPrecondition,  // the system is not in a state where this can be done
  kResourceExhausted,   // no room: memory, devices, quota
  kUnavailable,         // a peer is unreachable; retrying may help
  kDeadlineExceeded,    // a timeout
  kAborted,             // a conflict (e.g. optimistic concurrency); retry from a fresh read
  kPermissionDenied,
  kUnimplemented,
  kInternal,  // a bug or a broken invariant
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>" (its reason kept).
  Status WithContext(std::string_view context) const;

  // The core/reasons.h code of a refusal, when one was attached ("" otherwise): what the counters,
  // Events and replies label the error with, carried by the error itself through every return.
  // It must view a string that outlives every copy (a core/reasons.h constant).
  std::string_view reason() const { return reason_; }
  // The same error with `reason` attached (an OK status stays OK, without one).
  Status WithReason(std::string_view reason) && {
    if (!ok()) reason_ = reason;
    return std::move(*this);
  }
  Status WithReason(std::string_view reason) const& { return Status(*this).WithReason(reason); }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string_view reason_;
};

namespace internal {
// Prints "Result::value() on an error: <status>" and aborts.
[[noreturn]] void DieReadingError(const Status* status);
}  // namespace internal

// Result<T>: a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result constructed from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }

  // The value; the Result must hold one (else: abort, see above).
  const T& value() const& { return *Checked(); }
  T& value() & { return *Checked(); }
  T&& value() && { return std::move(*Checked()); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return Checked(); }
  T* operator->() { return Checked(); }

  // The error, or OK when a value is held.
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }

  T value_or(T fallback) const { return ok() ? value() : std::move(fallback); }

 private:
  const T* Checked() const {
    const T* v = std::get_if<T>(&v_);
    if (v == nullptr) internal::DieReadingError(std::get_if<Status>(&v_));
    return v;
  }
  T* Checked() { return const_cast<T*>(static_cast<const Result*>(this)->Checked()); }

  std::variant<T, Status> v_;
};

// `r` with `reason` attached to its error (a value passes unchanged).
template <typename T>
Result<T> WithReason(Result<T> r, std::string_view reason) {
  if (r.ok()) return r;
  return r.status().WithReason(reason);
}

}  // namespace gpushare

// Propagates a non-OK Status from an expression returning Status.
#define GPUSHARE_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::gpushare::Status gpushare_status_ = (expr);        \
    if (!gpushare_status_.ok()) return gpushare_status_; \
  } while (0)

#define GPUSHARE_STATUS_CONCAT_INNER(a, b) a##b
#define GPUSHARE_STATUS_CONCAT(a, b) GPUSHARE_STATUS_CONCAT_INNER(a, b)

// Evaluates `expr` (a Result<T>); on error returns its Status from the enclosing function, else
// moves the value into `lhs`, which may be a declaration:
//   GPUSHARE_ASSIGN_OR_RETURN(Inventory inv, LoadInventory(path));
#define GPUSHARE_ASSIGN_OR_RETURN(lhs, expr) \
  GPUSHARE_ASSIGN_OR_RETURN_IMPL(GPUSHARE_STATUS_CONCAT(gpushare_result_, __LINE__), lhs, expr)
#define GPUSHARE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
