#include "common/status.h"

namespace rsc {

std::string_view statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kUnprocessable:
      return "Unprocessable";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kConflict:
      return "Conflict";
    case StatusCode::kGone:
      return "Gone";
    case StatusCode::kUnauthenticated:
      return "Unauthenticated";
    case StatusCode::kPermissionDenied:
      return "PermissionDenied";
    case StatusCode::kTooLarge:
      return "TooLarge";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

Status Status::withContext(std::string_view context) const& {
  Status copy = *this;
  return std::move(copy).withContext(context);
}

Status Status::withContext(std::string_view context) && {
  if (ok()) return std::move(*this);
  message_ = std::string(context) + ": " + message_;
  return std::move(*this);
}

std::string Status::toString() const {
  if (ok()) return "OK";
  return std::string(statusCodeName(code_)) + ": " + message_;
}

}  // namespace rsc
