// Secure by default, on the real API server: /metrics over HTTPS admits only
// callers whose real ServiceAccount token passes TokenReview and who may get
// /metrics (SubjectAccessReview), while the health probes stay plain HTTP; the
// inventory API's self-signed TLS: one CA for every replica, published in a
// ConfigMap that a driver (the example DaemonSet's settings) trusts alone,
// rotated without a failed push.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

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

// The example driver DaemonSet (controller/inventory/examples) on the real API
// server: it applies, and its settings (namespace, ServiceAccount, audience,
// ConfigMap) are what the test's driver uses below.
struct ExampleDriver {
  std::string ns;
  std::string service_account;
  std::string audience;
  std::string config_map;
};

ExampleDriver applyExampleDriver(ServiceEnv& env) {
  const std::filesystem::path manifest =
      ClusterEnvironment::sourceRoot() / "controller/inventory/examples/driver-daemonset.yaml";
  env.ensureNamespace("gpu-system");
  const std::string kubectl = (ClusterEnvironment::sourceRoot() / "test/cluster/kubectl").string() +
                              " " + ClusterEnvironment::get().dir().string();
  EXPECT_EQ(std::system((kubectl + " apply -f " + manifest.string() + " >/dev/null").c_str()), 0);
  const HttpAnswer ds =
      env.kube("GET", "/apis/apps/v1/namespaces/gpu-system/daemonsets/gpu-driver");
  EXPECT_EQ(ds.code, 200) << ds.body;
  const Json pod = ds.json()["spec"]["template"]["spec"];
  ExampleDriver out;
  out.ns = "gpu-system";
  out.service_account = pod["serviceAccountName"].get<std::string>();
  for (const Json& volume : pod["volumes"]) {
    if (volume.contains("configMap")) out.config_map = volume["configMap"]["name"];
    if (volume.contains("projected")) {
      out.audience = volume["projected"]["sources"][0]["serviceAccountToken"]["audience"];
    }
  }
  return out;
}

// Self-signed inventory TLS with a 30 s validity, so that the test sees
// rotations: two replicas (leader election, the follower forwarding over
// TLS) serve one CA from one Secret, and a driver that trusts only the bundle
// published in its namespace, re-read before each push as a mounted
// ConfigMap is, pushes every 200 ms through rotations without one failure.
TEST_F(SecurityTest, SelfSignedTlsRotatesWithoutAFailedPush) {
  const ExampleDriver example = applyExampleDriver(env_);
  ASSERT_EQ(example.config_map, "resourceslice-controller-ca");
  const std::string token = env_.podToken(example.ns, example.service_account, "gpu-driver-a",
                                          "node-a", example.audience);
  env_.grantPublish(example.ns, example.service_account, {"gpu.example.com"});

  auto replica = [&](const std::string& id) {
    std::vector<std::string> args = {
        "--auth=tokenreview",
        "--token-audience=" + example.audience,
        "--leader-elect",
        "--leader-election-namespace=default",
        "--leader-election-id=le-self-signed",
        "--leader-elect-lease-duration=4s",
        "--leader-elect-renew-deadline=3s",
        "--leader-elect-retry-period=1s",
        "--identity=" + id,
        "--inventory-tls-secret=rsc-inventory-tls",
        "--inventory-ca-configmap=" + example.config_map,
        "--inventory-ca-namespaces=" + example.ns,
        "--inventory-tls-names=localhost,127.0.0.1",
        "--inventory-server-name=localhost",
        "--inventory-tls-validity=30s",
        "--inventory-tls-sync-interval=500ms",
        "--metrics-secure",
    };
    return env_.startController(id, args);
  };
  ControllerProcess r1 = replica("self-signed-1");
  ControllerProcess r2 = replica("self-signed-2");

  // What a driver pod has mounted: the ConfigMap of its own namespace.
  auto mountedBundle = [&] {
    const HttpAnswer cm =
        env_.kube("GET", "/api/v1/namespaces/" + example.ns + "/configmaps/" + example.config_map);
    return cm.code == 200 ? cm.json()["data"]["ca.crt"].get<std::string>() : std::string();
  };
  ASSERT_FALSE(mountedBundle().empty());
  const HttpTls trust_bundle{.ca_pem = mountedBundle(), .server_name = "localhost"};
  auto url = [](const ControllerProcess& c, const std::string& path) {
    return "https://127.0.0.1:" + std::to_string(c.inventory_port) + path;
  };
  // Both replicas serve a certificate of the published CA; no other CA
  // vouches for it, and plain HTTP gets nothing.
  for (const ControllerProcess* c : {&r1, &r2}) {
    EXPECT_NE(env_.http("GET", url(*c, "/v1/drivers"), "", token, trust_bundle).code, 0);
    EXPECT_EQ(env_.http("GET", url(*c, "/openapi.json"), "", "", trust_bundle).code, 200);
    EXPECT_EQ(env_.http("GET", url(*c, "/openapi.json"), "", "", {}).code, 0);
    EXPECT_EQ(
        env_.http("GET", "http://127.0.0.1:" + std::to_string(c->inventory_port) + "/openapi.json")
            .code,
        0);
  }
  // /metrics serves the same certificate, verified with the same bundle.
  env_.ensureNamespace("monitoring");
  const std::string scraper = env_.serviceAccountToken("monitoring", "prometheus");
  env_.grantMetricsReader("monitoring", "prometheus");
  EXPECT_EQ(env_.http("GET", "https://127.0.0.1:" + std::to_string(r1.metrics_port) + "/metrics",
                      "", scraper, trust_bundle)
                .code,
            200);

  // Push for 50 s, alternating replicas (one forwards to the other); the
  // certificate switches about every 15 s.
  std::set<std::string> served;
  int pushes = 0;
  int failures = 0;
  std::string first_failure;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(50);
  while (std::chrono::steady_clock::now() < end) {
    const ControllerProcess& c = pushes % 2 == 0 ? r1 : r2;
    const HttpTls tls{.ca_pem = mountedBundle(), .server_name = "localhost"};
    Json pool = {{"nodeName", "node-a"},
                 {"devices", {{{"name", "gpu-" + std::to_string(pushes % 3)}}}}};
    const HttpAnswer a =
        env_.http("PUT", url(c, "/v1/drivers/gpu.example.com/pools/node-a?wait=10s"), pool.dump(),
                  token, tls);
    ++pushes;
    if (a.code != 200) {
      if (failures++ == 0) first_failure = std::to_string(a.code) + " " + a.body;
    }
    const HttpAnswer secret =
        env_.kube("GET", "/api/v1/namespaces/default/secrets/rsc-inventory-tls");
    if (secret.code == 200) served.insert(secret.json()["data"]["tls.crt"].get<std::string>());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(failures, 0) << "of " << pushes << " pushes; first: " << first_failure << "\n"
                         << r1.process->log() << r2.process->log();
  EXPECT_GE(served.size(), 3U) << "the certificate should have rotated at least twice";
  EXPECT_GT(pushes, 50);
  EXPECT_TRUE(env_.poolComplete("gpu.example.com", "node-a", 1));
  // One Secret for both: exactly one replica made it, the other read it.
  auto events = [&](const ControllerProcess& c, const std::string& event) {
    const HttpAnswer a =
        env_.http("GET", "https://127.0.0.1:" + std::to_string(c.metrics_port) + "/metrics", "",
                  scraper, HttpTls{.ca_pem = mountedBundle(), .server_name = "localhost"});
    const std::string series =
        "resourceslice_controller_inventory_certificate_events_total{event=\"" + event + "\"} ";
    const size_t at = a.body.find(series);
    return at == std::string::npos ? -1.0 : std::stod(a.body.substr(at + series.size()));
  };
  EXPECT_EQ(events(r1, "created") + events(r2, "created"), 1.0);
  EXPECT_GE(events(r1, "rotated") + events(r2, "rotated"), 2.0);
  EXPECT_EQ(events(r1, "failed") + events(r2, "failed"), 0.0);
}

}  // namespace
}  // namespace rsc::testing
