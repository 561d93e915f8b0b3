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

}  // namespace rsc::client
