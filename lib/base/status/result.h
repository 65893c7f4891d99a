#pragma once
// Errors as values: Result<T> holds either a T or an Error{code, message}.
//
//   webhook::Result<Shape> shape = parse_shape("4x4");
//   if (!shape) return shape.error();          // propagate
//   use(shape.value());
//
// Codes follow absl::StatusCode: InvalidArgument when the input itself is malformed,
// FailedPrecondition when it is well formed but cannot apply. Exceptions never cross a lib/
// boundary; code that calls throwing libraries catches at its edge and returns an Error.

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace webhook {

enum class ErrorCode {
  kInvalidArgument,     // the input is malformed (HTTP 400)
  kFailedPrecondition,  // well formed, but cannot apply in this state (HTTP 400)
  kAlreadyExists,       // a conflicting object already exists (HTTP 409)
  kResourceExhausted,   // the input is over a size or depth bound (HTTP 413)
  kUnavailable,         // a dependency is not ready; retrying may succeed (HTTP 503)
  kInternal,            // a bug or an impossible state (HTTP 500)
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
  }
  return 500;
}

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
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
  Result(T value) : v_(std::move(value)) {}   // NOLINT: implicit by design, like StatusOr
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
