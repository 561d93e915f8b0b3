// Status and StatusOr: the error vocabulary every module boundary speaks.
// Library exceptions are caught in the adapter that calls the library and turned
// into a Status there; no exception crosses a module boundary.
// Values of these types are not synchronised; copy them between threads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rsc {

// Canonical error codes. HTTP codes from the API server are mapped to these
// in one place (client/api_error.cc); the inventory API maps them back.
enum class StatusCode {
  kOk,
  kCancelled,
  kInvalidArgument,    // malformed input: HTTP 400
  kUnprocessable,      // well-formed but fails validation: HTTP 422
  kNotFound,           // HTTP 404
  kAlreadyExists,      // HTTP 409 reason AlreadyExists
  kConflict,           // HTTP 409: stale resourceVersion or a foreign owner
  kGone,               // HTTP 410: resourceVersion too old, relist
  kUnauthenticated,    // HTTP 401
  kPermissionDenied,   // HTTP 403
  kTooLarge,           // HTTP 413
  kUnavailable,        // HTTP 429, 5xx, connection errors: retry with backoff
  kResourceExhausted,  // a client over its own limit: we answer HTTP 429
  kDeadlineExceeded,   // a timeout of ours
  kFailedPrecondition,
  kInternal,
};

// Returns the name of a code, as used in logs ("NotFound").
std::string_view statusCodeName(StatusCode code);

// One problem with one field of a request or object, such as
// {"devices[3].attributes[\"model\"]", "must be no more than 64 bytes"}.
struct FieldError {
  std::string field;
  std::string message;
  friend bool operator==(const FieldError&, const FieldError&) = default;
};

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  Status(StatusCode code, std::string message, std::vector<FieldError> details = {},
         std::string reason = {})
      : code_(code),
        message_(std::move(message)),
        reason_(std::move(reason)),
        details_(std::move(details)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // The machine-readable reason where one is known, e.g. the API server's
  // metav1.Status reason ("AlreadyExists", "Expired").
  const std::string& reason() const { return reason_; }
  const std::vector<FieldError>& details() const { return details_; }

  // Returns this status with `context: ` put before the message, so that an
  // error says where it happened: "update ResourceSlice x: conflict".
  Status withContext(std::string_view context) const&;
  Status withContext(std::string_view context) &&;

  // "NotFound: message" (or "OK").
  std::string toString() const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string reason_;
  std::vector<FieldError> details_;
};

inline Status okStatus() { return {}; }
inline Status invalidArgument(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
inline Status notFound(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
inline Status conflict(std::string message) { return {StatusCode::kConflict, std::move(message)}; }
inline Status unavailable(std::string message) {
  return {StatusCode::kUnavailable, std::move(message)};
}
inline Status internalError(std::string message) {
  return {StatusCode::kInternal, std::move(message)};
}
inline Status failedPrecondition(std::string message) {
  return {StatusCode::kFailedPrecondition, std::move(message)};
}
inline Status deadlineExceeded(std::string message) {
  return {StatusCode::kDeadlineExceeded, std::move(message)};
}
inline Status cancelled(std::string message) {
  return {StatusCode::kCancelled, std::move(message)};
}

// Holds either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor): implicit, as absl's is.
  StatusOr(Status status) : value_(std::move(status)) {
    if (std::get<Status>(value_).ok()) {
      value_ = Status(StatusCode::kInternal, "StatusOr constructed from an OK status");
    }
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  StatusOr(T value) : value_(std::move(value)) {}

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status() : std::get<Status>(value_); }

  // Precondition for the accessors: ok(). Violating it is a programmer error
  // and throws std::bad_variant_access.
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> value_;
};

}  // namespace rsc

#define RSC_STATUS_CONCAT_INNER(a, b) a##b
#define RSC_STATUS_CONCAT(a, b) RSC_STATUS_CONCAT_INNER(a, b)

// Returns the status of `expr` from the enclosing function if it is an error.
#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::rsc::Status rsc_status_ = (expr);        \
    if (!rsc_status_.ok()) return rsc_status_; \
  } while (false)

// Evaluates `rexpr` (a StatusOr); on error returns its status, else moves
// the value into `lhs` (which may be a declaration such as `auto x`).
#define ASSIGN_OR_RETURN(lhs, rexpr) \
  ASSIGN_OR_RETURN_IMPL(RSC_STATUS_CONCAT(rsc_statusor_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                          \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
