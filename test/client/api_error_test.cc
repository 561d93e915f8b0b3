#include "client/api_error.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace rsc::client {
namespace {

TEST(ApiError, HttpCodesMapToStatusCodes) {
  struct Case {
    int http;
    StatusCode want;
    std::string_view reason;
  };
  const std::vector<Case> cases = {
      {200, StatusCode::kOk, ""},
      {201, StatusCode::kOk, ""},
      {202, StatusCode::kOk, ""},
      {400, StatusCode::kInvalidArgument, "BadRequest"},
      {401, StatusCode::kUnauthenticated, "Unauthorized"},
      {403, StatusCode::kPermissionDenied, "Forbidden"},
      {404, StatusCode::kNotFound, "NotFound"},
      {405, StatusCode::kInvalidArgument, "MethodNotAllowed"},
      {409, StatusCode::kAlreadyExists, "AlreadyExists"},
      {409, StatusCode::kConflict, "Conflict"},
      {409, StatusCode::kConflict, ""},
      {410, StatusCode::kGone, "Expired"},
      {413, StatusCode::kTooLarge, "RequestEntityTooLarge"},
      {415, StatusCode::kInvalidArgument, "UnsupportedMediaType"},
      {422, StatusCode::kUnprocessable, "Invalid"},
      {429, StatusCode::kUnavailable, "TooManyRequests"},
      {500, StatusCode::kUnavailable, "InternalError"},
      {501, StatusCode::kInternal, ""},
      {502, StatusCode::kUnavailable, ""},
      {503, StatusCode::kUnavailable, "ServiceUnavailable"},
      {504, StatusCode::kUnavailable, "Timeout"},
      {302, StatusCode::kInternal, ""},
      {0, StatusCode::kInternal, ""},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(statusCodeFromHttp(c.http, c.reason), c.want)
        << "HTTP " << c.http << " reason " << c.reason;
  }
}

TEST(ApiError, ConflictBodyKeepsMessageAndReason) {
  const std::string body = R"({"kind":"Status","apiVersion":"v1","metadata":{},
    "status":"Failure","message":"Operation cannot be fulfilled on resourceslices.resource.k8s.io \"x\": the object has been modified; please apply your changes to the latest version and try again",
    "reason":"Conflict","details":{"name":"x","group":"resource.k8s.io","kind":"resourceslices"},"code":409})";
  Status s = statusFromHttpResponse(409, body);
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.reason(), "Conflict");
  EXPECT_NE(s.message().find("the object has been modified"), std::string::npos) << s.message();
  EXPECT_TRUE(s.details().empty());
}

TEST(ApiError, AlreadyExistsIsToldApartFromConflict) {
  const std::string body = R"({"kind":"Status","apiVersion":"v1","status":"Failure",
    "message":"resourceslices.resource.k8s.io \"x\" already exists","reason":"AlreadyExists","code":409})";
  Status s = statusFromHttpResponse(409, body);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), "resourceslices.resource.k8s.io \"x\" already exists");
}

TEST(ApiError, InvalidBodyGivesFieldErrorsFromCauses) {
  const std::string body = R"({"kind":"Status","apiVersion":"v1","status":"Failure",
    "message":"ResourceSlice.resource.k8s.io \"x\" is invalid: [spec.driver: Required value, spec.devices[0].name: Invalid value: \"A\": a lowercase RFC 1123 label]",
    "reason":"Invalid","details":{"name":"x","group":"resource.k8s.io","kind":"ResourceSlice",
    "causes":[{"reason":"FieldValueRequired","message":"Required value","field":"spec.driver"},
              {"reason":"FieldValueInvalid","message":"Invalid value: \"A\": a lowercase RFC 1123 label","field":"spec.devices[0].name"},
              "not an object"]},
    "code":422})";
  Status s = statusFromHttpResponse(422, body);
  EXPECT_EQ(s.code(), StatusCode::kUnprocessable);
  EXPECT_EQ(s.reason(), "Invalid");
  ASSERT_EQ(s.details().size(), 2u);
  EXPECT_EQ(s.details()[0], (FieldError{"spec.driver", "Required value"}));
  EXPECT_EQ(s.details()[1].field, "spec.devices[0].name");
  EXPECT_EQ(s.details()[1].message, "Invalid value: \"A\": a lowercase RFC 1123 label");
}

TEST(ApiError, PlainTextTooManyRequestsIsUnavailableWithTheText) {
  Status s = statusFromHttpResponse(429, "Too many requests, please try again later.\n");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "HTTP 429: Too many requests, please try again later.");
  EXPECT_TRUE(isRetryable(s));
}

TEST(ApiError, LongNonStatusBodyIsCutTo256Bytes) {
  std::string html = "<html>" + std::string(1000, 'x') + "</html>";
  Status s = statusFromHttpResponse(502, html);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "HTTP 502: " + html.substr(0, 256) + "...");
}

TEST(ApiError, JsonThatIsNotAStatusMapsByCode) {
  Status s = statusFromHttpResponse(404, R"({"items":[]})");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), R"(HTTP 404: {"items":[]})");
  EXPECT_TRUE(s.reason().empty());
}

TEST(ApiError, BrokenJsonBodyMapsByCode) {
  Status s = statusFromHttpResponse(403, R"({"kind":"Status", "mess)");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
}

TEST(ApiError, EmptyBodyStillNamesTheCode) {
  Status s = statusFromHttpResponse(503, "");
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "HTTP 503");
}

TEST(ApiError, StatusBodyWithoutCodeUsesTheHttpCode) {
  Status s = statusFromHttpResponse(
      403, R"({"kind":"Status","message":"forbidden: no","reason":"Forbidden"})");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "forbidden: no");
}

TEST(ApiError, WatchErrorEventStatusIsGone) {
  Json status =
      Json::parse(R"json({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
    "message":"too old resource version: 123 (456)","reason":"Expired","code":410})json");
  Status s = statusFromKubeStatus(status);
  EXPECT_EQ(s.code(), StatusCode::kGone);
  EXPECT_EQ(s.reason(), "Expired");
  EXPECT_EQ(s.message(), "too old resource version: 123 (456)");
  EXPECT_FALSE(isRetryable(s));
}

TEST(ApiError, KubeStatusWithoutCodeMapsByReason) {
  EXPECT_EQ(statusFromKubeStatus(Json{{"reason", "Expired"}}).code(), StatusCode::kGone);
  EXPECT_EQ(statusFromKubeStatus(Json{{"reason", "NotFound"}}).code(), StatusCode::kNotFound);
  EXPECT_EQ(statusFromKubeStatus(Json{{"reason", "AlreadyExists"}}).code(),
            StatusCode::kAlreadyExists);
  Status unknown = statusFromKubeStatus(Json{{"reason", "SomethingNew"}, {"message", "m"}});
  EXPECT_EQ(unknown.code(), StatusCode::kInternal);
  EXPECT_EQ(unknown.message(), "m");
  EXPECT_EQ(statusFromKubeStatus(Json::array()).code(), StatusCode::kInternal);
}

TEST(ApiError, KubeStatusWithoutMessageUsesReason) {
  Status s = statusFromKubeStatus(Json{{"reason", "Timeout"}, {"code", 504}});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "Timeout");
}

TEST(ApiError, RetryableCodes) {
  EXPECT_TRUE(isRetryable(unavailable("x")));
  EXPECT_TRUE(isRetryable(deadlineExceeded("x")));
  EXPECT_FALSE(isRetryable(conflict("x")));
  EXPECT_FALSE(isRetryable(notFound("x")));
  EXPECT_FALSE(isRetryable(okStatus()));
  EXPECT_FALSE(isRetryable(statusFromHttpResponse(501, "")));
}

}  // namespace
}  // namespace rsc::client
