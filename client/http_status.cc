#include "client/http_status.h"

#include <array>

namespace rsc::client {
namespace {

struct HttpStatus {
  int code;
  std::string_view phrase;  // RFC 9110's reason phrase
  std::string_view reason;  // metav1.StatusReason, "" when Kubernetes has none
};

// A code's first row gives its phrase and reason; later rows of the same code
// only add reasons that map to it (k8s.io/apimachinery/pkg/apis/meta/v1).
constexpr auto kStatuses = std::to_array<HttpStatus>({
    {100, "Continue", ""},
    {200, "OK", ""},
    {202, "Accepted", ""},
    {204, "No Content", ""},
    {400, "Bad Request", "BadRequest"},
    {401, "Unauthorized", "Unauthorized"},
    {403, "Forbidden", "Forbidden"},
    {404, "Not Found", "NotFound"},
    {405, "Method Not Allowed", "MethodNotAllowed"},
    {406, "Not Acceptable", "NotAcceptable"},
    {408, "Request Timeout", ""},
    {409, "Conflict", "Conflict"},
    {409, "Conflict", "AlreadyExists"},
    {410, "Gone", "Gone"},
    {410, "Gone", "Expired"},
    {411, "Length Required", ""},
    {413, "Payload Too Large", "RequestEntityTooLarge"},
    {415, "Unsupported Media Type", "UnsupportedMediaType"},
    {422, "Unprocessable Entity", "Invalid"},
    {429, "Too Many Requests", "TooManyRequests"},
    {431, "Request Header Fields Too Large", "RequestHeaderFieldsTooLarge"},
    {500, "Internal Server Error", "InternalError"},
    {500, "Internal Server Error", "ServerTimeout"},
    {501, "Not Implemented", ""},
    {503, "Service Unavailable", "ServiceUnavailable"},
    {504, "Gateway Timeout", "Timeout"},
});

// How a failure reads as an HTTP answer and back. A row is read (an answer
// of that code, and reason when one is given, means `status`), answered (a
// failure with `status` is answered with that code), or both; the first
// matching row wins.
enum class Way { kBoth, kRead, kAnswer };
struct Meaning {
  int code;
  std::string_view reason;  // "" matches any reason
  StatusCode status;
  Way way;
};

constexpr auto kMeanings = std::to_array<Meaning>({
    {400, "", StatusCode::kInvalidArgument, Way::kBoth},
    {401, "", StatusCode::kUnauthenticated, Way::kBoth},
    {403, "", StatusCode::kPermissionDenied, Way::kBoth},
    {404, "", StatusCode::kNotFound, Way::kBoth},
    // A name clash and a stale write both answer 409; only the reason tells
    // them apart, and callers react differently (rename vs re-read).
    {409, "AlreadyExists", StatusCode::kAlreadyExists, Way::kBoth},
    {409, "", StatusCode::kConflict, Way::kBoth},
    {410, "", StatusCode::kGone, Way::kRead},
    {413, "", StatusCode::kTooLarge, Way::kBoth},
    {422, "", StatusCode::kUnprocessable, Way::kBoth},
    // The API server's 429 is retried like a 503; ours tells one client that
    // it is over its own limit.
    {429, "", StatusCode::kUnavailable, Way::kRead},
    {429, "", StatusCode::kResourceExhausted, Way::kAnswer},
    // The server will never do this; retrying cannot help.
    {501, "", StatusCode::kInternal, Way::kRead},
    {505, "", StatusCode::kInternal, Way::kRead},
    {503, "", StatusCode::kUnavailable, Way::kAnswer},
    {503, "", StatusCode::kDeadlineExceeded, Way::kAnswer},
});

const HttpStatus* find(int code) {
  for (const HttpStatus& status : kStatuses) {
    if (status.code == code) return &status;
  }
  return nullptr;
}

}  // namespace

std::string_view httpReasonPhrase(int code) {
  const HttpStatus* status = find(code);
  return status != nullptr ? status->phrase : "Unknown";
}

std::string_view kubeStatusReason(int code) {
  const HttpStatus* status = find(code);
  return status != nullptr && !status->reason.empty() ? status->reason : "InternalError";
}

int httpCodeForKubeReason(std::string_view reason) {
  if (reason.empty()) return 0;
  for (const HttpStatus& status : kStatuses) {
    if (status.reason == reason) return status.code;
  }
  return 0;
}

StatusCode statusCodeFromHttp(int http_code, std::string_view reason) {
  if (http_code >= 200 && http_code < 300) return StatusCode::kOk;
  for (const Meaning& m : kMeanings) {
    if (m.way != Way::kAnswer && m.code == http_code && (m.reason.empty() || m.reason == reason)) {
      return m.status;
    }
  }
  if (http_code >= 500 && http_code < 600) return StatusCode::kUnavailable;
  // Other 4xx answers (405, 406, 415, ...) mean the request itself is wrong.
  if (http_code >= 400 && http_code < 500) return StatusCode::kInvalidArgument;
  return StatusCode::kInternal;
}

int httpCodeForStatus(StatusCode code) {
  for (const Meaning& m : kMeanings) {
    if (m.way != Way::kRead && m.status == code) return m.code;
  }
  return 500;
}

}  // namespace rsc::client
