// Credentials go only where they are trusted, against the real binaries and
// API server. Whoever may patch Leases in the controller's namespace can
// rewrite the leader Lease's inventory-url annotation; a listener of the test
// stands in for their server and records every request that reaches it:
// resourceslicectl refuses a plain-http or unverifiable URL of the Lease
// before any request, and a follower replica never forwards a driver's push
// (body and token) to it but answers 503 naming the leader. And callers who
// are not authenticated cannot take the driver label slots of the push metric.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>

#include "controller/http/http_server.h"
#include "test/controller/http/test_http_client.h"
#include "test/integration/leader_flags.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using ::testing::HasSubstr;

constexpr char kUrlAnnotation[] = "resourceslice.dra.k8s.io/inventory-url";
constexpr char kServerNameAnnotation[] = "resourceslice.dra.k8s.io/inventory-server-name";

// A server of whoever rewrote the Lease: records each request that reaches
// it (method, target, Authorization) and answers 200, as a fake leader would.
class Listener {
 public:
  // Plain http, or https with a certificate of `cert` (a CA of its own).
  explicit Listener(const controller::http::TestCertificate* cert = nullptr) {
    controller::http::HttpServerOptions o;
    o.bind_address = "127.0.0.1:0";
    if (cert != nullptr) {
      cert->writeTo(dir_.path() / "tls.crt", dir_.path() / "tls.key");
      o.tls_cert_file = (dir_.path() / "tls.crt").string();
      o.tls_key_file = (dir_.path() / "tls.key").string();
    }
    auto server = controller::http::HttpServer::start(
        o,
        [this](controller::http::HttpRequest req, controller::http::HttpServer::Responder respond) {
          {
            std::lock_guard lock(mu_);
            const auto auth = req.header("authorization");
            seen_.push_back(req.method + " " + req.target + " " + std::string(auth.value_or("")));
          }
          controller::http::HttpResponse r;
          r.content_type = "application/json";
          r.body = R"({"leader": "fake", "items": []})";
          respond(std::move(r));
        });
    EXPECT_TRUE(server.ok()) << server.status().toString();
    url_ = std::string(cert != nullptr ? "https" : "http") +
           "://127.0.0.1:" + std::to_string((*server)->port());
    server_ = std::move(*server);
  }
  const std::string& url() const { return url_; }
  std::vector<std::string> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  controller::http::TempDir dir_;
  std::unique_ptr<controller::http::HttpServer> server_;
  std::string url_;
  mutable std::mutex mu_;
  std::vector<std::string> seen_;
};

// Now as a Lease's MicroTime.
std::string microTimeNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[40];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S.000000Z", &tm);
  return text;
}

class CredentialsTest : public ::testing::Test {
 protected:
  // A Lease in default held by `holder` for an hour, announcing `url` (and
  // the certificate name `server_name`, unless empty).
  void lease(const std::string& name, const std::string& holder, const std::string& url,
             const std::string& server_name = "") {
    Json annotations = {{kUrlAnnotation, url}};
    if (!server_name.empty()) annotations[kServerNameAnnotation] = server_name;
    env_.kube("DELETE", "/apis/coordination.k8s.io/v1/namespaces/default/leases/" + name);
    const HttpAnswer a =
        env_.kube("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                  Json{{"apiVersion", "coordination.k8s.io/v1"},
                       {"kind", "Lease"},
                       {"metadata", {{"name", name}, {"annotations", annotations}}},
                       {"spec",
                        {{"holderIdentity", holder},
                         {"leaseDurationSeconds", 3600},
                         {"acquireTime", microTimeNow()},
                         {"renewTime", microTimeNow()}}}});
    ASSERT_EQ(a.code, 201) << a.body;
  }

  // A kubeconfig whose user is the cluster's admin by bearer token (in
  // system:masters), the credential a rewritten Lease is after.
  std::string tokenKubeconfig() {
    const auto path = env_.logDir() / "admin-token.kubeconfig";
    std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                        << "    server: " << kCluster->server() << "\n"
                        << "    certificate-authority: " << kCluster->caFile().string() << "\n"
                        << "users:\n- name: admin\n  user:\n    token: " << kCluster->token("admin")
                        << "\ncontexts:\n- name: c\n  context:\n"
                        << "    cluster: c\n    user: admin\n    namespace: default\n"
                        << "current-context: c\n";
    return path.string();
  }

  // resourceslicectl through a kubeconfig with the admin's token and Lease
  // default/`lease_name`, with `args`.
  std::pair<int, std::string> ctl(const std::string& lease_name, std::vector<std::string> args) {
    std::vector<std::string> argv = {RSC_CTL_BINARY,      "--kubeconfig", tokenKubeconfig(),
                                     "--lease-namespace", "default",      "--lease-name",
                                     lease_name};
    argv.insert(argv.end(), args.begin(), args.end());
    Process p(argv, env_.logDir() / ("ctl-" + std::to_string(++runs_) + ".log"));
    const std::optional<int> code = p.wait(std::chrono::seconds(60));
    EXPECT_TRUE(code.has_value()) << p.log();
    return {code.value_or(-1), p.log()};
  }

  ServiceEnv env_;
  int runs_ = 0;
};

// (a) The Lease announces a plain-http URL: resourceslicectl refuses it
// before any request, with one line naming the Lease, the URL and --server.
TEST_F(CredentialsTest, CtlSendsNothingToAPlainHttpUrlOfTheLease) {
  Listener listener;
  lease("creds-http", "someone", listener.url());
  const auto [code, output] = ctl("creds-http", {"get", "pools"});
  EXPECT_NE(code, 0) << output;
  EXPECT_THAT(output,
              HasSubstr("error: the leader Lease default/creds-http announces " + listener.url()));
  EXPECT_THAT(output, HasSubstr("--server"));
  EXPECT_EQ(std::count(output.begin(), output.end(), '\n'), 1) << output;
  EXPECT_THAT(listener.seen(), ::testing::IsEmpty()) << "credentials were sent to the Lease's URL";

  // Only the explicit flag of local tests sends them there.
  const auto [allowed_code, allowed_output] =
      ctl("creds-http", {"--allow-insecure-lease-url", "get", "pools"});
  const std::vector<std::string> seen = listener.seen();
  ASSERT_FALSE(seen.empty()) << allowed_output;
  EXPECT_THAT(seen[0], HasSubstr("GET /v1/drivers Bearer " + kCluster->token("admin")))
      << "the listener records credentials";
}

// (b) The Lease announces https with a certificate of another CA than the
// one the controller publishes: refused, with --insecure-skip-tls-verify too
// (it is for --server only), and nothing reaches the listener.
TEST_F(CredentialsTest, CtlSendsNothingToAnUnverifiedHttpsUrlOfTheLease) {
  const auto other_ca = controller::http::TestCertificate::make("someone-else");
  Listener listener(&other_ca);
  lease("creds-https", "someone", listener.url());
  const auto published = controller::http::TestCertificate::make("controller");
  env_.kube("DELETE", "/api/v1/namespaces/default/configmaps/creds-ca");
  env_.ensure("/api/v1/namespaces/default/configmaps",
              Json{{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", {{"name", "creds-ca"}}},
                   {"data", {{"ca.crt", published.cert_pem}}}});
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {"--ca-configmap", "creds-ca"},
           {"--ca-configmap", "creds-ca", "--insecure-skip-tls-verify"},
           {"--insecure-skip-tls-verify"},
           {}}) {
    std::vector<std::string> args = extra;
    args.insert(args.end(), {"get", "pools"});
    const auto [code, output] = ctl("creds-https", args);
    SCOPED_TRACE(::testing::PrintToString(extra));
    EXPECT_NE(code, 0) << output;
    EXPECT_THAT(output, HasSubstr("error: the leader Lease default/creds-https announces " +
                                  listener.url()));
    EXPECT_THAT(output, HasSubstr("--server"));
    EXPECT_THAT(listener.seen(), ::testing::IsEmpty());
  }
}

// (b2) The Lease names the certificate name to verify its URL against (the
// leader's pods have no certificate for their own address). A name outside
// the Lease's namespace is refused, even when the listener's certificate has
// it and chains to the published CA; a name of the namespace that the
// certificate does not carry fails verification. Nothing reaches the listener.
TEST_F(CredentialsTest, CtlVerifiesTheLeaseUrlOnlyAgainstAServiceNameOfItsNamespace) {
  const auto published = controller::http::TestCertificate::make("controller");
  Listener listener(&published);
  env_.kube("DELETE", "/api/v1/namespaces/default/configmaps/creds-name-ca");
  env_.ensure("/api/v1/namespaces/default/configmaps",
              Json{{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", {{"name", "creds-name-ca"}}},
                   {"data", {{"ca.crt", published.cert_pem}}}});
  struct Case {
    std::string server_name;
    std::string error;
  };
  for (const Case& k :
       {Case{"localhost", "its server name \"localhost\" (annotation " +
                              std::string(kServerNameAnnotation) +
                              ") is not a Service name in namespace default"},
        Case{"rsc.default.svc",
             "(certificate name rsc.default.svc): its certificate cannot be verified"}}) {
    SCOPED_TRACE(k.server_name);
    lease("creds-name", "someone", listener.url(), k.server_name);
    const auto [code, output] =
        ctl("creds-name", {"--ca-configmap", "creds-name-ca", "get", "pools"});
    EXPECT_NE(code, 0) << output;
    EXPECT_THAT(output, HasSubstr(k.error)) << output;
    EXPECT_THAT(listener.seen(), ::testing::IsEmpty());
  }
  // Without the annotation the URL's own host is checked: the certificate
  // has 127.0.0.1, so the request goes there, credentials and all.
  lease("creds-name", "someone", listener.url());
  const auto [code, output] =
      ctl("creds-name", {"--ca-configmap", "creds-name-ca", "get", "pools"});
  EXPECT_EQ(code, 0) << output;
  EXPECT_THAT(listener.seen(), ::testing::Not(::testing::IsEmpty())) << output;
}

// (c) A follower replica (inventory TLS on, as the chart deploys it) whose
// Lease was rewritten to the listener: ten pushes, each answered 503 naming
// the leader; not one reaches the listener, and each is counted. The same for
// an https listener whose certificate is of another CA.
TEST_F(CredentialsTest, FollowerForwardsNothingToAUrlOfTheLeaseThatIsNotVerifiedHttps) {
  env_.ensureNode("node-a");
  controller::http::TempDir dir;
  const auto cert = controller::http::TestCertificate::make("replicas");
  cert.writeTo(dir.path() / "tls.crt", dir.path() / "tls.key");
  const auto other_ca = controller::http::TestCertificate::make("someone-else");
  struct Case {
    std::string name;
    const controller::http::TestCertificate* listener_cert;
    int pushes;
    std::string reason;
  };
  for (const Case& k : {Case{"creds-fwd", nullptr, 10, "forward_insecure"},
                        Case{"creds-fwd-tls", &other_ca, 3, "forward_failed"}}) {
    SCOPED_TRACE(k.name);
    Listener listener(k.listener_cert);
    lease(k.name, "creds-leader", listener.url());
    std::vector<std::string> args = leaderFlags(k.name + "-follower", k.name);
    std::erase(args, "--forward-insecure");
    args.insert(args.end(), {"--inventory-tls-cert-file=" + (dir.path() / "tls.crt").string(),
                             "--inventory-tls-key-file=" + (dir.path() / "tls.key").string(),
                             "--inventory-server-name=localhost"});
    ControllerProcess follower = env_.startController(k.name + "-follower", args);
    const std::string push = "https://127.0.0.1:" + std::to_string(follower.inventory_port) +
                             "/v1/drivers/creds.example.com/pools/node-a";
    for (int i = 0; i < k.pushes; ++i) {
      const HttpAnswer a = env_.http("PUT", push, gpuPool("node-a", 1).dump(), "driver-secret",
                                     HttpTls{.ca_pem = cert.cert_pem});
      EXPECT_EQ(a.code, 503) << a.body;
      EXPECT_THAT(a.body, HasSubstr("leader creds-leader (" + listener.url() + ")")) << a.body;
    }
    EXPECT_THAT(listener.seen(), ::testing::IsEmpty())
        << "pushes and tokens went to the Lease's URL";
    EXPECT_EQ(env_.metric(follower, "resourceslice_controller_inventory_refusals_total{reason=\"" +
                                        k.reason + "\"}"),
              k.pushes);
    EXPECT_THAT(follower.process->log(), HasSubstr("Not forwarding a push to the leader"));
    expectCleanStop(follower);
  }
}

// (d) 100 pushes without credentials, each for a driver name of its own, then
// the real driver's: its series counts its push, no made-up name is a label.
TEST_F(CredentialsTest, UnauthenticatedPushesTakeNoDriverLabel) {
  const std::string audience = "creds-test";
  env_.ensureNamespace("creds-drivers");
  env_.ensureNode("node-a");
  const std::string token =
      env_.podToken("creds-drivers", "creds-driver", "creds-driver-a", "node-a", audience);
  env_.grantPublish("creds-drivers", "creds-driver", {"creds.example.com"});
  ControllerProcess c =
      env_.startController("creds-metrics", {"--auth=tokenreview", "--token-audience=" + audience});
  for (int i = 0; i < 100; ++i) {
    const HttpAnswer a =
        env_.http("PUT", c.poolUrl("made-up-" + std::to_string(i) + ".example.com", "node-a"),
                  gpuPool("node-a", 1).dump());
    // 401, or 429 once this client's rate of unauthenticated calls is spent.
    ASSERT_TRUE(a.code == 401 || a.code == 429) << a.code << " " << a.body;
  }
  const HttpAnswer real = env_.http("PUT", c.poolUrl("creds.example.com", "node-a", "?wait=30s"),
                                    gpuPool("node-a", 1).dump(), token);
  ASSERT_EQ(real.code, 200) << real.body;

  const std::string scrape =
      ServiceEnv::http("GET", "http://127.0.0.1:" + std::to_string(c.metrics_port) + "/metrics")
          .body;
  EXPECT_EQ(
      env_.metric(
          c, R"(resourceslice_controller_pushes_total{code="200",driver="creds.example.com"})"),
      1.0)
      << scrape;
  EXPECT_EQ(scrape.find("made-up-"), std::string::npos) << scrape;
  EXPECT_THAT(scrape,
              HasSubstr(R"(resourceslice_controller_pushes_total{code="401",driver="_refused"})"));
  expectCleanStop(c);
}

}  // namespace
}  // namespace rsc::testing
