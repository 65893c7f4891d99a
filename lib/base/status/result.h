#pragma once
// Errors as values: Result<T> holds either a T or an Error{code, message, reason}; Status is
// Result<void>. The one error vocabulary of the project.
//
//   webhook::Result<Shape> shape = parse_shape("4x4");
//   if (!shape) return shape.error();          // propagate by hand, or:
//   ASSIGN_OR_RETURN(Shape s, parse_shape("4x4"));
//   RETURN_IF_ERROR(check_something(s));
//
// Codes follow absl::StatusCode where one fits (InvalidArgument when the input itself is
// malformed, FailedPrecondition when it is well formed but cannot apply), plus the three HTTP
// answers the admission envelope needs. `reason` is a short, stable category for metrics and
// logs (the table in podpatch/reasons.h). Exceptions never cross a lib/ boundary; code that
// calls throwing libraries catches at its edge and returns an Error.

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace webhook {

enum class ErrorCode {
  kInvalidArgument,       // the input is malformed (HTTP 400)
  kFailedPrecondition,    // well formed, but cannot apply in this state (HTTP 400)
  kAlreadyExists,         // a conflicting object already exists (HTTP 409)
  kResourceExhausted,     // the input is over a size or depth bound (HTTP 413)
  kUnavailable,           // a dependency is not ready; retrying may succeed (HTTP 503)
  kInternal,              // a bug or an impossible state (HTTP 500)
  kMethodNotAllowed,      // the HTTP method does not apply to the path (HTTP 405)
  kDeadlineExceeded,      // the input did not arrive in time (HTTP 408)
  kUnsupportedMediaType,  // the body is not of the expected media type (HTTP 415)
};

// The HTTP status code an admission denial with this error carries.
constexpr int http_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition:
      return 400;
    case ErrorCode::kAlreadyExists:
      return 409;
    case ErrorCode::kResourceExhausted:
      return 413;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kInternal:
      return 500;
    case ErrorCode::kMethodNotAllowed:
      return 405;
    case ErrorCode::kDeadlineExceeded:
      return 408;
    case ErrorCode::kUnsupportedMediaType:
      return 415;
  }
  return 500;
}

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  // A name from podpatch/reasons.h (static storage: never a temporary string), or empty.
  std::string_view reason = {};

  // The same error with `r` as its reason.
  Error with_reason(std::string_view r) && {
    reason = r;
    return std::move(*this);
  }
  Error with_reason(std::string_view r) const& { return Error(*this).with_reason(r); }
};

inline Error invalid_argument(std::string message) {
  return {ErrorCode::kInvalidArgument, std::move(message)};
}
inline Error failed_precondition(std::string message) {
  return {ErrorCode::kFailedPrecondition, std::move(message)};
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design, like StatusOr
  Result(Error error) : v_(std::move(error)) {}  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  const T& value() const& {
    assert(has_value());
    return std::get<0>(v_);
  }
  T& value() & {
    assert(has_value());
    return std::get<0>(v_);
  }
  T&& value() && {
    assert(has_value());
    return std::get<0>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  const Error& error() const {
    assert(!has_value());
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace webhook

// Propagation in the manner of abseil's RETURN_IF_ERROR / ASSIGN_OR_RETURN, for functions that
// return a webhook::Result<T> or webhook::Status:
//
//   RETURN_IF_ERROR(check_depth(text));            // returns its Error when it failed
//   ASSIGN_OR_RETURN(PodView view, PodView::create(pod));
//   ASSIGN_OR_RETURN(facts.slice, read_slice(view));
#define WEBHOOK_STATUS_CONCAT_INNER(a, b) a##b
#define WEBHOOK_STATUS_CONCAT(a, b) WEBHOOK_STATUS_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                              \
  do {                                                     \
    if (auto webhook_status_ = (expr); !webhook_status_) { \
      return webhook_status_.error();                      \
    }                                                      \
  } while (false)

#define ASSIGN_OR_RETURN(lhs, expr) \
  WEBHOOK_ASSIGN_OR_RETURN_IMPL(WEBHOOK_STATUS_CONCAT(webhook_result_, __LINE__), lhs, expr)

#define WEBHOOK_ASSIGN_OR_RETURN_IMPL(result, lhs, expr) \
  auto result = (expr);                                  \
  if (!result) {                                         \
    return result.error();                               \
  }                                                      \
  lhs = std::move(result).value()
