// Secure by default, on the real API server: /metrics over HTTPS admits only
// callers whose real ServiceAccount token passes TokenReview and who may get
// /metrics (SubjectAccessReview), while the health probes stay plain HTTP.
#include <gtest/gtest.h>

#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

class SecurityTest : public ::testing::Test {
 protected:
  ServiceEnv env_;
};

TEST_F(SecurityTest, SecureMetricsNeedATokenAndTheReaderGrant) {
  env_.ensureNamespace("monitoring");
  const std::string scraper = env_.serviceAccountToken("monitoring", "prometheus");
  const std::string stranger = env_.serviceAccountToken("monitoring", "stranger");
  env_.grantMetricsReader("monitoring", "prometheus");
  ControllerProcess c = env_.startController("metrics-secure", {"--auth=none", "--metrics-secure"});

  const std::string https = "https://127.0.0.1:" + std::to_string(c.metrics_port) + "/metrics";
  const HttpTls any_cert{.insecure = true};
  // Plain HTTP gets no scrape.
  EXPECT_NE(
      env_.http("GET", "http://127.0.0.1:" + std::to_string(c.metrics_port) + "/metrics").code,
      200);
  EXPECT_EQ(env_.http("GET", https, "", "", any_cert).code, 401);
  EXPECT_EQ(env_.http("GET", https, "", "not-a-token", any_cert).code, 401);
  EXPECT_EQ(env_.http("GET", https, "", stranger, any_cert).code, 403);
  const HttpAnswer scrape = env_.http("GET", https, "", scraper, any_cert);
  ASSERT_EQ(scrape.code, 200) << scrape.body;
  EXPECT_NE(scrape.body.find("resourceslice_controller_build_info"), std::string::npos);
  // The grant covers /metrics only.
  EXPECT_EQ(env_.http("GET", "https://127.0.0.1:" + std::to_string(c.metrics_port) + "/debug", "",
                      scraper, any_cert)
                .code,
            403);
  // The self-signed certificate is not trusted without being told to.
  EXPECT_EQ(env_.http("GET", https, "", scraper).code, 0);
  // The probes are plain HTTP, without credentials.
  EXPECT_EQ(env_.http("GET", "http://127.0.0.1:" + std::to_string(c.health_port) + "/readyz").code,
            200);
}

TEST_F(SecurityTest, MetricsAreOpenWithoutMetricsSecure) {
  ControllerProcess c = env_.startController("metrics-open", {"--auth=none"});
  EXPECT_EQ(
      env_.http("GET", "http://127.0.0.1:" + std::to_string(c.metrics_port) + "/metrics").code,
      200);
}

}  // namespace
}  // namespace rsc::testing
