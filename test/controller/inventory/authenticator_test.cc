#include "controller/inventory/authenticator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller::inventory {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kAudience[] = "resourceslice-controller";
constexpr char kClient[] = "10.0.0.7";

client::UserInfo podUser(const std::string& node) {
  client::UserInfo user;
  user.username = "system:serviceaccount:dra:plugin";
  user.uid = "uid-1";
  user.groups = {"system:serviceaccounts", "system:serviceaccounts:dra", "system:authenticated"};
  user.extra["authentication.kubernetes.io/pod-name"] = {"plugin-x7k2p"};
  if (!node.empty()) user.extra[kNodeNameExtra] = {node};
  return user;
}

class TokenReviewAuthenticatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Tokens "node-a", "central" are valid for the audience; "other-audience"
    // is valid for another one; the rest are not valid.
    api_.setTokenReviewer([this](const client::TokenReview& review) {
      reviews_.push_back(review);
      client::TokenReview answer = review;
      if (review.token == "node-a" || review.token == "central") {
        answer.authenticated = true;
        answer.user = podUser(review.token == "node-a" ? "node-a" : "");
        answer.status_audiences = review.audiences;
      } else if (review.token == "other-audience") {
        answer.authenticated = true;
        answer.user = podUser("");
        answer.status_audiences = {"https://kubernetes.default.svc"};
      } else {
        answer.error = "token lookup failed";
      }
      return answer;
    });
    api_.setAccessReviewer([this](const client::SubjectAccessReview& review) {
      access_.push_back(review);
      client::SubjectAccessReview answer = review;
      answer.allowed = review.name == "gpu.example.com";
      if (!answer.allowed) answer.reason = "no RBAC rule";
      return answer;
    });
  }

  size_t tokenReviews() const { return api_.countActions("create", "tokenreviews"); }
  size_t accessReviews() const { return api_.countActions("create", "subjectaccessreviews"); }

  testing::FakeClock clock_;
  testing::FakeKubeApi api_{clock_};
  std::vector<client::TokenReview> reviews_;
  std::vector<client::SubjectAccessReview> access_;
  TokenReviewAuthenticator auth_{api_, clock_, {.audience = kAudience}};
};

TEST_F(TokenReviewAuthenticatorTest, MissingOrMalformedHeaderIsRejectedWithoutAReview) {
  EXPECT_EQ(auth_.authenticate(std::nullopt, kClient).status().code(),
            StatusCode::kUnauthenticated);
  for (const char* header :
       {"", "Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearertoken", "Bearer a b"}) {
    EXPECT_EQ(auth_.authenticate(header, kClient).status().code(), StatusCode::kUnauthenticated)
        << header;
  }
  EXPECT_EQ(tokenReviews(), 0U);
}

TEST_F(TokenReviewAuthenticatorTest, PodTokenCarriesItsNode) {
  StatusOr<pool::Caller> caller = auth_.authenticate("Bearer node-a", kClient);
  ASSERT_TRUE(caller.ok()) << caller.status().toString();
  EXPECT_EQ(caller->node_name, "node-a");
  EXPECT_EQ(caller->user.username, "system:serviceaccount:dra:plugin");
  EXPECT_FALSE(caller->unrestricted);
  ASSERT_EQ(reviews_.size(), 1U);
  EXPECT_EQ(reviews_[0].token, "node-a");
  EXPECT_THAT(reviews_[0].audiences, ElementsAre(kAudience));

  // The scheme is case-insensitive.
  StatusOr<pool::Caller> central = auth_.authenticate("bearer central", kClient);
  ASSERT_TRUE(central.ok());
  EXPECT_FALSE(central->node_name.has_value());
}

TEST_F(TokenReviewAuthenticatorTest, RejectsInvalidTokensAndOtherAudiences) {
  EXPECT_EQ(auth_.authenticate("Bearer forged", kClient).status().code(),
            StatusCode::kUnauthenticated);
  StatusOr<pool::Caller> other = auth_.authenticate("Bearer other-audience", kClient);
  EXPECT_EQ(other.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(other.status().message(), HasSubstr(kAudience));
}

TEST_F(TokenReviewAuthenticatorTest, CachesTokenReviewsForTheTtl) {
  ASSERT_TRUE(auth_.authenticate("Bearer node-a", kClient).ok());
  ASSERT_TRUE(auth_.authenticate("Bearer node-a", kClient).ok());
  EXPECT_EQ(auth_.authenticate("Bearer forged", kClient).status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(auth_.authenticate("Bearer forged", kClient).status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(tokenReviews(), 2U);  // one per token, rejections cached too

  clock_.advance(std::chrono::seconds(9));
  ASSERT_TRUE(auth_.authenticate("Bearer node-a", kClient).ok());
  EXPECT_EQ(tokenReviews(), 2U);
  clock_.advance(std::chrono::seconds(1));
  ASSERT_TRUE(auth_.authenticate("Bearer node-a", kClient).ok());
  EXPECT_EQ(tokenReviews(), 3U);
}

// What the I/O thread may ask: the answer when it is known without a call to
// the API server, and nothing (no review, no budget spent) when it is not.
TEST_F(TokenReviewAuthenticatorTest, CachedAnswersNeverAskTheApiServer) {
  EXPECT_EQ(auth_.authenticateCached(std::nullopt)->status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(auth_.authenticateCached("Basic dXNlcjpwYXNz")->status().code(),
            StatusCode::kUnauthenticated);
  EXPECT_EQ(auth_.authenticateCached("Bearer node-a"), std::nullopt);
  EXPECT_EQ(auth_.authenticateCached("Bearer forged"), std::nullopt);
  EXPECT_EQ(tokenReviews(), 0U);

  const pool::Caller caller = *auth_.authenticate("Bearer node-a", kClient);
  EXPECT_EQ(auth_.authenticate("Bearer forged", kClient).status().code(),
            StatusCode::kUnauthenticated);
  ASSERT_TRUE(auth_.authenticateCached("Bearer node-a").has_value());
  EXPECT_EQ(auth_.authenticateCached("Bearer node-a")->value().node_name, "node-a");
  EXPECT_EQ(auth_.authenticateCached("Bearer forged")->status().code(),
            StatusCode::kUnauthenticated);

  EXPECT_EQ(auth_.authorizeCached(caller, kVerbPublish, "gpu.example.com"), std::nullopt);
  EXPECT_EQ(accessReviews(), 0U);
  EXPECT_TRUE(auth_.authorize(caller, kVerbPublish, "gpu.example.com").ok());
  EXPECT_FALSE(auth_.authorize(caller, kVerbPublish, "nic.example.com").ok());
  EXPECT_EQ(auth_.authorizeCached(caller, kVerbPublish, "gpu.example.com"), okStatus());
  EXPECT_EQ(auth_.authorizeCached(caller, kVerbPublish, "nic.example.com")->code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(auth_.authorizeCached(caller, kVerbGet, "gpu.example.com"), std::nullopt);
  EXPECT_EQ(tokenReviews(), 2U);
  EXPECT_EQ(accessReviews(), 2U);

  // Cached answers expire with the cache.
  clock_.advance(std::chrono::seconds(10));
  EXPECT_EQ(auth_.authenticateCached("Bearer node-a"), std::nullopt);
  EXPECT_EQ(auth_.authorizeCached(caller, kVerbPublish, "gpu.example.com"), std::nullopt);
}

TEST_F(TokenReviewAuthenticatorTest, FailedReviewsAreUnavailableAndNotCached) {
  api_.prependReactor("create", "tokenreviews",
                      [](testing::FakeKubeApi::Request&) { return unavailable("apiserver down"); });
  EXPECT_EQ(auth_.authenticate("Bearer node-a", kClient).status().code(), StatusCode::kUnavailable);
  api_.clearReactors();
  EXPECT_TRUE(auth_.authenticate("Bearer node-a", kClient).ok());
  EXPECT_EQ(tokenReviews(), 2U);
}

TEST_F(TokenReviewAuthenticatorTest, AuthorizesWithSubjectAccessReview) {
  const pool::Caller caller = *auth_.authenticate("Bearer node-a", kClient);
  EXPECT_TRUE(auth_.authorize(caller, kVerbPublish, "gpu.example.com").ok());
  Status denied = auth_.authorize(caller, kVerbPublish, "nic.example.com");
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(), HasSubstr("nic.example.com"));

  ASSERT_EQ(access_.size(), 2U);
  const client::SubjectAccessReview& sent = access_[0];
  EXPECT_EQ(sent.verb, "publish");
  EXPECT_EQ(sent.group, "resourceslice.dra.k8s.io");
  EXPECT_EQ(sent.resource, "drivers");
  EXPECT_EQ(sent.name, "gpu.example.com");
  EXPECT_EQ(sent.user, podUser("node-a"));  // user, uid, groups and extra copied
}

TEST_F(TokenReviewAuthenticatorTest, CachesDecisionsPerUserVerbAndDriver) {
  const pool::Caller caller = *auth_.authenticate("Bearer node-a", kClient);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(auth_.authorize(caller, kVerbPublish, "gpu.example.com").ok());
    EXPECT_FALSE(auth_.authorize(caller, kVerbPublish, "nic.example.com").ok());
  }
  EXPECT_EQ(accessReviews(), 2U);
  EXPECT_TRUE(auth_.authorize(caller, kVerbGet, "gpu.example.com").ok());
  pool::Caller other = caller;
  other.user.groups.push_back("admins");
  EXPECT_TRUE(auth_.authorize(other, kVerbPublish, "gpu.example.com").ok());
  EXPECT_EQ(accessReviews(), 4U);

  clock_.advance(std::chrono::seconds(10));
  EXPECT_TRUE(auth_.authorize(caller, kVerbPublish, "gpu.example.com").ok());
  EXPECT_EQ(accessReviews(), 5U);
}

TEST_F(TokenReviewAuthenticatorTest, AuthorizesNonResourcePathsAndCachesThem) {
  api_.setAccessReviewer([this](const client::SubjectAccessReview& review) {
    access_.push_back(review);
    client::SubjectAccessReview answer = review;
    answer.allowed = review.non_resource.path == "/metrics" && review.non_resource.verb == "get";
    return answer;
  });
  const pool::Caller caller = *auth_.authenticate("Bearer central", kClient);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(auth_.authorizePath(caller, "get", "/metrics").ok());
  }
  Status denied = auth_.authorizePath(caller, "get", "/debug");
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(), HasSubstr("nonResourceURLs /debug"));
  ASSERT_EQ(access_.size(), 2U);
  EXPECT_EQ(access_[0].non_resource.path, "/metrics");
  EXPECT_EQ(access_[0].non_resource.verb, "get");
  EXPECT_EQ(access_[0].resource, "");
  EXPECT_EQ(access_[0].verb, "");
  EXPECT_EQ(access_[0].user, podUser(""));
  // A path decision is not a driver decision of the same name.
  EXPECT_FALSE(auth_.authorize(caller, "get", "/metrics").ok());
  EXPECT_EQ(access_.size(), 3U);
}

TEST_F(TokenReviewAuthenticatorTest, FailedAccessReviewsAreUnavailable) {
  const pool::Caller caller = *auth_.authenticate("Bearer node-a", kClient);
  api_.prependReactor("create", "subjectaccessreviews",
                      [](testing::FakeKubeApi::Request&) { return unavailable("down"); });
  EXPECT_EQ(auth_.authorize(caller, kVerbPublish, "gpu.example.com").code(),
            StatusCode::kUnavailable);
  api_.clearReactors();
  EXPECT_TRUE(auth_.authorize(caller, kVerbPublish, "gpu.example.com").ok());
}

TEST(TokenReviewAuthenticatorCache, IsBounded) {
  testing::FakeClock clock;
  testing::FakeKubeApi api(clock);
  api.setTokenReviewer([](const client::TokenReview& review) {
    client::TokenReview answer = review;
    answer.authenticated = true;
    answer.user.username = "user-" + review.token;
    return answer;
  });
  TokenReviewAuthenticator auth(api, clock,
                                {.audience = "", .max_cache_entries = 3, .client_review_qps = 0});
  for (int i = 0; i < 10; ++i)
    ASSERT_TRUE(auth.authenticate("Bearer t" + std::to_string(i), kClient).ok());
  EXPECT_LE(auth.cacheSizeForTest(), 3U);
  // The newest entries are kept, the oldest went.
  const size_t before = api.countActions("create", "tokenreviews");
  ASSERT_TRUE(auth.authenticate("Bearer t9", kClient).ok());
  EXPECT_EQ(api.countActions("create", "tokenreviews"), before);
  ASSERT_TRUE(auth.authenticate("Bearer t0", kClient).ok());
  EXPECT_EQ(api.countActions("create", "tokenreviews"), before + 1);
}

TEST(TokenReviewAuthenticatorAudience, EmptyAudienceUsesTheServersOwn) {
  testing::FakeClock clock;
  testing::FakeKubeApi api(clock);
  std::vector<std::string> sent;
  api.setTokenReviewer([&](const client::TokenReview& review) {
    sent = review.audiences;
    client::TokenReview answer = review;
    answer.authenticated = true;
    answer.status_audiences = {"https://kubernetes.default.svc"};
    return answer;
  });
  TokenReviewAuthenticator auth(api, clock, {});
  EXPECT_TRUE(auth.authenticate("Bearer any", kClient).ok());
  EXPECT_TRUE(sent.empty());
}

// A flood of invented tokens: each is a cache miss. One client is cut off at
// its own burst with 429 without a review; many clients together at the global
// budget with 503. A token already cached passes through both.
class TokenReviewBudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_.setTokenReviewer([](const client::TokenReview& review) {
      client::TokenReview answer = review;
      answer.authenticated = review.token == "good";
      answer.user.username = "driver";
      return answer;
    });
  }
  size_t reviews() const { return api_.countActions("create", "tokenreviews"); }

  testing::FakeClock clock_;
  testing::FakeKubeApi api_{clock_};
  std::vector<AuthRefusal> refusals_;
  TokenReviewAuthenticator auth_{api_,
                                 clock_,
                                 {.audience = "",
                                  .review_qps = 10,
                                  .review_burst = 20,
                                  .client_review_qps = 1,
                                  .client_review_burst = 5,
                                  .on_refused = [this](AuthRefusal r) { refusals_.push_back(r); }}};
};

TEST_F(TokenReviewBudgetTest, OneClientIsLimitedWith429) {
  ASSERT_TRUE(auth_.authenticate("Bearer good", "10.0.0.9").ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(auth_.authenticate("Bearer bad" + std::to_string(i), "10.0.0.9").status().code(),
              StatusCode::kUnauthenticated);
  }
  EXPECT_EQ(reviews(), 5U);
  StatusOr<pool::Caller> refused = auth_.authenticate("Bearer bad-more", "10.0.0.9");
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(reviews(), 5U);
  EXPECT_THAT(refusals_, ElementsAre(AuthRefusal::kClientRate));
  // The cached good token still passes, and another client is not affected.
  EXPECT_TRUE(auth_.authenticate("Bearer good", "10.0.0.9").ok());
  EXPECT_EQ(auth_.authenticate("Bearer other", "10.0.0.10").status().code(),
            StatusCode::kUnauthenticated);
  // The client's budget refills with time.
  clock_.advance(std::chrono::seconds(1));
  EXPECT_EQ(auth_.authenticate("Bearer later", "10.0.0.9").status().code(),
            StatusCode::kUnauthenticated);
}

TEST_F(TokenReviewBudgetTest, ManyClientsShareTheGlobalBudgetWithoutWaiting) {
  ASSERT_TRUE(auth_.authenticate("Bearer good", "10.0.1.1").ok());
  for (int i = 0; i < 19; ++i) {
    const std::string client = "10.0.2." + std::to_string(i);
    EXPECT_EQ(auth_.authenticate("Bearer bad", client).status().code(),
              StatusCode::kUnauthenticated);
  }
  // The bad token is cached as rejected: no review for it after the first.
  EXPECT_EQ(reviews(), 2U);
  for (int i = 0; i < 30; ++i) {
    const std::string client = "10.0.3." + std::to_string(i);
    (void)auth_.authenticate("Bearer invented-" + std::to_string(i), client);
  }
  EXPECT_EQ(reviews(), 20U);
  StatusOr<pool::Caller> refused = auth_.authenticate("Bearer one-more", "10.0.4.1");
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(reviews(), 20U);
  // Refusing never waited on the clock, and the cached token still passes.
  EXPECT_TRUE(auth_.authenticate("Bearer good", "10.0.1.1").ok());
}

TEST(NoAuthAuthenticator, AllowsEverythingUnrestricted) {
  NoAuthAuthenticator auth;
  StatusOr<pool::Caller> caller = auth.authenticate(std::nullopt, kClient);
  ASSERT_TRUE(caller.ok());
  EXPECT_TRUE(caller->unrestricted);
  EXPECT_TRUE(auth.authorize(*caller, kVerbPublish, "any.example.com").ok());
  // It never blocks, so its cached answers are its answers.
  ASSERT_TRUE(auth.authenticateCached(std::nullopt).has_value());
  EXPECT_TRUE(auth.authenticateCached(std::nullopt)->value().unrestricted);
  EXPECT_EQ(auth.authorizeCached(*caller, kVerbPublish, "any.example.com"), okStatus());
}

}  // namespace
}  // namespace rsc::controller::inventory
