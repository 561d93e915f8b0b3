#include "client/http_status.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string_view>
#include <utility>

namespace rsc::client {
namespace {

TEST(HttpStatus, OneTableGivesPhrasesAndKubeReasons) {
  struct Case {
    int code;
    std::string_view phrase;
    std::string_view reason;
  };
  // A code without a Kubernetes reason, or not in the table, is an
  // InternalError to Kubernetes clients.
  for (const Case& c : std::initializer_list<Case>{
           {200, "OK", "InternalError"},
           {404, "Not Found", "NotFound"},
           {409, "Conflict", "Conflict"},
           {410, "Gone", "Gone"},
           {422, "Unprocessable Entity", "Invalid"},
           {429, "Too Many Requests", "TooManyRequests"},
           {500, "Internal Server Error", "InternalError"},
           {503, "Service Unavailable", "ServiceUnavailable"},
           {599, "Unknown", "InternalError"},
       }) {
    EXPECT_EQ(httpReasonPhrase(c.code), c.phrase) << c.code;
    EXPECT_EQ(kubeStatusReason(c.code), c.reason) << c.code;
  }
}

TEST(HttpStatus, EveryKubeReasonMapsToItsCode) {
  // Several reasons share a code; an empty or unknown reason has none.
  for (const auto& [reason, code] : std::initializer_list<std::pair<std::string_view, int>>{
           {"NotFound", 404},
           {"AlreadyExists", 409},
           {"Conflict", 409},
           {"Expired", 410},
           {"ServerTimeout", 500},
           {"Timeout", 504},
           {"", 0},
           {"NoSuchReason", 0},
       }) {
    EXPECT_EQ(httpCodeForKubeReason(reason), code) << reason;
  }
}

TEST(HttpStatus, EveryStatusCodeIsAnsweredWithItsCode) {
  for (const auto& [code, http] : std::initializer_list<std::pair<StatusCode, int>>{
           {StatusCode::kInvalidArgument, 400},
           {StatusCode::kUnauthenticated, 401},
           {StatusCode::kPermissionDenied, 403},
           {StatusCode::kNotFound, 404},
           {StatusCode::kAlreadyExists, 409},
           {StatusCode::kConflict, 409},
           {StatusCode::kTooLarge, 413},
           {StatusCode::kUnprocessable, 422},
           {StatusCode::kResourceExhausted, 429},
           {StatusCode::kUnavailable, 503},
           {StatusCode::kDeadlineExceeded, 503},
           // No fault of the request, nor of availability: the server's.
           {StatusCode::kGone, 500},
           {StatusCode::kInternal, 500},
           {StatusCode::kFailedPrecondition, 500},
           {StatusCode::kCancelled, 500},
       }) {
    EXPECT_EQ(httpCodeForStatus(code), http) << static_cast<int>(code);
  }
}

TEST(HttpStatus, AnAnswerGivenReadsBackAsTheSameStatusCode) {
  // What the inventory API answers, resourceslicectl reads back with the
  // same meaning; 429 and 503 both read as "retry later".
  for (StatusCode code :
       {StatusCode::kInvalidArgument, StatusCode::kUnauthenticated, StatusCode::kPermissionDenied,
        StatusCode::kNotFound, StatusCode::kConflict, StatusCode::kTooLarge,
        StatusCode::kUnprocessable, StatusCode::kUnavailable}) {
    EXPECT_EQ(statusCodeFromHttp(httpCodeForStatus(code)), code) << static_cast<int>(code);
  }
  EXPECT_EQ(statusCodeFromHttp(httpCodeForStatus(StatusCode::kAlreadyExists), "AlreadyExists"),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(statusCodeFromHttp(httpCodeForStatus(StatusCode::kResourceExhausted)),
            StatusCode::kUnavailable);
}

}  // namespace
}  // namespace rsc::client
