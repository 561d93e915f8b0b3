// InventoryEndpoint: the handler on worker threads and held ?wait= pushes.
// Most tests call the endpoint's HttpServer::Handler directly (no sockets);
// one runs it behind a real HttpServer on loopback.
#include "controller/inventory/endpoint.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "test/controller/http/test_http_client.h"
#include "test/controller/inventory/fake_authenticator.h"
#include "test/fakes/fake_clock.h"

namespace rsc::controller::inventory {

using http::TestHttpClient;
using http::TestResponse;

using http::Admission;
using http::HttpRequest;
using http::HttpResponse;
using http::HttpServer;
using http::HttpServerOptions;
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr char kPool[] = R"({"allNodes": true, "devices": [{"name": "nic-0"}]})";

class InventoryEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handler_ = std::move(
        *InventoryHandler::create({.store = &store_, .authenticator = &auth_, .clock = &clock_}));
    endpoint_ = std::make_unique<InventoryEndpoint>(*handler_, clock_, 2);
    store_.setStatusListener(
        [this](const reconcile::PoolKey& key) { endpoint_->poolStatusChanged(key); });
  }
  void TearDown() override { endpoint_->stop(); }

  // Sends a request through the endpoint; the future holds the answer.
  std::future<HttpResponse> send(const std::string& method, const std::string& target,
                                 const std::string& body = kPool) {
    auto promise = std::make_shared<std::promise<HttpResponse>>();
    std::future<HttpResponse> future = promise->get_future();
    HttpRequest request;
    request.method = method;
    request.target = target;
    request.body = body;
    request.headers["authorization"] = "Bearer admin";
    request.headers["content-type"] = "application/json";
    endpoint_->httpHandler()(std::move(request),
                             [promise](HttpResponse r) { promise->set_value(std::move(r)); });
    return future;
  }

  void publish(const reconcile::PoolKey& key) {
    store_.updateStatus(key, [](reconcile::PoolStatus& s) {
      s.phase = reconcile::PoolPhase::kPublished;
      s.published_version = s.desired_version;
    });
  }

  // Blocking: a held push's deadline comes only when the test advances it.
  testing::FakeClock clock_{testing::FakeClock::Sleeps::kBlock};
  reconcile::DesiredStore store_{clock_};
  FakeAuthenticator auth_;
  std::unique_ptr<InventoryHandler> handler_;
  std::unique_ptr<InventoryEndpoint> endpoint_;
};

TEST_F(InventoryEndpointTest, AnswersOnAWorkerThread) {
  std::future<HttpResponse> answer = send("PUT", "/v1/drivers/nic.example.com/pools/p");
  ASSERT_EQ(answer.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(answer.get().status, 202);
  EXPECT_NE(store_.get({"nic.example.com", "p"}), nullptr);
  EXPECT_EQ(endpoint_->pendingCount(), 0U);
}

TEST_F(InventoryEndpointTest, HoldsAPushUntilItIsPublished) {
  std::future<HttpResponse> answer = send("PUT", "/v1/drivers/nic.example.com/pools/p?wait=60s");
  ASSERT_TRUE(endpoint_->waitIdleForTest(1));
  EXPECT_EQ(answer.wait_for(0s), std::future_status::timeout);

  // Another pool's publication does not answer it: once the endpoint has
  // looked at both changes, the push is still held and unanswered.
  store_.updateStatus({"nic.example.com", "other"}, [](reconcile::PoolStatus&) {});
  publish({"other.example.com", "p"});
  ASSERT_TRUE(endpoint_->waitIdleForTest(1));
  EXPECT_EQ(answer.wait_for(0s), std::future_status::timeout);

  publish({"nic.example.com", "p"});
  ASSERT_EQ(answer.wait_for(5s), std::future_status::ready);
  HttpResponse response = answer.get();
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(Json::parse(response.body).at("phase"), "Published");
  EXPECT_EQ(endpoint_->pendingCount(), 0U);
}

TEST_F(InventoryEndpointTest, AnswersAcceptedWhenTheWaitRunsOut) {
  std::future<HttpResponse> answer = send("PUT", "/v1/drivers/nic.example.com/pools/p?wait=50ms");
  ASSERT_TRUE(endpoint_->waitIdleForTest(1));
  ASSERT_TRUE(clock_.waitForSleepers(1)) << "a pool thread sleeps until the deadline";
  EXPECT_EQ(answer.wait_for(0s), std::future_status::timeout);
  clock_.advance(50ms);
  ASSERT_EQ(answer.wait_for(5s), std::future_status::ready);
  EXPECT_EQ(answer.get().status, 202);
  EXPECT_EQ(endpoint_->pendingCount(), 0U);
}

TEST_F(InventoryEndpointTest, StopAnswersHeldPushesAndRefusesNewOnes) {
  std::future<HttpResponse> first = send("PUT", "/v1/drivers/nic.example.com/pools/a?wait=60s");
  std::future<HttpResponse> second = send("PUT", "/v1/drivers/nic.example.com/pools/b?wait=60s");
  ASSERT_TRUE(endpoint_->waitIdleForTest(2));
  endpoint_->stop();
  ASSERT_EQ(first.wait_for(0s), std::future_status::ready);
  ASSERT_EQ(second.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(first.get().status, 202);
  EXPECT_EQ(second.get().status, 202);

  std::future<HttpResponse> late = send("GET", "/v1/drivers", "");
  ASSERT_EQ(late.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(late.get().status, 503);
}

// A request the handler answers without blocking is answered on the calling
// (I/O) thread, before the call returns; every other one on a worker.
TEST_F(InventoryEndpointTest, AnswersANoOpPushOnTheCallingThread) {
  const std::string target = "/v1/drivers/nic.example.com/pools/p";
  ASSERT_EQ(send("PUT", target).get().status, 202);
  publish({"nic.example.com", "p"});

  struct Answered {
    std::optional<HttpResponse> response;
    std::thread::id thread;
  };
  const auto push = [&](const std::string& body) {
    HttpRequest request;
    request.method = "PUT";
    request.target = target;
    request.body = body;
    request.headers["authorization"] = "Bearer admin";
    request.headers["content-type"] = "application/json";
    std::optional<Admission> admission;
    endpoint_->admitHandler()(request, [&](Admission a) { admission = std::move(a); });
    EXPECT_TRUE(admission.has_value()) << "cached credentials are checked on this thread";
    if (admission) request.admission = std::move(admission->state);
    auto answered = std::make_shared<std::promise<Answered>>();
    std::future<Answered> future = answered->get_future();
    endpoint_->httpHandler()(std::move(request), [answered](HttpResponse r) {
      answered->set_value({std::move(r), std::this_thread::get_id()});
    });
    return future;
  };

  std::future<Answered> same = push(kPool);
  ASSERT_EQ(same.wait_for(0s), std::future_status::ready);
  Answered now = same.get();
  EXPECT_EQ(now.thread, std::this_thread::get_id());
  EXPECT_EQ(now.response->status, 200);

  std::future<Answered> changed =
      push(R"({"allNodes": true, "devices": [{"name": "nic-0"}, {"name": "nic-1"}]})");
  ASSERT_EQ(changed.wait_for(5s), std::future_status::ready);
  Answered later = changed.get();
  EXPECT_NE(later.thread, std::this_thread::get_id());
  EXPECT_EQ(later.response->status, 202);

  // Credentials not cached: admission waits for a worker too.
  auth_.setUncached(true);
  std::promise<Admission> decided;
  HttpRequest head;
  head.method = "GET";
  head.target = target;
  head.headers["authorization"] = "Bearer admin";
  std::thread::id decided_on;
  endpoint_->admitHandler()(head, [&](Admission a) {
    decided_on = std::this_thread::get_id();
    decided.set_value(std::move(a));
  });
  std::future<Admission> admission = decided.get_future();
  ASSERT_EQ(admission.wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(admission.get().refusal.has_value());
  EXPECT_NE(decided_on, std::this_thread::get_id());
}

TEST_F(InventoryEndpointTest, HeldPushOverHttp) {
  HttpServerOptions options;
  options.bind_address = "127.0.0.1:0";
  StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::start(options, endpoint_->httpHandler());
  ASSERT_TRUE(server.ok()) << server.status().toString();

  std::future<TestResponse> answer = std::async(std::launch::async, [&] {
    TestHttpClient client((*server)->port());
    return client.send("PUT", "/v1/drivers/nic.example.com/pools/rack-1%2Fp?wait=30s", kPool,
                       {{"Authorization", "Bearer admin"}, {"Content-Type", "application/json"}});
  });
  ASSERT_TRUE(endpoint_->waitIdleForTest(1));
  publish({"nic.example.com", "rack-1/p"});
  ASSERT_EQ(answer.wait_for(5s), std::future_status::ready);
  TestResponse response = answer.get();
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(Json::parse(response.body).at("pool"), "rack-1/p");

  endpoint_->stop();
  (*server)->stop();
}

}  // namespace
}  // namespace rsc::controller::inventory
