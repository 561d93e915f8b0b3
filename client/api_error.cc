#include "client/api_error.h"

#include <string>
#include <utility>
#include <vector>

#include "client/http_status.h"
#include "common/strings.h"

namespace rsc::client {
namespace {

// How much of a body that is not a metav1.Status goes into the message: enough
// for "Too many requests, please try again later." or a proxy's error line,
// not a whole HTML page.
constexpr size_t kMaxPlainBodyBytes = 256;

std::string stringField(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    return {};
  }
  return it->get<std::string>();
}

}  // namespace

Status statusFromKubeStatus(const Json& status) {
  if (!status.is_object()) {
    return internalError("API server sent a Status that is not an object");
  }
  std::string reason = stringField(status, "reason");
  std::string message = stringField(status, "message");
  int http_code = 0;
  if (auto it = status.find("code"); it != status.end() && it->is_number_integer()) {
    http_code = it->get<int>();
  }
  if (http_code == 0) {
    http_code = httpCodeForKubeReason(reason);
  }

  std::vector<FieldError> details;
  if (auto d = status.find("details"); d != status.end() && d->is_object()) {
    if (auto causes = d->find("causes"); causes != d->end() && causes->is_array()) {
      for (const Json& cause : *causes) {
        if (!cause.is_object()) {
          continue;
        }
        details.push_back({stringField(cause, "field"), stringField(cause, "message")});
      }
    }
  }

  StatusCode code = http_code == 0 ? StatusCode::kInternal : statusCodeFromHttp(http_code, reason);
  if (code == StatusCode::kOk) {
    // A Status that reports success is not an error; nothing to carry.
    return okStatus();
  }
  if (message.empty()) {
    message = reason.empty() ? "HTTP " + std::to_string(http_code) : reason;
  }
  return {code, std::move(message), std::move(details), std::move(reason)};
}

Status statusFromHttpResponse(int http_code, std::string_view body) {
  // Only a JSON object with kind Status (or the Status fields) is trusted as
  // one; anything else (plain text from the priority-and-fairness filter, a
  // proxy's HTML) still maps by the HTTP code.
  if (!body.empty() && body.front() == '{') {
    Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object() && (stringField(parsed, "kind") == "Status" ||
                               parsed.contains("reason") || parsed.contains("message"))) {
      if (!parsed.contains("code")) {
        parsed["code"] = http_code;
      }
      Status status = statusFromKubeStatus(parsed);
      if (!status.ok()) {
        return status;
      }
    }
  }
  StatusCode code = statusCodeFromHttp(http_code);
  if (code == StatusCode::kOk) {
    return okStatus();
  }
  std::string message = "HTTP " + std::to_string(http_code);
  std::string text = excerpt(body, kMaxPlainBodyBytes);
  if (!text.empty()) {
    message += ": " + text;
  }
  return {code, std::move(message)};
}

bool isRetryable(const Status& status) {
  return status.code() == StatusCode::kUnavailable ||
         status.code() == StatusCode::kDeadlineExceeded;
}

}  // namespace rsc::client
