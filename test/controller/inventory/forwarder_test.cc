#include "controller/inventory/forwarder.h"

#include <gtest/gtest.h>

#include <atomic>

#include "controller/http/http_server.h"
#include "test/controller/http/test_http_client.h"
#include "test/fakes/fake_clock.h"

namespace rsc::controller::inventory {

using http::TempDir;
using http::TestCertificate;

using http::HttpRequest;
using http::HttpResponse;
using http::HttpServer;
using http::HttpServerOptions;
namespace {

using std::chrono::seconds;

// A leader's inventory API over TLS on loopback: answers every request with
// 200 and the request's method and target.
// With `tls` false, over plain http. Counts the requests it was sent.
class TlsLeader {
 public:
  explicit TlsLeader(const TempDir& dir, bool tls = true) : cert_(TestCertificate::make("leader")) {
    cert_.writeTo(dir.path() / "leader.crt", dir.path() / "leader.key");
    HttpServerOptions o;
    o.bind_address = "127.0.0.1:0";
    if (tls) {
      o.tls_cert_file = (dir.path() / "leader.crt").string();
      o.tls_key_file = (dir.path() / "leader.key").string();
    }
    auto server = HttpServer::start(o, [this](HttpRequest req, HttpServer::Responder respond) {
      ++requests_;
      HttpResponse r;
      r.content_type = "text/plain";
      r.body = req.method + " " + req.target;
      respond(std::move(r));
    });
    EXPECT_TRUE(server.ok()) << server.status().toString();
    server_ = std::move(*server);
    url_ = (tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(server_->port());
  }
  const std::string& url() const { return url_; }
  const std::string& certPem() const { return cert_.cert_pem; }
  int requests() const { return requests_.load(); }

 private:
  TestCertificate cert_;
  std::atomic<int> requests_{0};
  std::unique_ptr<HttpServer> server_;
  std::string url_;
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
  LeaderForwarderOptions options(const std::string& server_name,
                                 const TlsLeader* leader = nullptr) {
    LeaderForwarderOptions o;
    o.clock = &clock_;
    const TlsLeader* to = leader != nullptr ? leader : &leader_;
    o.leader_url = [to] { return to->url(); };
    o.own_url = "https://10.0.0.2:8443";
    o.ca_file = ca_file_.string();
    o.tls_server_name = server_name;
    o.leader_identity = [] { return std::string("replica-1"); };
    o.on_refused = [this](ForwardRefusal r) { refused_.emplace_back(forwardRefusalName(r)); };
    return o;
  }
  void writeCa(const std::string& pem) { std::ofstream(ca_file_, std::ios::trunc) << pem; }

  testing::FakeClock clock_;
  TempDir dir_;
  TlsLeader leader_{dir_};
  std::filesystem::path ca_file_ = dir_.path() / "ca.crt";
  std::vector<std::string> refused_;
};

int statusOf(const std::optional<HttpResponse>& r) { return r ? r->status : 0; }

TEST_F(LeaderForwarderTest, TrustsOnlyTheCaFileAndFollowsItsRotation) {
  // The bundle does not yet hold the leader's CA: nothing is forwarded.
  writeCa(TestCertificate::make("someone-else").cert_pem);
  LeaderForwarder forwarder(options("localhost"));
  EXPECT_EQ(statusOf(forwarder.forward(push())), 503);

  // The bundle is rotated; it is read again once the reload interval passed.
  writeCa(leader_.certPem());
  EXPECT_EQ(statusOf(forwarder.forward(push())), 503) << "checked at most once per interval";
  clock_.advance(seconds(5));
  std::optional<HttpResponse> answer = forwarder.forward(push());
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(answer->body, "PUT /v1/drivers/gpu.example.com/pools/node-a");
  EXPECT_EQ(forwarder.caLoadsForTest(), 2U);

  // An unreadable bundle keeps the last good one.
  std::filesystem::remove(ca_file_);
  clock_.advance(seconds(5));
  EXPECT_EQ(statusOf(forwarder.forward(push())), 200);
  EXPECT_EQ(refused_, (std::vector<std::string>{"forward_failed", "forward_failed"}));
}

TEST_F(LeaderForwarderTest, ChecksTheCertificateForTheServerName) {
  writeCa(leader_.certPem());
  // The leader's certificate names localhost and 127.0.0.1, not this Service.
  LeaderForwarder wrong_name(options("resourceslice-controller.dra-system.svc"));
  const std::optional<HttpResponse> refused = wrong_name.forward(push());
  EXPECT_EQ(statusOf(refused), 503);
  EXPECT_NE(refused->body.find("the leader replica-1 (" + leader_.url() + ")"), std::string::npos)
      << refused->body;
  LeaderForwarder right_name(options("localhost"));
  EXPECT_EQ(statusOf(right_name.forward(push())), 200);
  EXPECT_EQ(leader_.requests(), 1);
}

// The leader's URL comes from the Lease, which others may rewrite: nothing
// goes to a plain-http URL unless allowed, nor to an https one that cannot be
// verified against a CA of this replica's own (never the system store).
TEST_F(LeaderForwarderTest, SendsNothingToAPlainHttpUrlOrWithoutACa) {
  TlsLeader plain(dir_, /*tls=*/false);
  writeCa(leader_.certPem());
  LeaderForwarder to_plain(options("localhost", &plain));
  const std::optional<HttpResponse> refused = to_plain.forward(push());
  EXPECT_EQ(statusOf(refused), 503);
  EXPECT_NE(refused->body.find("not https"), std::string::npos) << refused->body;
  EXPECT_EQ(plain.requests(), 0);

  LeaderForwarderOptions no_ca = options("localhost");
  no_ca.ca_file.clear();
  LeaderForwarder without_ca(no_ca);
  EXPECT_EQ(statusOf(without_ca.forward(push())), 503);
  EXPECT_EQ(leader_.requests(), 0);
  EXPECT_EQ(refused_, (std::vector<std::string>{"forward_insecure", "forward_insecure"}));

  // --forward-insecure: plain http is allowed (local tests).
  LeaderForwarderOptions insecure = options("localhost", &plain);
  insecure.allow_insecure = true;
  LeaderForwarder allowed(insecure);
  EXPECT_EQ(statusOf(allowed.forward(push())), 200);
  EXPECT_EQ(plain.requests(), 1);
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

// The leader a follower last read in the Lease went away: a refused
// connection makes the forwarder ask for a fresh read (at most once per
// refresh_interval) and send the request to the leader named now.
TEST_F(LeaderForwarderTest, AnUnreachableLeaderMakesItReadTheLeaseAgainOnce) {
  writeCa(leader_.certPem());
  LeaderForwarderOptions o = options("localhost");
  std::string url = "https://127.0.0.1:1";  // the leader that went away
  int refreshes = 0;
  Clock::TimePoint asked_deadline{};
  o.leader_url = [&] { return url; };
  o.refresh_leader = [&](Clock::TimePoint deadline) {
    ++refreshes;
    asked_deadline = deadline;
    url = leader_.url();
  };
  LeaderForwarder forwarder(o);
  EXPECT_EQ(statusOf(forwarder.forward(push())), 200);
  EXPECT_EQ(leader_.requests(), 1);
  EXPECT_EQ(refreshes, 1);
  EXPECT_EQ(asked_deadline, clock_.now() + o.refresh_wait);
  EXPECT_TRUE(refused_.empty());

  // Gone again, within refresh_interval: no second read, a 503 naming it.
  url = "https://127.0.0.1:1";
  std::optional<HttpResponse> refused = forwarder.forward(push());
  EXPECT_EQ(statusOf(refused), 503);
  EXPECT_NE(refused->body.find("https://127.0.0.1:1"), std::string::npos) << refused->body;
  EXPECT_EQ(refreshes, 1);
  EXPECT_EQ(refused_, std::vector<std::string>{"forward_failed"});
  // After it, the Lease is read again.
  clock_.advance(o.refresh_interval);
  EXPECT_EQ(statusOf(forwarder.forward(push())), 200);
  EXPECT_EQ(refreshes, 2);
  EXPECT_EQ(leader_.requests(), 2);
}

// The fresh read found no other leader (this replica took the released
// lease, or nobody holds it yet): nullopt, and the caller decides.
TEST_F(LeaderForwarderTest, AnUnreachableLeaderReplacedByThisReplicaIsNotForwardedTo) {
  writeCa(leader_.certPem());
  LeaderForwarderOptions o = options("localhost");
  std::string url = "https://127.0.0.1:1";
  o.leader_url = [&] { return url; };
  o.refresh_leader = [&](Clock::TimePoint) { url = o.own_url; };
  LeaderForwarder forwarder(o);
  EXPECT_FALSE(forwarder.forward(push()).has_value());
  EXPECT_EQ(leader_.requests(), 0);
  EXPECT_TRUE(refused_.empty());
}

}  // namespace
}  // namespace rsc::controller::inventory
