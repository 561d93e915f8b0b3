// HttpServer over loopback, port 0. The timeout tests wait in real time,
// bounded and short (header timeouts of 200 ms); everything else is
// synchronised on the requests themselves.
#include "controller/http/http_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <any>
#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "controller/http/certificates.h"
#include "test/controller/http/test_http_client.h"
#include "test/fakes/fake_clock.h"

namespace rsc::controller::http {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// Answers every request at once with what it saw.
HttpServer::Handler echoHandler(std::atomic<int>* calls = nullptr) {
  return [calls](HttpRequest request, HttpServer::Responder respond) {
    if (calls != nullptr) ++*calls;
    HttpResponse response;
    response.content_type = "text/plain";
    response.headers.emplace_back("X-Remote", request.remote_address);
    response.body = request.method + " " + request.target + " " +
                    std::string(request.header("x-test").value_or("-")) + " " + request.body;
    respond(std::move(response));
  };
}

std::unique_ptr<HttpServer> startServer(HttpServerOptions options, HttpServer::Handler handler) {
  options.bind_address = "127.0.0.1:0";
  StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::start(std::move(options), std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status().toString();
  return server.ok() ? std::move(*server) : nullptr;
}

bool connectionRefused(uint16_t port) {
  try {
    TestHttpClient client(port);
    return false;
  } catch (const boost::system::system_error&) {
    return true;
  }
}

TEST(HttpServer, KeepsTheConnectionAliveAcrossRequests) {
  auto server = startServer({}, echoHandler());
  ASSERT_NE(server, nullptr);
  EXPECT_NE(server->port(), 0);
  EXPECT_EQ(server->address(), "127.0.0.1:" + std::to_string(server->port()));

  TestHttpClient client(server->port());
  TestResponse first = client.send("PUT", "/a?x=1", "body-1", {{"X-Test", "one"}});
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.body, "PUT /a?x=1 one body-1");
  EXPECT_TRUE(first.keep_alive);
  TestResponse second = client.send("GET", "/b");
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(second.body, "GET /b - ");
  // One connection served both.
  EXPECT_EQ(first.headers.at("x-remote"), second.headers.at("x-remote"));
  EXPECT_EQ(server->connectionCount(), 1U);
}

TEST(HttpServer, BodyOverTheLimitIs413) {
  std::atomic<int> calls = 0;
  auto server = startServer({.max_request_bytes = 1024}, echoHandler(&calls));
  ASSERT_NE(server, nullptr);
  {
    TestHttpClient client(server->port());
    TestResponse ok = client.send("PUT", "/", std::string(1024, 'x'));
    EXPECT_EQ(ok.status, 200);
  }
  {
    TestHttpClient client(server->port());
    TestResponse response = client.send("PUT", "/", std::string(1025, 'x'));
    EXPECT_EQ(response.status, 413);
    EXPECT_FALSE(response.keep_alive);
    EXPECT_TRUE(client.closedByPeer());
  }
  {
    // Chunked: the size is only known while reading.
    TestHttpClient client(server->port());
    client.writeRaw("PUT / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" +
                    std::string(0x800, 'x') + "\r\n0\r\n\r\n");
    EXPECT_EQ(client.read().status, 413);
  }
  EXPECT_EQ(calls, 1);
}

TEST(HttpServer, HeadersOverTheLimitAre431) {
  auto server = startServer({.max_header_bytes = 1024}, echoHandler());
  ASSERT_NE(server, nullptr);
  TestHttpClient client(server->port());
  EXPECT_EQ(client.send("GET", "/", "", {{"X-Big", std::string(4096, 'a')}}).status, 431);
}

TEST(HttpServer, MalformedRequestIs400) {
  auto server = startServer({}, echoHandler());
  ASSERT_NE(server, nullptr);
  TestHttpClient client(server->port());
  client.writeRaw("THIS IS NOT HTTP\r\n\r\n");
  EXPECT_EQ(client.read().status, 400);
}

TEST(HttpServer, ServerErrorsUseTheGivenRenderer) {
  HttpServerOptions options;
  options.max_request_bytes = 10;
  options.error_response = [](int status, std::string_view message) {
    HttpResponse response;
    response.status = status;
    response.content_type = "application/json";
    response.body =
        "{\"code\": " + std::to_string(status) + ", \"message\": \"" + std::string(message) + "\"}";
    return response;
  };
  auto server = startServer(options, echoHandler());
  ASSERT_NE(server, nullptr);
  TestHttpClient client(server->port());
  TestResponse response = client.send("PUT", "/", std::string(11, 'x'));
  EXPECT_EQ(response.status, 413);
  EXPECT_EQ(response.headers.at("content-type"), "application/json");
  EXPECT_THAT(response.body, HasSubstr("\"code\": 413"));
}

TEST(HttpServer, HeaderTimeoutClosesSlowClients) {
  auto server = startServer({.header_timeout = 200ms}, echoHandler());
  ASSERT_NE(server, nullptr);
  const Clock::TimePoint start = RealClock::instance().now();
  TestHttpClient slow(server->port());
  slow.writeRaw("GET / HTTP/1.1\r\nHost: x\r\n");  // never finishes its headers
  TestHttpClient silent(server->port());           // never sends anything
  EXPECT_TRUE(slow.closedByPeer());
  EXPECT_TRUE(silent.closedByPeer());
  EXPECT_LT(RealClock::instance().now() - start, 2s);
}

TEST(HttpServer, IdleTimeoutClosesKeptAliveConnections) {
  auto server = startServer({.idle_timeout = 200ms}, echoHandler());
  ASSERT_NE(server, nullptr);
  TestHttpClient client(server->port());
  EXPECT_EQ(client.send("GET", "/").status, 200);
  const Clock::TimePoint start = RealClock::instance().now();
  EXPECT_TRUE(client.closedByPeer());
  EXPECT_LT(RealClock::instance().now() - start, 2s);
  EXPECT_TRUE(server->waitForConnectionsForTest(0));
}

TEST(HttpServer, AnswersContinueBeforeTheBody) {
  std::atomic<int> calls = 0;
  auto server = startServer({}, echoHandler(&calls));
  ASSERT_NE(server, nullptr);
  TestHttpClient client(server->port());
  client.writeRaw(
      "PUT /p HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(client.read().status, 100);
  client.writeRaw("hello");
  TestResponse response = client.read();
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, "PUT /p - hello");
  EXPECT_EQ(calls, 1);
}

// Records the server's refusals, which it reports on its I/O thread.
class Refusals {
 public:
  std::function<void(Refusal)> callback() {
    return [this](Refusal r) {
      std::lock_guard lock(mu_);
      seen_.push_back(r);
    };
  }
  std::vector<Refusal> seen() const {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<Refusal> seen_;
};

// Holds every request until the test answers it.
class HeldRequests {
 public:
  HttpServer::Handler handler() {
    return [this](HttpRequest request, HttpServer::Responder respond) {
      std::lock_guard lock(mu_);
      held_.push_back(std::move(respond));
      if (arrived_.size() >= held_.size()) arrived_[held_.size() - 1].set_value(request.target);
    };
  }
  explicit HeldRequests(size_t expected) : arrived_(expected) {}
  std::string waitFor(size_t i) {
    std::future<std::string> f = arrived_[i].get_future();
    return f.wait_for(5s) == std::future_status::ready ? f.get() : "<timeout>";
  }
  void answer(size_t i, int status) {
    HttpServer::Responder respond;
    {
      std::lock_guard lock(mu_);
      respond = held_.at(i);
    }
    HttpResponse response;
    response.status = status;
    response.body = "answer";
    respond(std::move(response));
  }

 private:
  std::mutex mu_;
  std::vector<HttpServer::Responder> held_;
  std::vector<std::promise<std::string>> arrived_;
};

TEST(HttpServer, TooManyBusyConnectionsAre503) {
  HeldRequests held(1);
  Refusals refusals;
  auto server =
      startServer({.max_connections = 1, .on_refused = refusals.callback()}, held.handler());
  ASSERT_NE(server, nullptr);
  TestHttpClient first(server->port());
  first.writeRaw("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(held.waitFor(0), "/busy");  // being handled: not evictable
  TestHttpClient second(server->port());
  TestResponse busy = second.read();
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.headers.at("retry-after"), "1");
  EXPECT_TRUE(second.closedByPeer());
  // The first connection still gets its answer.
  held.answer(0, 200);
  EXPECT_EQ(first.read().status, 200);
  EXPECT_EQ(server->refusalCount(), 1U);
  EXPECT_THAT(refusals.seen(), ::testing::ElementsAre(Refusal::kConnections));
}

// Slow-header clients cannot crowd out a real one: when every slot is taken,
// the connection that has waited longest for its headers makes room.
TEST(HttpServer, EvictsTheConnectionWaitingLongestForHeaders) {
  HeldRequests held(1);
  auto server = startServer({.max_connections = 3}, held.handler());
  ASSERT_NE(server, nullptr);
  TestHttpClient slow(server->port());
  slow.writeRaw("GET / HTTP/1.1\r\nHost: x\r\n");  // never finishes its headers
  ASSERT_TRUE(server->waitForConnectionsForTest(1));
  TestHttpClient busy(server->port());
  busy.writeRaw("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(held.waitFor(0), "/busy");
  TestHttpClient silent(server->port());  // never sends anything
  ASSERT_TRUE(server->waitForConnectionsForTest(3));

  TestHttpClient newcomer(server->port());
  EXPECT_TRUE(slow.closedByPeer());  // the oldest one waiting for headers
  ASSERT_TRUE(server->waitForConnectionsForTest(3));
  held.answer(0, 200);
  EXPECT_EQ(busy.read().status, 200);
  // The newcomer is served (held, as every request of this handler).
  newcomer.writeRaw("GET /new HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(server->refusalCount(), 1U);  // the eviction
}

TEST(HttpServer, LimitsConnectionsPerClient) {
  Refusals refusals;
  auto server = startServer({.max_connections_per_client = 2, .on_refused = refusals.callback()},
                            echoHandler());
  ASSERT_NE(server, nullptr);
  auto one = std::make_unique<TestHttpClient>(server->port());
  TestHttpClient two(server->port());
  ASSERT_EQ(one->send("GET", "/").status, 200);
  ASSERT_EQ(two.send("GET", "/").status, 200);
  TestHttpClient three(server->port());
  EXPECT_EQ(three.read().status, 503);
  EXPECT_THAT(refusals.seen(), ::testing::ElementsAre(Refusal::kClientConnections));
  // A slot freed is a slot again.
  one.reset();
  ASSERT_TRUE(server->waitForConnectionsForTest(1));
  TestHttpClient four(server->port());
  EXPECT_EQ(four.send("GET", "/").status, 200);
}

// The admission step sees the headers first: a refused request's body is
// never read, and an admitted one carries the decision to the handler.
TEST(HttpServer, AdmissionDecidesBeforeTheBodyIsRead) {
  std::atomic<int> calls = 0;
  HttpServerOptions options;
  options.admit = [](const HttpRequest& head, std::function<void(Admission)> decide) {
    Admission admission;
    if (!head.header("x-token")) {
      HttpResponse refusal;
      refusal.status = 401;
      refusal.body = "who are you";
      admission.refusal = std::move(refusal);
    } else {
      admission.max_body_bytes = 16;
      admission.state = std::string("caller-") + std::string(*head.header("x-token"));
    }
    // Decided later, from another thread, as authentication does.
    std::thread([decide = std::move(decide), admission = std::move(admission)]() mutable {
      decide(std::move(admission));
    }).detach();
  };
  auto server = startServer(options, [&](HttpRequest request, HttpServer::Responder respond) {
    ++calls;
    HttpResponse response;
    response.body = std::any_cast<std::string>(request.admission) + " " + request.body;
    respond(std::move(response));
  });
  ASSERT_NE(server, nullptr);
  {
    // Announces 8 MiB and sends none of it: answered at once.
    TestHttpClient client(server->port());
    client.writeRaw("PUT / HTTP/1.1\r\nHost: x\r\nContent-Length: 8388608\r\n\r\n");
    TestResponse refused = client.read();
    EXPECT_EQ(refused.status, 401);
    EXPECT_EQ(refused.body, "who are you");
    EXPECT_FALSE(refused.keep_alive);
  }
  {
    TestHttpClient client(server->port());
    TestResponse ok = client.send("PUT", "/", "sixteen bytes!!!", {{"X-Token", "a"}});
    EXPECT_EQ(ok.status, 200);
    EXPECT_EQ(ok.body, "caller-a sixteen bytes!!!");
    // The admission's limit, not the server's.
    EXPECT_EQ(client.send("PUT", "/", "seventeen bytes!!", {{"X-Token", "a"}}).status, 413);
  }
  EXPECT_EQ(calls, 1);
}

// Bodies in flight share one budget: a body that does not fit is refused
// before it is read, and the budget comes back when the answer is sent.
TEST(HttpServer, BoundsTheBodiesInFlight) {
  Refusals refusals;
  auto server = startServer({.max_inflight_body_bytes = 1000, .on_refused = refusals.callback()},
                            echoHandler());
  ASSERT_NE(server, nullptr);
  TestHttpClient slow(server->port());
  slow.writeRaw(
      "PUT /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\nExpect: 100-continue\r\n\r\n");
  ASSERT_EQ(slow.read().status, 100);  // its 800 bytes are reserved now
  slow.writeRaw(std::string(400, 'x'));

  TestHttpClient other(server->port());
  TestResponse busy = other.send("PUT", "/other", std::string(300, 'y'));
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.headers.at("retry-after"), "1");
  TestHttpClient small(server->port());
  EXPECT_EQ(small.send("PUT", "/small", std::string(200, 'z')).status, 200);

  slow.writeRaw(std::string(400, 'x'));
  EXPECT_EQ(slow.read().status, 200);
  TestHttpClient again(server->port());
  EXPECT_EQ(again.send("PUT", "/other", std::string(300, 'y')).status, 200);
  EXPECT_THAT(refusals.seen(), ::testing::ElementsAre(Refusal::kInflightBodies));
}

TEST(HttpServer, HandlersMayAnswerLaterFromAnotherThread) {
  HeldRequests held(1);
  auto server = startServer({}, held.handler());
  ASSERT_NE(server, nullptr);
  std::future<TestResponse> response = std::async(std::launch::async, [&] {
    TestHttpClient client(server->port());
    return client.send("GET", "/slow");
  });
  EXPECT_EQ(held.waitFor(0), "/slow");
  std::thread([&] { held.answer(0, 202); }).join();
  ASSERT_EQ(response.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(response.get().status, 202);
  // A second answer to the same request is ignored.
  held.answer(0, 500);
}

TEST(HttpServer, StopFinishesRequestsInFlight) {
  HeldRequests held(1);
  auto server = startServer({}, held.handler());
  ASSERT_NE(server, nullptr);
  const uint16_t port = server->port();
  TestHttpClient idle(port);
  ASSERT_TRUE(server->waitForConnectionsForTest(1));
  std::future<TestResponse> response = std::async(std::launch::async, [&] {
    TestHttpClient client(port);
    return client.send("PUT", "/in-flight", "x");
  });
  ASSERT_EQ(held.waitFor(0), "/in-flight");

  std::thread stopper([&] { server->stop(10s); });
  // Stopping: no new connections, idle ones closed...
  ASSERT_TRUE(server->waitForStopAcceptingForTest());
  EXPECT_TRUE(connectionRefused(port));
  EXPECT_TRUE(idle.closedByPeer());
  // ...and the request in flight still gets its answer, then the close.
  held.answer(0, 200);
  ASSERT_EQ(response.wait_for(5s), std::future_status::ready);
  TestResponse answered = response.get();
  EXPECT_EQ(answered.status, 200);
  EXPECT_FALSE(answered.keep_alive);
  stopper.join();
  EXPECT_EQ(server->connectionCount(), 0U);
}

TEST(HttpServer, StopClosesWhatIsLeftAfterTheGrace) {
  HeldRequests held(1);
  auto server = startServer({}, held.handler());
  ASSERT_NE(server, nullptr);
  TestHttpClient client(server->port());
  client.writeRaw("GET /never HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(held.waitFor(0), "/never");
  server->stop(100ms);
  EXPECT_TRUE(client.closedByPeer());
  // Answering after the server stopped, even after it is gone, is harmless.
  server.reset();
  held.answer(0, 200);
}

TEST(HttpServer, ServesTlsFromMemoryAndSwitchesToANewPair) {
  CertificateRequest request;
  request.names = {"localhost", "127.0.0.1"};
  request.not_before = std::chrono::system_clock::now();
  request.common_name = "ca";
  const TlsKeyPair ca = *makeCertificateAuthority(request);
  request.common_name = "first";
  auto first = std::make_shared<const TlsKeyPair>(*issueServingCertificate(request, &ca));
  request.common_name = "second";
  auto second = std::make_shared<const TlsKeyPair>(*issueServingCertificate(request, &ca));

  std::mutex mu;
  std::shared_ptr<const TlsKeyPair> current = first;
  HttpServerOptions options;
  options.tls_key_pair = [&] {
    std::lock_guard lock(mu);
    return current;
  };
  auto server = startServer(options, echoHandler());
  ASSERT_NE(server, nullptr);
  asio::ssl::context trusts_ca(asio::ssl::context::tls_client);
  trusts_ca.add_certificate_authority(asio::buffer(ca.cert_pem));
  {
    TestHttpClient client(server->port(), &trusts_ca);
    EXPECT_EQ(client.peerCommonName(), "first");
    EXPECT_EQ(client.send("GET", "/secure").status, 200);
  }
  // A new pair is served from the next connection on, with no reload delay.
  {
    std::lock_guard lock(mu);
    current = second;
  }
  {
    TestHttpClient client(server->port(), &trusts_ca);
    EXPECT_EQ(client.peerCommonName(), "second");
    EXPECT_EQ(client.send("GET", "/").status, 200);
  }
  EXPECT_EQ(server->tlsLoadCount(), 2U);
  // A pair that does not load keeps the last good one, and is not retried.
  {
    std::lock_guard lock(mu);
    current = std::make_shared<const TlsKeyPair>(TlsKeyPair{second->cert_pem, first->key_pem});
  }
  for (int i = 0; i < 2; ++i) {
    TestHttpClient client(server->port(), &trusts_ca);
    EXPECT_EQ(client.peerCommonName(), "second");
  }
  EXPECT_EQ(server->tlsLoadCount(), 2U);

  // Files and memory at once are refused; so is no pair at start.
  HttpServerOptions both = options;
  both.tls_cert_file = "/x.crt";
  both.tls_key_file = "/x.key";
  EXPECT_FALSE(HttpServer::start(both, echoHandler()).ok());
  HttpServerOptions none;
  none.tls_key_pair = [] { return std::shared_ptr<const TlsKeyPair>(); };
  EXPECT_FALSE(HttpServer::start(none, echoHandler()).ok());
}

TEST(HttpServer, ServesTlsAndReloadsChangedCertificates) {
  TempDir dir;
  const auto cert_file = dir.path() / "tls.crt";
  const auto key_file = dir.path() / "tls.key";
  const TestCertificate first = TestCertificate::make("first");
  first.writeTo(cert_file, key_file);

  testing::FakeClock clock;
  HttpServerOptions options;
  options.tls_cert_file = cert_file.string();
  options.tls_key_file = key_file.string();
  options.tls_reload_interval = 5s;
  options.clock = &clock;
  auto server = startServer(options, echoHandler());
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(server->tlsLoadCount(), 1U);
  {
    TestHttpClient client(server->port(), first.clientContext().get());
    EXPECT_EQ(client.peerCommonName(), "first");
    TestResponse response = client.send("GET", "/secure");
    EXPECT_EQ(response.status, 200);
    EXPECT_EQ(client.send("GET", "/again").status, 200);
  }

  // Rotate the files in place; make sure the timestamp moves.
  const TestCertificate second = TestCertificate::make("second");
  const auto old_time = std::filesystem::last_write_time(cert_file);
  second.writeTo(cert_file, key_file);
  std::filesystem::last_write_time(cert_file, old_time + 10s);
  std::filesystem::last_write_time(key_file, old_time + 10s);
  {
    // Within the check interval the old certificate is still used.
    TestHttpClient client(server->port(), first.clientContext().get());
    EXPECT_EQ(client.peerCommonName(), "first");
  }
  clock.advance(5s);
  {
    TestHttpClient client(server->port(), second.clientContext().get());
    EXPECT_EQ(client.peerCommonName(), "second");
    EXPECT_EQ(client.send("GET", "/").status, 200);
  }
  EXPECT_EQ(server->tlsLoadCount(), 2U);

  // A broken rotation keeps the last good certificate.
  std::ofstream(key_file, std::ios::trunc) << "not a key";
  std::filesystem::last_write_time(key_file, old_time + 20s);
  clock.advance(5s);
  {
    TestHttpClient client(server->port(), second.clientContext().get());
    EXPECT_EQ(client.peerCommonName(), "second");
  }
  EXPECT_EQ(server->tlsLoadCount(), 2U);
}

TEST(HttpServer, StartFailsOnBadTlsFilesAndBusyPorts) {
  TempDir dir;
  HttpServerOptions options;
  options.tls_cert_file = (dir.path() / "missing.crt").string();
  options.tls_key_file = (dir.path() / "missing.key").string();
  EXPECT_FALSE(HttpServer::start(options, echoHandler()).ok());
  options.tls_key_file.clear();
  EXPECT_FALSE(HttpServer::start(options, echoHandler()).ok());

  auto server = startServer({}, echoHandler());
  ASSERT_NE(server, nullptr);
  HttpServerOptions same;
  same.bind_address = "127.0.0.1:" + std::to_string(server->port());
  EXPECT_FALSE(HttpServer::start(same, echoHandler()).ok());
}

TEST(HttpServer, BindsEveryInterfaceWithAnEmptyHost) {
  StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::start({.bind_address = ":0"}, echoHandler());
  ASSERT_TRUE(server.ok()) << server.status().toString();
  TestHttpClient client((*server)->port());
  EXPECT_EQ(client.send("GET", "/").status, 200);
}

TEST(HttpServer, ParsesBindAddresses) {
  EXPECT_EQ(*parseBindAddress(":8443"), std::make_pair(std::string(), uint16_t{8443}));
  EXPECT_EQ(*parseBindAddress("127.0.0.1:0"),
            std::make_pair(std::string("127.0.0.1"), uint16_t{0}));
  EXPECT_EQ(*parseBindAddress("[::1]:80"), std::make_pair(std::string("::1"), uint16_t{80}));
  EXPECT_EQ(*parseBindAddress("localhost:65535"),
            std::make_pair(std::string("localhost"), uint16_t{65535}));
  for (const char* bad : {"", "8443", ":", ":65536", "host:x", "::1:80", "[::1]80", ":-1"}) {
    EXPECT_FALSE(parseBindAddress(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace rsc::controller::http
