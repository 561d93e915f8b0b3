#include "controller/pull/fetcher.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "controller/http/certificates.h"
#include "controller/http/http_server.h"
#include "test/controller/pull/scripted_transport.h"
#include "test/fakes/fake_clock.h"
#include "test/metrics/temp_dir.h"

namespace rsc::controller::pull {
namespace {

using testing::FakeClock;

constexpr char kOnePool[] = R"({"pools": {"p1": {"allNodes": true, "devices": [{"name": "d0"}]}}})";

FetcherOptions smallOptions() {
  FetcherOptions o;
  o.timeout = std::chrono::seconds(5);
  o.max_body_bytes = 4096;
  return o;
}

// Why a fetch that must fail failed (OK, after a test failure, when it did
// not fail).
Status failure(const StatusOr<FetchResult>& fetched) {
  EXPECT_FALSE(fetched.ok()) << "fetched " << fetched->pools.size() << " pools";
  return fetched.status();
}

// Each test scripts the endpoint's answers in transport_ and fetches with fetch().
class FetcherTest : public ::testing::Test {
 protected:
  StatusOr<FetchResult> fetch(const std::string& etag = "",
                              const FetcherOptions& options = smallOptions()) {
    InventoryFetcher fetcher(transport_, clock_, options);
    return fetcher.fetch(etag, std::nullopt);
  }

  FakeClock clock_;
  ScriptedTransport transport_;
};

TEST_F(FetcherTest, OkAnswerIsDecodedWithItsEtag) {
  transport_.addBody(200, kOnePool, {{"etag", "\"v1\""}});
  StatusOr<FetchResult> r = fetch();
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_FALSE(r->unchanged);
  EXPECT_EQ(r->etag, "\"v1\"");
  ASSERT_EQ(r->pools.size(), 1u);
  EXPECT_EQ(r->pools.begin()->first, "p1");
  const auto requests = transport_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].path_and_query, kDefaultInventoryPath);
  EXPECT_TRUE(requests[0].headers.empty()) << "no If-None-Match without an ETag";
  EXPECT_EQ(requests[0].timeout, std::chrono::seconds(5));
}

TEST_F(FetcherTest, AnEndpointBoundToANodeMayServeOnlyThatNodesPools) {
  FetcherOptions options = smallOptions();
  options.caller = {};
  options.caller.node_name = "node-a";
  options.caller.subject = "the endpoint";
  constexpr char kTwoNodes[] = R"({"pools": {
      "a": {"nodeName": "node-a", "devices": [{"name": "d0"}]},
      "b": {"nodeName": "node-b", "devices": [{"name": "d0"}]}}})";
  transport_.addBody(200, kTwoNodes);
  StatusOr<FetchResult> r = fetch("", options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), kReasonForbidden);
  EXPECT_NE(r.status().message().find(
                "pools[\"b\"].nodeName: the endpoint is bound to node \"node-a\" and may not "
                "publish devices of node \"node-b\""),
            std::string::npos)
      << r.status().message();
  ASSERT_EQ(r.status().details().size(), 1u);
  // Bound to no node: node-local pools only with --allow-unbound-node-pools.
  options.caller.node_name.reset();
  transport_.addBody(200, kTwoNodes);
  r = fetch("", options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().details().size(), 2u);
  options.allow_unbound_node_pools = true;
  transport_.addBody(200, kTwoNodes);
  r = fetch("", options);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->pools.size(), 2u);
  // The operator's own source: unrestricted (the default).
  transport_.addBody(200, kTwoNodes);
  EXPECT_TRUE(fetch().ok());
}

// A pulled inventory is checked as a push for its driver: devices may name a partition type in
// the driver's own domain bare.
TEST_F(FetcherTest, AnswersAreCheckedForTheirDriver) {
  constexpr char kBareType[] = R"({"pools": {"p1": {"allNodes": true,
      "partitionTypeAttribute": "gpu.example.com/type",
      "sharedCounters": [{"name": "s", "counters": {"c": {"value": "1"}}}],
      "devices": [{"name": "d0", "attributes": {"type": {"string": "half"}},
                   "consumesCounters": [{"counterSet": "s", "counters": {"c": {"value": "1"}}}]}]}}})";
  FetcherOptions options = smallOptions();
  options.driver = "gpu.example.com";
  transport_.addBody(200, kBareType);
  StatusOr<FetchResult> r = fetch("", options);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  options.driver = "other.example.com";
  transport_.addBody(200, kBareType);
  r = fetch("", options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("attributes[\"gpu.example.com/type\"]"), std::string::npos)
      << r.status().message();
}

TEST_F(FetcherTest, ExampleDriverInventoryIsAccepted) {
  std::ifstream in(std::string(RSC_INVENTORY_EXAMPLES_DIR) + "/nic.example.com.driver.json");
  std::stringstream text;
  text << in.rdbuf();
  transport_.addBody(200, text.str());
  FetcherOptions options;  // the push API's default limits
  StatusOr<FetchResult> r = fetch("", options);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_FALSE(r->pools.empty());
  EXPECT_EQ(r->etag, "") << "no ETag answered: the next request is unconditional";
}

TEST_F(FetcherTest, SendsIfNoneMatchAndTakes304AsUnchanged) {
  transport_.addBody(304, "");
  StatusOr<FetchResult> r = fetch("\"v1\"");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_TRUE(r->unchanged);
  EXPECT_TRUE(r->pools.empty());
  EXPECT_EQ(r->etag, "\"v1\"") << "a 304 without an ETag keeps the one sent";
  const auto requests = transport_.requests();
  ASSERT_EQ(requests.size(), 1u);
  ASSERT_EQ(requests[0].headers.size(), 1u);
  EXPECT_EQ(requests[0].headers[0].first, "If-None-Match");
  EXPECT_EQ(requests[0].headers[0].second, "\"v1\"");
}

TEST_F(FetcherTest, MalformedJsonIsInvalid) {
  transport_.addBody(200, R"({"pools": {"p1": )");
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonInvalid);
  EXPECT_NE(error.message().find("GET driver.test:8080/v1/inventory"), std::string::npos)
      << error.message();
}

TEST_F(FetcherTest, UnknownFieldIsInvalidNamingItsPath) {
  transport_.addBody(
      200,
      R"({"pools": {"p1": {"allNodes": true, "devices": [{"name": "d0", "atributes": {}}]}}})");
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonInvalid);
  EXPECT_NE(error.message().find("atributes"), std::string::npos) << error.message();
  ASSERT_FALSE(error.details().empty());
  EXPECT_NE(error.details()[0].field.find("pools[\"p1\"].devices[0]"), std::string::npos)
      << error.details()[0].field;
}

TEST_F(FetcherTest, PoolThatFailsValidationIsInvalidAndNothingIsReturned) {
  // One good pool and one whose device name is not a DNS label: the answer is refused whole.
  transport_.addBody(200, R"({"pools": {"good": {"allNodes": true, "devices": [{"name": "d0"}]},
                                       "bad": {"allNodes": true, "devices": [{"name": "D_0"}]}}})");
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonInvalid);
  EXPECT_EQ(error.code(), StatusCode::kInvalidArgument);
}

TEST_F(FetcherTest, OversizeBodyIsRefusedWithoutReadingItAll) {
  ScriptedTransport::Answer answer;
  for (int i = 0; i < 10; ++i) answer.chunks.push_back(std::string(1000, ' '));
  transport_.add(answer);
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonTooLarge);
  EXPECT_EQ(error.code(), StatusCode::kTooLarge);
  EXPECT_NE(error.message().find("--max-request-bytes"), std::string::npos);
  EXPECT_EQ(transport_.chunksRead(), 5u) << "reading stops at the chunk past the limit";
}

TEST_F(FetcherTest, BodyPastTheDecodedLimitIsTooLarge) {
  transport_.addBody(200, kOnePool);
  FetcherOptions options = smallOptions();
  options.max_decoded_bytes = 16;
  const Status error = failure(fetch("", options));
  EXPECT_EQ(error.reason(), kReasonTooLarge);
}

// A body that finds no room in the decode budget shared with pushes fails as Busy (tried again
// at the next interval) without building anything; with room it is decoded, and the budget is
// free again once the fetch returns.
TEST_F(FetcherTest, BodyWithoutRoomInTheDecodeBudgetIsBusy) {
  pool::DecodeBudget budget({.max_bytes = 1024 * 1024, .clock = &clock_});
  FetcherOptions options = smallOptions();
  options.decode_budget = &budget;
  options.decode_wait = Clock::Duration::zero();
  {
    std::optional<pool::DecodeBudget::Reservation> held = budget.reserve(1024 * 1024, {});
    ASSERT_TRUE(held);
    transport_.addBody(200, kOnePool);
    Status busy = failure(fetch("", options));
    EXPECT_EQ(busy.reason(), kReasonBusy);
    EXPECT_EQ(busy.code(), StatusCode::kUnavailable);
    EXPECT_NE(busy.message().find("--max-inflight-decoded-bytes"), std::string::npos);
  }
  transport_.addBody(200, kOnePool);
  StatusOr<FetchResult> r = fetch("", options);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->pools.size(), 1u);
  EXPECT_EQ(budget.reserved(), 0u);
}

TEST_F(FetcherTest, RedirectIsRefusedNamingWhereItLeads) {
  transport_.addBody(302, "", {{"location", "http://elsewhere.test/inv"}});
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonRedirect);
  EXPECT_NE(error.message().find("302"), std::string::npos);
  EXPECT_NE(error.message().find("http://elsewhere.test/inv"), std::string::npos);
  EXPECT_EQ(transport_.requests().size(), 1u) << "the redirect is not followed";
}

TEST_F(FetcherTest, ErrorAnswerIsHttpErrorWithTheStartOfItsBody) {
  transport_.addBody(503, "inventory not ready\nsecond line");
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonHttpError);
  EXPECT_NE(error.message().find("HTTP 503: inventory not ready"), std::string::npos)
      << error.message();
  EXPECT_EQ(error.message().find("second line"), std::string::npos);
  EXPECT_EQ(transport_.requests()[0].max_error_body_bytes, 4096u)
      << "an error page is read only as far as its start";
}

TEST_F(FetcherTest, OtherSuccessCodesAreErrors) {
  transport_.addBody(204, "");
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonHttpError);
}

TEST_F(FetcherTest, TransportTimeoutIsTimeout) {
  transport_.addError(deadlineExceeded("driver.test:8080: no answer in time"));
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonTimeout);
  EXPECT_EQ(error.code(), StatusCode::kDeadlineExceeded);
}

TEST_F(FetcherTest, BodyTricklingPastTheTimeoutIsTimeout) {
  ScriptedTransport::Answer answer;
  // Each piece arrives within the transport's idle timeout, the whole one not.
  answer.chunks = {R"({"pools": )", "{}", "}"};
  answer.between_chunks = [this] { clock_.advance(std::chrono::seconds(3)); };
  transport_.add(answer);
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonTimeout);
  EXPECT_NE(error.message().find("--pull-timeout"), std::string::npos);
}

TEST_F(FetcherTest, UnreachableEndpointIsUnreachable) {
  transport_.addError(unavailable("driver.test:8080: Connection refused"));
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonUnreachable);
  EXPECT_NE(error.message().find("Connection refused"), std::string::npos);
}

TEST(SourceUrl, SplitsServerAndPath) {
  StatusOr<SourceUrl> u = parseSourceUrl("https://driver.ns.svc:8443/inventory?node=a");
  ASSERT_TRUE(u.ok()) << u.status().toString();
  EXPECT_EQ(u->server, "https://driver.ns.svc:8443");
  EXPECT_EQ(u->path_and_query, "/inventory?node=a");
  u = parseSourceUrl("http://127.0.0.1:9000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->server, "http://127.0.0.1:9000");
  EXPECT_EQ(u->path_and_query, kDefaultInventoryPath);
  u = parseSourceUrl("http://[::1]:9000?x=1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->server, "http://[::1]:9000");
  EXPECT_EQ(u->path_and_query, "/v1/inventory?x=1");
}

TEST(SourceUrl, RefusesWhatIsNotAnEndpointUrl) {
  for (const char* bad : {"driver:9000", "ftp://driver/x", "http:///x", "http://u:p@driver/x",
                          "http://driver/x#frag"}) {
    StatusOr<SourceUrl> u = parseSourceUrl(bad);
    EXPECT_FALSE(u.ok()) << bad;
    if (!u.ok()) {
      EXPECT_NE(u.status().message().find(bad), std::string::npos) << u.status().message();
    }
  }
}

// The real source transport against a loopback server: a redirect comes back as an answer
// (cpprest would follow up to 10 by default) and is refused; an oversize body is cut off.
class RealTransport : public ::testing::Test {
 protected:
  void serve(http::HttpResponse answer) {
    http::HttpServerOptions options;
    options.bind_address = "127.0.0.1:0";
    auto started = http::HttpServer::start(
        options, [answer](const http::HttpRequest&, const http::HttpServer::Responder& respond) {
          respond(answer);
        });
    ASSERT_TRUE(started.ok()) << started.status().toString();
    server_ = std::move(*started);
    auto url = parseSourceUrl("http://127.0.0.1:" + std::to_string(server_->port()));
    ASSERT_TRUE(url.ok());
    auto made = sourceTransport(*url, SourceSpec{}, SourceCredentials{}, RealClock::instance());
    ASSERT_TRUE(made.ok()) << made.status().toString();
    transport_ = std::move(*made);
  }

  StatusOr<FetchResult> fetch() {
    InventoryFetcher fetcher(*transport_, RealClock::instance(), smallOptions());
    return fetcher.fetch("", std::nullopt);
  }

  std::unique_ptr<http::HttpServer> server_;
  std::shared_ptr<client::HttpTransport> transport_;
};

TEST_F(RealTransport, RedirectIsNotFollowed) {
  http::HttpResponse redirect;
  redirect.status = 307;
  redirect.headers.emplace_back("Location", "http://127.0.0.1:1/elsewhere");
  serve(redirect);
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonRedirect) << error.toString();
}

TEST_F(RealTransport, OversizeBodyIsRefused) {
  http::HttpResponse big;
  big.content_type = "application/json";
  big.body = std::string(64 * 1024, ' ');
  serve(big);
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonTooLarge) << error.toString();
}

TEST_F(RealTransport, ErrorAnswerIsReadOnlyToItsLimit) {
  http::HttpResponse page;
  page.status = 500;
  page.body = "broken\n" + std::string(1024 * 1024, 'x');
  serve(page);
  const Status error = failure(fetch());
  EXPECT_EQ(error.reason(), kReasonHttpError) << error.toString();
  EXPECT_NE(error.message().find("HTTP 500: broken"), std::string::npos);
  // The transport itself: the body stops at the limit.
  client::HttpRequest request;
  request.path_and_query = "/v1/inventory";
  request.max_error_body_bytes = 1000;
  StatusOr<client::HttpResponse> head =
      transport_->stream(request, nullptr, [](std::string_view) { return true; }, {});
  ASSERT_TRUE(head.ok()) << head.status().toString();
  EXPECT_EQ(head->code, 500);
  EXPECT_EQ(head->body.size(), 1000u);
}

TEST_F(RealTransport, InventoryIsFetched) {
  http::HttpResponse ok;
  ok.content_type = "application/json";
  ok.headers.emplace_back("ETag", "\"abc\"");
  ok.body = kOnePool;
  serve(ok);
  StatusOr<FetchResult> r = fetch();
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->etag, "\"abc\"");
  EXPECT_EQ(r->pools.size(), 1u);
}

// HTTPS to a discovered endpoint: its certificate names the Service, not the address dialled;
// the CA comes from the spec (else the credentials); the token goes only over HTTPS.
class HttpsEndpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    http::CertificateRequest request;
    request.common_name = "test CA";
    request.not_before = std::chrono::system_clock::now();
    auto ca = http::makeCertificateAuthority(request);
    ASSERT_TRUE(ca.ok()) << ca.status().toString();
    ca_pem_ = ca->cert_pem;
    request.common_name = "nic-inventory";
    request.names = {"nic-inventory.dra.svc"};
    auto serving = http::issueServingCertificate(request, &*ca);
    ASSERT_TRUE(serving.ok()) << serving.status().toString();
    pair_ = std::make_shared<const http::TlsKeyPair>(*serving);
    tls_server_ = startServer(pair_);
    plain_server_ = startServer(nullptr);
    token_file_ = dir_.path() / "token";
    std::ofstream(token_file_) << "pull-token-1";
  }

  // A server on loopback answering one pool and recording the Authorization header; HTTPS
  // with `pair`, else plain HTTP.
  std::unique_ptr<http::HttpServer> startServer(std::shared_ptr<const http::TlsKeyPair> pair) {
    http::HttpServerOptions options;
    options.bind_address = "127.0.0.1:0";
    if (pair) options.tls_key_pair = [pair] { return pair; };
    auto started = http::HttpServer::start(
        options,
        [this](const http::HttpRequest& request, const http::HttpServer::Responder& respond) {
          {
            std::lock_guard lock(mu_);
            authorization_ = std::string(request.header("authorization").value_or("<none>"));
          }
          http::HttpResponse ok;
          ok.content_type = "application/json";
          ok.body = kOnePool;
          respond(ok);
        });
    EXPECT_TRUE(started.ok()) << started.status().toString();
    return started.ok() ? std::move(*started) : nullptr;
  }

  StatusOr<FetchResult> fetchWith(const std::string& scheme, const SourceSpec& spec,
                                  const SourceCredentials& credentials) {
    const auto& server = scheme == "https" ? tls_server_ : plain_server_;
    auto url = parseSourceUrl(scheme + "://127.0.0.1:" + std::to_string(server->port()));
    if (!url.ok()) return url.status();
    ASSIGN_OR_RETURN(std::shared_ptr<client::HttpTransport> transport,
                     sourceTransport(*url, spec, credentials, RealClock::instance()));
    InventoryFetcher fetcher(*transport, RealClock::instance(), smallOptions());
    return fetcher.fetch("", std::nullopt);
  }
  std::string authorization() {
    std::lock_guard lock(mu_);
    return authorization_;
  }

  rsc::metrics::testing::TempDir dir_;
  std::filesystem::path token_file_;
  std::string ca_pem_;
  std::shared_ptr<const http::TlsKeyPair> pair_;
  std::mutex mu_;
  std::string authorization_;  // guarded by mu_
  std::unique_ptr<http::HttpServer> tls_server_;
  std::unique_ptr<http::HttpServer> plain_server_;
};

TEST_F(HttpsEndpoint, CertificateIsCheckedAgainstTheServiceNameWithTheConfiguredCa) {
  SourceSpec spec;
  spec.tls_server_name = "nic-inventory.dra.svc";
  SourceCredentials credentials;
  credentials.token_file = token_file_.string();
  // The system's store does not know the test CA.
  EXPECT_FALSE(fetchWith("https", spec, credentials).ok());
  // --pull-ca-file.
  credentials.ca_pem = ca_pem_;
  StatusOr<FetchResult> r = fetchWith("https", spec, credentials);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(authorization(), "Bearer pull-token-1");
  // The Service's annotation wins over the flag.
  credentials.ca_pem.clear();
  spec.ca_pem = ca_pem_;
  EXPECT_TRUE(fetchWith("https", spec, credentials).ok());
  // A certificate for another name is refused.
  spec.tls_server_name = "other.dra.svc";
  EXPECT_FALSE(fetchWith("https", spec, credentials).ok());
}

TEST_F(HttpsEndpoint, TheTokenIsNeverSentOverPlainHttp) {
  SourceCredentials credentials;
  credentials.token_file = token_file_.string();
  ASSERT_TRUE(fetchWith("http", SourceSpec{}, credentials).ok());
  EXPECT_EQ(authorization(), "<none>");
}

}  // namespace
}  // namespace rsc::controller::pull
