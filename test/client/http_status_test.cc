#include "client/http_status.h"

#include <gtest/gtest.h>

namespace rsc::client {
namespace {

TEST(HttpStatus, PhrasesForStatusLines) {
  EXPECT_EQ(httpReasonPhrase(200), "OK");
  EXPECT_EQ(httpReasonPhrase(404), "Not Found");
  EXPECT_EQ(httpReasonPhrase(409), "Conflict");
  EXPECT_EQ(httpReasonPhrase(422), "Unprocessable Entity");
  EXPECT_EQ(httpReasonPhrase(429), "Too Many Requests");
  EXPECT_EQ(httpReasonPhrase(503), "Service Unavailable");
  EXPECT_EQ(httpReasonPhrase(299), "Unknown");
}

TEST(HttpStatus, KubeReasonsBothWays) {
  EXPECT_EQ(kubeStatusReason(400), "BadRequest");
  EXPECT_EQ(kubeStatusReason(409), "Conflict");
  EXPECT_EQ(kubeStatusReason(410), "Gone");
  EXPECT_EQ(kubeStatusReason(422), "Invalid");
  EXPECT_EQ(kubeStatusReason(500), "InternalError");
  // A code without a reason of its own, or no known code at all.
  EXPECT_EQ(kubeStatusReason(200), "InternalError");
  EXPECT_EQ(kubeStatusReason(599), "InternalError");

  EXPECT_EQ(httpCodeForKubeReason("NotFound"), 404);
  EXPECT_EQ(httpCodeForKubeReason("AlreadyExists"), 409);
  EXPECT_EQ(httpCodeForKubeReason("Conflict"), 409);
  EXPECT_EQ(httpCodeForKubeReason("Expired"), 410);
  EXPECT_EQ(httpCodeForKubeReason("ServerTimeout"), 500);
  EXPECT_EQ(httpCodeForKubeReason("Timeout"), 504);
  EXPECT_EQ(httpCodeForKubeReason(""), 0);
  EXPECT_EQ(httpCodeForKubeReason("NoSuchReason"), 0);
}

}  // namespace
}  // namespace rsc::client
