#include "controller/inventory/forwarder.h"

#include <gtest/gtest.h>

#include "controller/inventory/http_server.h"
#include "test/controller/inventory/test_http_client.h"
#include "test/fakes/fake_clock.h"

namespace rsc::controller::inventory {
namespace {

using std::chrono::seconds;

// A leader's inventory API over TLS on loopback: answers every request with
// 200 and the request's method and target.
class TlsLeader {
 public:
  explicit TlsLeader(const TempDir& dir) : cert_(TestCertificate::make("leader")) {
    cert_.writeTo(dir.path() / "leader.crt", dir.path() / "leader.key");
    HttpServerOptions o;
    o.bind_address = "127.0.0.1:0";
    o.tls_cert_file = (dir.path() / "leader.crt").string();
    o.tls_key_file = (dir.path() / "leader.key").string();
    auto server = HttpServer::start(o, [](HttpRequest req, HttpServer::Responder respond) {
      HttpResponse r;
      r.content_type = "text/plain";
      r.body = req.method + " " + req.target;
      respond(std::move(r));
    });
    EXPECT_TRUE(server.ok()) << server.status().toString();
    server_ = std::move(*server);
  }
  std::string url() const { return "https://127.0.0.1:" + std::to_string(server_->port()); }
  const std::string& certPem() const { return cert_.cert_pem; }

 private:
  TestCertificate cert_;
  std::unique_ptr<HttpServer> server_;
};

HttpRequest push() {
  HttpRequest r;
  r.method = "PUT";
  r.target = "/v1/drivers/gpu.example.com/pools/node-a";
  r.body = "{}";
  return r;
}

class LeaderForwarderTest : public ::testing::Test {
 protected:
  LeaderForwarderOptions options(const std::string& server_name) {
    LeaderForwarderOptions o;
    o.clock = &clock_;
    o.leader_url = [this] { return leader_.url(); };
    o.own_url = "https://10.0.0.2:8443";
    o.ca_file = ca_file_.string();
    o.tls_server_name = server_name;
    return o;
  }
  void writeCa(const std::string& pem) { std::ofstream(ca_file_, std::ios::trunc) << pem; }

  testing::FakeClock clock_;
  TempDir dir_;
  TlsLeader leader_{dir_};
  std::filesystem::path ca_file_ = dir_.path() / "ca.crt";
};

TEST_F(LeaderForwarderTest, TrustsOnlyTheCaFileAndFollowsItsRotation) {
  // The bundle does not yet hold the leader's CA: nothing is forwarded.
  writeCa(TestCertificate::make("someone-else").cert_pem);
  LeaderForwarder forwarder(options("localhost"));
  EXPECT_FALSE(forwarder.forward(push()).has_value());

  // The bundle is rotated; it is read again once the reload interval passed.
  writeCa(leader_.certPem());
  EXPECT_FALSE(forwarder.forward(push()).has_value()) << "checked at most once per interval";
  clock_.advance(seconds(5));
  std::optional<HttpResponse> answer = forwarder.forward(push());
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "PUT /v1/drivers/gpu.example.com/pools/node-a");
  EXPECT_EQ(forwarder.caLoadsForTest(), 2U);

  // An unreadable bundle keeps the last good one.
  std::filesystem::remove(ca_file_);
  clock_.advance(seconds(5));
  EXPECT_TRUE(forwarder.forward(push()).has_value());
}

TEST_F(LeaderForwarderTest, ChecksTheCertificateForTheServerName) {
  writeCa(leader_.certPem());
  // The leader's certificate names localhost and 127.0.0.1, not this Service.
  LeaderForwarder wrong_name(options("resourceslice-controller.dra-system.svc"));
  EXPECT_FALSE(wrong_name.forward(push()).has_value());
  LeaderForwarder right_name(options("localhost"));
  EXPECT_TRUE(right_name.forward(push()).has_value());
}

TEST_F(LeaderForwarderTest, NeverForwardsToItselfOrAForwardedRequest) {
  writeCa(leader_.certPem());
  LeaderForwarderOptions o = options("localhost");
  o.own_url = leader_.url();
  LeaderForwarder to_itself(o);
  EXPECT_FALSE(to_itself.forward(push()).has_value());
  LeaderForwarder forwarder(options("localhost"));
  HttpRequest again = push();
  again.headers["x-resourceslice-forwarded"] = "1";
  EXPECT_FALSE(forwarder.forward(again).has_value());
}

}  // namespace
}  // namespace rsc::controller::inventory
