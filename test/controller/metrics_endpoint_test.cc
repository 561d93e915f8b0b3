#include "controller/metrics_endpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/registry.h>

#include "test/controller/inventory/fake_authenticator.h"

namespace rsc::controller {
namespace {

using http::HttpRequest;
using inventory::FakeAuthenticator;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class MetricsEndpointTest : public ::testing::Test {
 protected:
  MetricsEndpointTest() {
    prometheus::BuildCounter().Name("scrapes_seen_total").Help("h").Register(*registry_).Add({});
  }

  MetricsEndpointOptions options(bool secure) {
    MetricsEndpointOptions o;
    o.collectables = {registry_};
    if (secure) o.authenticator = &auth_;
    return o;
  }

  static HttpRequest get(const std::string& target, const std::string& token = "") {
    HttpRequest r;
    r.method = "GET";
    r.target = target;
    if (!token.empty()) r.headers["authorization"] = "Bearer " + token;
    return r;
  }

  std::shared_ptr<prometheus::Registry> registry_ = std::make_shared<prometheus::Registry>();
  FakeAuthenticator auth_;
};

TEST_F(MetricsEndpointTest, SecureNeedsATokenAndTheGrantOnTheRequestedPath) {
  MetricsEndpoint endpoint(options(true));
  EXPECT_NE(endpoint.admitHandler(), nullptr);

  auto refusal = endpoint.admit(get("/metrics")).refusal;
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->status, 401);
  EXPECT_EQ(refusal->header("WWW-Authenticate"), "Bearer");
  refusal = endpoint.admit(get("/metrics", "made-up")).refusal;
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->status, 401);

  auth_.deny("get", "/metrics");
  refusal = endpoint.admit(get("/metrics?x=1", "admin")).refusal;
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->status, 403);

  EXPECT_FALSE(endpoint.admit(get("/other", "admin")).refusal.has_value());
  EXPECT_THAT(
      auth_.checks(),
      ElementsAre(FakeAuthenticator::Check{"system:serviceaccount:dra:central", "get", "/metrics"},
                  FakeAuthenticator::Check{"system:serviceaccount:dra:central", "get", "/other"}));

  auth_.setUnavailable(true);
  refusal = endpoint.admit(get("/metrics", "admin")).refusal;
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->status, 503);
}

TEST_F(MetricsEndpointTest, AnswersTheScrapeAndNothingElse) {
  MetricsEndpoint endpoint(options(false));
  EXPECT_EQ(endpoint.admitHandler(), nullptr);
  EXPECT_FALSE(endpoint.admit(get("/metrics")).refusal.has_value());
  http::HttpResponse scrape = endpoint.handle(get("/metrics"));
  EXPECT_EQ(scrape.status, 200);
  EXPECT_THAT(scrape.body, HasSubstr("scrapes_seen_total 0"));
  EXPECT_EQ(endpoint.handle(get("/metricsx")).status, 404);
  HttpRequest post = get("/metrics");
  post.method = "POST";
  EXPECT_EQ(endpoint.handle(post).status, 405);
  EXPECT_TRUE(auth_.checks().empty());
}

}  // namespace
}  // namespace rsc::controller
