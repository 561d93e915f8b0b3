#include "controller/health_endpoint.h"

#include <gtest/gtest.h>

#include <string>

namespace rsc::controller {
namespace {

http::HttpResponse get(const std::string& target, bool synced, int* asked = nullptr) {
  http::HttpRequest request;
  request.method = "GET";
  request.target = target;
  return healthResponse(request, [&] {
    if (asked != nullptr) ++*asked;
    return synced;
  });
}

TEST(HealthResponse, LivenessDoesNotWaitForTheCaches) {
  int asked = 0;
  for (const char* target : {"/healthz", "/livez", "/healthz?verbose=1"}) {
    http::HttpResponse r = get(target, /*synced=*/false, &asked);
    EXPECT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.body, "ok\n") << target;
    EXPECT_EQ(r.content_type, "text/plain; charset=utf-8") << target;
  }
  EXPECT_EQ(asked, 0);
}

TEST(HealthResponse, ReadinessFollowsTheCaches) {
  EXPECT_EQ(get("/readyz", /*synced=*/true).status, 200);
  http::HttpResponse not_ready = get("/readyz", /*synced=*/false);
  EXPECT_EQ(not_ready.status, 503);
  EXPECT_EQ(not_ready.body, "informer cache not synced\n");
}

TEST(HealthResponse, OtherPathsAreNotFound) {
  int asked = 0;
  EXPECT_EQ(get("/metrics", true, &asked).status, 404);
  EXPECT_EQ(get("/", true, &asked).status, 404);
  EXPECT_EQ(asked, 0);
}

}  // namespace
}  // namespace rsc::controller
