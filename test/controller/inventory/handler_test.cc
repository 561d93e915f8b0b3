#include "controller/inventory/handler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test/controller/inventory/fake_authenticator.h"
#include "test/fakes/fake_clock.h"

namespace rsc::controller::inventory {

using http::Admission;
using http::HttpRequest;
using http::HttpResponse;
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kGpu[] = "gpu.example.com";

std::string gpuPool(const std::string& node, int devices = 2) {
  Json list = Json::array();
  for (int i = 0; i < devices; ++i) {
    list.push_back({{"name", "gpu-" + std::to_string(i)},
                    {"attributes", {{"model", {{"string", "H100"}}}}},
                    {"capacity", {{"memory", {{"value", "80Gi"}}}}}});
  }
  return Json({{"nodeName", node}, {"devices", list}}).dump();
}

// gpuPool() with a lease.
std::string leasedGpuPool(const std::string& node, int lease_seconds) {
  Json pool = Json::parse(gpuPool(node));
  pool["leaseSeconds"] = lease_seconds;
  return pool.dump();
}

std::string allNodesPool(int devices = 1) {
  Json list = Json::array();
  for (int i = 0; i < devices; ++i) list.push_back({{"name", "nic-" + std::to_string(i)}});
  return Json({{"allNodes", true}, {"devices", list}}).dump();
}

Json bodyOf(const HttpResponse& response) { return Json::parse(response.body); }

std::vector<std::string> detailFields(const HttpResponse& response) {
  std::vector<std::string> out;
  const Json body = bodyOf(response);
  for (const Json& d : body.at("details")) out.push_back(d.at("field"));
  return out;
}

// Answers every preview with one create, and records what it was asked.
class RecordingPreviewer : public reconcile::PoolPreviewer {
 public:
  StatusOr<reconcile::PoolPreview> preview(const reconcile::PoolKey& key,
                                           const reconcile::Pool* desired) override {
    asked.push_back(key.pool + (desired == nullptr
                                    ? " withdrawn"
                                    : " " + std::to_string(desired->devices.size()) + " devices"));
    if (!answer.ok()) return answer;
    reconcile::PoolPreview p;
    p.key = key;
    p.withdraw = desired == nullptr;
    p.generation = 2;
    p.live_generation = 1;
    p.generation_bumped = true;
    p.slice_count = 1;
    p.writes.push_back({reconcile::PlannedWrite::Verb::kUpdate, "slice-1", 0, {"spec.devices"}});
    return p;
  }
  std::vector<std::string> asked;
  Status answer;
};

class InventoryHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.setChangeListener([this](const reconcile::PoolKey&) { ++changes_; });
    InventoryHandlerOptions options;
    options.store = &store_;
    options.authenticator = &auth_;
    options.clock = &clock_;
    options.on_push = [this](std::string_view driver, int code) {
      pushes_.emplace_back(std::string(driver), code);
    };
    options.on_pool_body = [this](std::string_view, bool unchanged) {
      bodies_.push_back(unchanged ? "unchanged" : "decoded");
    };
    options.previewer = &previewer_;
    StatusOr<std::unique_ptr<InventoryHandler>> handler = InventoryHandler::create(options);
    ASSERT_TRUE(handler.ok()) << handler.status().toString();
    handler_ = std::move(*handler);
  }

  HttpRequest request(std::string method, std::string target, std::string body = "",
                      std::string token = "admin", std::string content_type = "application/json") {
    HttpRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.body = std::move(body);
    if (!token.empty()) r.headers["authorization"] = "Bearer " + token;
    if (!content_type.empty()) r.headers["content-type"] = content_type;
    return r;
  }

  HandlerResult call(std::string method, std::string target, std::string body = "",
                     std::string token = "admin", std::string content_type = "application/json") {
    return handler_->handle(request(std::move(method), std::move(target), std::move(body),
                                    std::move(token), std::move(content_type)));
  }

  // What the reconciler does once a pool is published.
  void publish(const reconcile::PoolKey& key, int64_t generation = 1) {
    store_.updateStatus(key, [&](reconcile::PoolStatus& s) {
      s.phase = reconcile::PoolPhase::kPublished;
      s.published_version = s.desired_version;
      s.published_generation = generation;
      s.slice_names = {"00000-" + key.driver + "-" + key.pool + "-abcde"};
    });
  }

  // Everything a request could change, as text.
  std::string snapshot() const {
    std::ostringstream out;
    for (const reconcile::PoolKey& key : store_.keys()) {
      auto desired = store_.get(key);
      out << key.toString() << " v" << desired->version << " lease "
          << store_.leaseDeadline(key)->time_since_epoch().count() << "\n";
    }
    for (const reconcile::PoolStatus& s : store_.statuses()) {
      out << s.key.toString() << " " << poolPhaseName(s.phase) << " " << s.desired_version << "/"
          << s.published_version << "\n";
    }
    out << "changes " << changes_ << "\n";
    return out.str();
  }

  testing::FakeClock clock_;
  reconcile::DesiredStore store_{clock_};
  FakeAuthenticator auth_;
  RecordingPreviewer previewer_;
  std::unique_ptr<InventoryHandler> handler_;
  int changes_ = 0;
  std::vector<std::pair<std::string, int>> pushes_;
  // How each pool body was taken, in order: "decoded" or "unchanged".
  std::vector<std::string> bodies_;
};

// ---- Pools: push, status, publication ---------------------------------------

// A pool whose counter sets cannot each share the slice of their consumers:
// `consumers` partitions of one GPU, or (`chained` > 0) a chain of `chained`
// counter sets, each device consuming two neighbours.
std::string counterPool(int consumers, int chained = 0) {
  auto set = [](const std::string& name) {
    return Json({{"name", name}, {"counters", {{"memory", {{"value", "80Gi"}}}}}});
  };
  auto use = [](const std::string& name) {
    return Json({{"counterSet", name}, {"counters", {{"memory", {{"value", "1Gi"}}}}}});
  };
  Json sets = Json::array();
  Json devices = Json::array();
  if (chained > 0) {
    for (int i = 0; i < chained; ++i) sets.push_back(set("set-" + std::to_string(i)));
    for (int i = 0; i + 1 < chained; ++i) {
      devices.push_back({{"name", "part-" + std::to_string(i)},
                         {"consumesCounters",
                          {use("set-" + std::to_string(i)), use("set-" + std::to_string(i + 1))}}});
    }
  } else {
    sets.push_back(set("gpu-0"));
    for (int i = 0; i < consumers; ++i) {
      devices.push_back(
          {{"name", "part-" + std::to_string(i)}, {"consumesCounters", {use("gpu-0")}}});
    }
  }
  return Json({{"nodeName", "node-a"}, {"sharedCounters", sets}, {"devices", devices}}).dump();
}

// Kubernetes 1.34 takes a counter set only in the slice of its consumers:
// once leading has learnt the server's release, a pool whose group of
// counter sets and consumers cannot fit one slice is refused at push time,
// naming the field and the release; before that it is accepted (and the
// reconcile reports the server's refusal).
TEST_F(InventoryHandlerTest, CounterGroupsTooLargeForOneSliceAreRefusedOnKubernetes134) {
  const std::string path = "/v1/drivers/gpu.example.com/pools/node-a";
  EXPECT_EQ(call("PUT", path, counterPool(65), "node-a").response.status, 202);
  store_.remove({kGpu, "node-a"});

  store_.setServerRelease({reconcile::CounterPlacement::kOwnSlices, "v1.35.0"});
  EXPECT_EQ(call("PUT", path, counterPool(65), "node-a").response.status, 202);
  store_.remove({kGpu, "node-a"});

  store_.setServerRelease({reconcile::CounterPlacement::kWithConsumers, "v1.34.2"});
  const std::string before = snapshot();
  HandlerResult devices = call("PUT", path, counterPool(65), "node-a");
  EXPECT_EQ(devices.response.status, 422) << devices.response.body;
  EXPECT_EQ(detailFields(devices.response),
            std::vector<std::string>{"devices[64].consumesCounters"});
  EXPECT_THAT(bodyOf(devices.response).at("details")[0].at("message").get<std::string>(),
              HasSubstr("Kubernetes 1.34.2 requires each counter set in the slice of the "
                        "devices that consume it"));
  HandlerResult sets = call("PUT", path, counterPool(0, 9), "node-a");
  EXPECT_EQ(sets.response.status, 422) << sets.response.body;
  EXPECT_EQ(detailFields(sets.response), std::vector<std::string>{"sharedCounters[8]"});
  HandlerResult driver =
      call("PUT", "/v1/drivers/gpu.example.com",
           Json({{"pools", {{"node-a", Json::parse(counterPool(65))}}}}).dump(), "node-a");
  EXPECT_EQ(driver.response.status, 422) << driver.response.body;
  ASSERT_EQ(detailFields(driver.response).size(), 1U);
  EXPECT_THAT(detailFields(driver.response)[0], HasSubstr("devices[64].consumesCounters"));
  EXPECT_EQ(snapshot(), before);

  // What fits one slice is taken.
  EXPECT_EQ(call("PUT", path, counterPool(64), "node-a").response.status, 202);
  EXPECT_EQ(call("PUT", path, counterPool(0, 8), "node-a").response.status, 202);
}

TEST_F(InventoryHandlerTest, PutPoolIsAcceptedThenPublished) {
  HandlerResult put =
      call("PUT", "/v1/drivers/gpu.example.com/pools/node-a", gpuPool("node-a"), "node-a");
  EXPECT_EQ(put.response.status, 202);
  EXPECT_FALSE(put.wait.has_value());
  EXPECT_EQ(put.response.content_type, "application/json");
  Json status = bodyOf(put.response);
  EXPECT_EQ(status.at("driver"), kGpu);
  EXPECT_EQ(status.at("pool"), "node-a");
  EXPECT_EQ(status.at("phase"), "Pending");
  EXPECT_EQ(status.at("lastPushTime"), "2026-01-01T00:00:00.000000Z");
  ASSERT_NE(store_.get({kGpu, "node-a"}), nullptr);
  EXPECT_EQ(store_.get({kGpu, "node-a"})->pool.devices.size(), 2U);

  publish({kGpu, "node-a"}, 3);
  HandlerResult get = call("GET", "/v1/drivers/gpu.example.com/pools/node-a", "", "node-a");
  EXPECT_EQ(get.response.status, 200);
  EXPECT_EQ(bodyOf(get.response).at("phase"), "Published");
  EXPECT_EQ(bodyOf(get.response).at("publishedGeneration"), 3);

  // The same content again is published already: 200 at once.
  HandlerResult again =
      call("PUT", "/v1/drivers/gpu.example.com/pools/node-a", gpuPool("node-a"), "node-a");
  EXPECT_EQ(again.response.status, 200);
  // A change is not.
  HandlerResult changed =
      call("PUT", "/v1/drivers/gpu.example.com/pools/node-a", gpuPool("node-a", 3), "node-a");
  EXPECT_EQ(changed.response.status, 202);
  EXPECT_THAT(pushes_, ElementsAre(std::pair<std::string, int>(kGpu, 202),
                                   std::pair<std::string, int>(kGpu, 200),
                                   std::pair<std::string, int>(kGpu, 202)));
}

TEST_F(InventoryHandlerTest, WaitHoldsThePushUntilPublished) {
  HandlerResult put =
      call("PUT", "/v1/drivers/gpu.example.com/pools/node-a?wait=10s", gpuPool("node-a"), "node-a");
  ASSERT_TRUE(put.wait.has_value());
  EXPECT_EQ(put.wait->deadline, clock_.now() + std::chrono::seconds(10));
  EXPECT_EQ(put.wait->kind, PendingWait::Kind::kPool);
  EXPECT_TRUE(pushes_.empty());  // counted when answered
  EXPECT_FALSE(handler_->done(*put.wait));
  EXPECT_EQ(handler_->render(*put.wait).status, 202);

  publish({kGpu, "node-a"});
  EXPECT_TRUE(handler_->done(*put.wait));
  HttpResponse answer = handler_->render(*put.wait);
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(bodyOf(answer).at("phase"), "Published");
  EXPECT_EQ(pushes_.back(), std::make_pair(std::string(kGpu), 200));
}

TEST_F(InventoryHandlerTest, WaitEndsWith422WhenTheApiServerRefusedThePool) {
  HandlerResult put =
      call("PUT", "/v1/drivers/gpu.example.com/pools/node-a?wait=10s", gpuPool("node-a"), "node-a");
  ASSERT_TRUE(put.wait.has_value());
  store_.updateStatus({kGpu, "node-a"}, [](reconcile::PoolStatus& s) {
    s.phase = reconcile::PoolPhase::kFailed;
    s.rejected_version = s.desired_version;
    s.last_error = Status(StatusCode::kInvalidArgument,
                          "spec.devices[1].attributes[cores]: Invalid value: \"\"");
  });
  EXPECT_TRUE(handler_->done(*put.wait));
  HttpResponse answer = handler_->render(*put.wait);
  EXPECT_EQ(answer.status, 422);
  const Json body = bodyOf(answer);
  EXPECT_THAT(body.at("message").get<std::string>(),
              HasSubstr("the API server refused the slices of pool \"node-a\""));
  ASSERT_EQ(body.at("details").size(), 1u);
  EXPECT_EQ(body.at("details")[0].at("field"), "pools[node-a]");
  EXPECT_THAT(body.at("details")[0].at("message").get<std::string>(),
              HasSubstr("attributes[cores]"));
  EXPECT_EQ(pushes_.back(), std::make_pair(std::string(kGpu), 422));
}

TEST_F(InventoryHandlerTest, WaitOnAPublishedPushAnswersAtOnce) {
  call("PUT", "/v1/drivers/gpu.example.com/pools/node-a", gpuPool("node-a"), "node-a");
  publish({kGpu, "node-a"});
  HandlerResult put =
      call("PUT", "/v1/drivers/gpu.example.com/pools/node-a?wait=10s", gpuPool("node-a"), "node-a");
  EXPECT_FALSE(put.wait.has_value());
  EXPECT_EQ(put.response.status, 200);
}

TEST_F(InventoryHandlerTest, WaitIsCappedAndParsedLikeGoDurations) {
  HandlerResult capped =
      call("PUT", "/v1/drivers/gpu.example.com/pools/node-a?wait=10m", gpuPool("node-a"), "node-a");
  ASSERT_TRUE(capped.wait.has_value());
  EXPECT_EQ(capped.wait->deadline, clock_.now() + kDefaultMaxWait);

  HandlerResult zero = call("PUT", "/v1/drivers/gpu.example.com/pools/node-a?wait=0",
                            gpuPool("node-a", 3), "node-a");
  EXPECT_FALSE(zero.wait.has_value());
  EXPECT_EQ(zero.response.status, 202);

  EXPECT_EQ(*parseWaitDuration("1m30s"), std::chrono::seconds(90));
  EXPECT_EQ(*parseWaitDuration("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_EQ(*parseWaitDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*parseWaitDuration("0"), Clock::Duration::zero());
  for (const char* bad : {"", "10", "s", "-1s", "10h", "1x", "1s2", ".s", "10 s"}) {
    EXPECT_EQ(parseWaitDuration(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(InventoryHandlerTest, PoolNamesMayContainEncodedSlashes) {
  HandlerResult put =
      call("PUT", "/v1/drivers/nic.example.com/pools/rack-1%2Ffabric-1", allNodesPool());
  EXPECT_EQ(put.response.status, 202);
  EXPECT_NE(store_.get({"nic.example.com", "rack-1/fabric-1"}), nullptr);
  HandlerResult get = call("GET", "/v1/drivers/nic.example.com/pools/rack-1%2ffabric-1");
  EXPECT_EQ(get.response.status, 200);
  EXPECT_EQ(bodyOf(get.response).at("pool"), "rack-1/fabric-1");
  // A raw slash is a different path.
  EXPECT_EQ(call("GET", "/v1/drivers/nic.example.com/pools/rack-1/fabric-1").response.status, 404);
}

TEST_F(InventoryHandlerTest, DeleteWithdrawsThePool) {
  call("PUT", "/v1/drivers/gpu.example.com/pools/node-a", gpuPool("node-a"), "node-a");
  publish({kGpu, "node-a"});

  HandlerResult del =
      call("DELETE", "/v1/drivers/gpu.example.com/pools/node-a?wait=5s", "", "node-a", "");
  ASSERT_TRUE(del.wait.has_value());
  EXPECT_EQ(del.response.status, 202);
  EXPECT_EQ(bodyOf(del.response).at("phase"), "Withdrawing");
  EXPECT_EQ(store_.get({kGpu, "node-a"}), nullptr);

  // Deleting again while the slices go is accepted again.
  EXPECT_EQ(
      call("DELETE", "/v1/drivers/gpu.example.com/pools/node-a", "", "node-a", "").response.status,
      202);

  // The reconciler deleted the slices and forgot the pool.
  EXPECT_FALSE(handler_->done(*del.wait));
  store_.eraseStatus({kGpu, "node-a"});
  EXPECT_TRUE(handler_->done(*del.wait));
  HttpResponse answer = handler_->render(*del.wait);
  EXPECT_EQ(answer.status, 200);
  EXPECT_EQ(bodyOf(answer).at("phase"), "Withdrawn");

  EXPECT_EQ(
      call("DELETE", "/v1/drivers/gpu.example.com/pools/node-a", "", "node-a", "").response.status,
      404);
  EXPECT_EQ(call("GET", "/v1/drivers/gpu.example.com/pools/node-a").response.status, 404);
}

TEST_F(InventoryHandlerTest, RenewExtendsTheLease) {
  call("PUT", "/v1/drivers/gpu.example.com/pools/node-a", leasedGpuPool("node-a", 30), "node-a");
  const Clock::TimePoint first = *store_.leaseDeadline({kGpu, "node-a"});
  const std::shared_ptr<const reconcile::DesiredPool> content = store_.get({kGpu, "node-a"});
  EXPECT_EQ(first, clock_.now() + std::chrono::seconds(30));

  clock_.advance(std::chrono::seconds(20));
  HandlerResult renew =
      call("POST", "/v1/drivers/gpu.example.com/pools/node-a/renew", "", "node-a", "");
  EXPECT_EQ(renew.response.status, 202);  // renewed; not published yet
  EXPECT_EQ(store_.leaseDeadline({kGpu, "node-a"}), clock_.now() + std::chrono::seconds(30));
  // A renewal moves the lease, not the content.
  EXPECT_EQ(store_.get({kGpu, "node-a"}), content);
  EXPECT_EQ(bodyOf(renew.response).at("leaseSeconds"), 30);

  publish({kGpu, "node-a"});
  EXPECT_EQ(call("POST", "/v1/drivers/gpu.example.com/pools/node-a/renew", "", "node-a", "")
                .response.status,
            200);
  EXPECT_EQ(call("POST", "/v1/drivers/gpu.example.com/pools/node-b/renew", "", "node-b", "")
                .response.status,
            404);
}

// ---- The same body again: taken without decoding ----------------------------

// Everything of an answer a driver sees.
std::string answerText(const HandlerResult& r) {
  std::ostringstream out;
  out << r.response.status << " " << r.response.content_type << "\n";
  for (const auto& [name, value] : r.response.headers) out << name << ": " << value << "\n";
  out << r.response.body << "\n";
  if (r.wait) {
    out << "held until " << r.wait->deadline.time_since_epoch().count() << " for";
    for (const auto& [pool, version] : r.wait->published) out << " " << pool << "@" << version;
  }
  return out.str();
}

// The same pool content as `body`, in other bytes: decoded in full.
std::string otherBytes(const std::string& body) { return body + " "; }

TEST_F(InventoryHandlerTest, TheSameBodyIsTakenUndecodedAndAnsweredAsADecodedOne) {
  const std::string body = gpuPool("node-a", 128);
  const std::string target = "/v1/drivers/gpu.example.com/pools/node-a";
  ASSERT_EQ(call("PUT", target, body, "node-a").response.status, 202);
  EXPECT_THAT(bodies_, ElementsAre("decoded"));
  const auto content = store_.get({kGpu, "node-a"});

  // Not published yet (202), published (200), and held by ?wait: each
  // answer equals the one the same content in other bytes gets.
  for (const bool published : {false, true}) {
    if (published) publish({kGpu, "node-a"});
    for (const char* query : {"", "?wait=10s"}) {
      clock_.advance(std::chrono::seconds(1));
      bodies_.clear();
      const HandlerResult decoded = call("PUT", target + query, otherBytes(body), "node-a");
      const std::string after_decoded = snapshot();
      const HandlerResult unchanged = call("PUT", target + query, otherBytes(body), "node-a");
      EXPECT_THAT(bodies_, ElementsAre("decoded", "unchanged"));
      EXPECT_EQ(answerText(unchanged), answerText(decoded));
      EXPECT_EQ(unchanged.response.status, published ? 200 : 202);
      EXPECT_EQ(unchanged.wait.has_value(), !published && *query != '\0');
      EXPECT_EQ(snapshot(), after_decoded);
      // The first body stands for the content again once pushed again.
      bodies_.clear();
      EXPECT_EQ(answerText(call("PUT", target + query, body, "node-a")), answerText(decoded));
      EXPECT_EQ(answerText(call("PUT", target + query, body, "node-a")), answerText(decoded));
      EXPECT_THAT(bodies_, ElementsAre("decoded", "unchanged"));
    }
  }
  // Equal content is kept, never copied; counted like any push; no reconcile.
  EXPECT_EQ(store_.get({kGpu, "node-a"}), content);
  EXPECT_EQ(changes_, 1);
  EXPECT_EQ(pushes_.size(), 13u);  // held answers are counted when rendered
  EXPECT_EQ(pushes_.back(), std::make_pair(std::string(kGpu), 200));
}

TEST_F(InventoryHandlerTest, TheSameBodyRecordsThePushTime) {
  const std::string target = "/v1/drivers/gpu.example.com/pools/node-a";
  call("PUT", target, gpuPool("node-a"), "node-a");
  clock_.advance(std::chrono::seconds(5));
  HandlerResult again = call("PUT", target, gpuPool("node-a"), "node-a");
  EXPECT_THAT(bodies_, ElementsAre("decoded", "unchanged"));
  EXPECT_EQ(bodyOf(again.response).at("lastPushTime"), "2026-01-01T00:00:05.000000Z");
}

TEST_F(InventoryHandlerTest, TheSameBodyFromAnotherNodeIsRefusedAsADecodedOne) {
  const std::string spread =
      R"({"perDeviceNodeSelection": true, "devices": [{"name": "gpu-0", "nodeName": "node-a"},
          {"name": "gpu-1", "nodeName": "node-a"}]})";
  for (const auto& [pool, body] : std::vector<std::pair<std::string, std::string>>{
           {"node-a", gpuPool("node-a")}, {"spread", spread}}) {
    SCOPED_TRACE(pool);
    const std::string target = "/v1/drivers/gpu.example.com/pools/" + pool;
    ASSERT_EQ(call("PUT", target, body, "node-a").response.status, 202);
    const std::string before = snapshot();
    bodies_.clear();
    const HandlerResult unchanged = call("PUT", target, body, "node-b");
    const HandlerResult decoded = call("PUT", target, otherBytes(body), "node-b");
    EXPECT_THAT(bodies_, ElementsAre("unchanged", "decoded"));
    EXPECT_EQ(unchanged.response.status, 403);
    EXPECT_EQ(answerText(unchanged), answerText(decoded));
    EXPECT_EQ(
        detailFields(unchanged.response),
        (std::vector<std::string>{pool == "spread" ? "devices[0].nodeName" : "nodeName", ""}));
    EXPECT_EQ(snapshot(), before);
    EXPECT_EQ(pushes_.back(), std::make_pair(std::string(kGpu), 403));
    // The node the pool is on still may.
    EXPECT_EQ(call("PUT", target, body, "node-a").response.status, 202);
    EXPECT_EQ(bodies_.back(), "unchanged");
  }
}

TEST_F(InventoryHandlerTest, AChangedBodyIsDecoded) {
  const std::string target = "/v1/drivers/gpu.example.com/pools/node-a";
  call("PUT", target, gpuPool("node-a", 2), "node-a");
  const uint64_t first = store_.get({kGpu, "node-a"})->version;
  call("PUT", target, gpuPool("node-a", 3), "node-a");
  EXPECT_GT(store_.get({kGpu, "node-a"})->version, first);
  EXPECT_EQ(store_.get({kGpu, "node-a"})->pool.devices.size(), 3u);
  // The first body is not the body of the content now.
  call("PUT", target, gpuPool("node-a", 2), "node-a");
  EXPECT_EQ(store_.get({kGpu, "node-a"})->pool.devices.size(), 2u);
  EXPECT_THAT(bodies_, ElementsAre("decoded", "decoded", "decoded"));
  EXPECT_EQ(changes_, 3);
}

TEST_F(InventoryHandlerTest, TheSameBodyRenewsTheLeaseWithoutCopyingThePool) {
  const std::string body = leasedGpuPool("node-a", 30);
  const std::string target = "/v1/drivers/gpu.example.com/pools/node-a";
  call("PUT", target, body, "node-a");
  const auto content = store_.get({kGpu, "node-a"});
  for (int i = 0; i < 3; ++i) {
    clock_.advance(std::chrono::seconds(25));
    EXPECT_EQ(call("PUT", target, body, "node-a").response.status, 202);
    EXPECT_EQ(store_.leaseDeadline({kGpu, "node-a"}), clock_.now() + std::chrono::seconds(30));
  }
  clock_.advance(std::chrono::seconds(25));
  EXPECT_TRUE(store_.expireLeases().empty());
  EXPECT_EQ(store_.get({kGpu, "node-a"}), content);
  // A renewal keeps the content too.
  call("POST", target + "/renew", "", "node-a", "");
  EXPECT_EQ(store_.get({kGpu, "node-a"}), content);
  EXPECT_THAT(bodies_, ElementsAre("decoded", "unchanged", "unchanged", "unchanged"));
  EXPECT_EQ(changes_, 1);
}

TEST_F(InventoryHandlerTest, AfterAWithdrawalTheSameBodyIsDecodedAgain) {
  const std::string body = leasedGpuPool("node-a", 30);
  const std::string target = "/v1/drivers/gpu.example.com/pools/node-a";
  // Withdrawn by DELETE.
  call("PUT", target, body, "node-a");
  ASSERT_EQ(call("DELETE", target, "", "node-a", "").response.status, 202);
  HandlerResult again = call("PUT", target, body, "node-a");
  EXPECT_EQ(again.response.status, 202);
  EXPECT_EQ(bodyOf(again.response).at("phase"), "Pending");
  ASSERT_NE(store_.get({kGpu, "node-a"}), nullptr);
  // Withdrawn because the lease ran out.
  clock_.advance(std::chrono::seconds(31));
  ASSERT_EQ(store_.expireLeases().size(), 1u);
  EXPECT_EQ(call("PUT", target, body, "node-a").response.status, 202);
  ASSERT_NE(store_.get({kGpu, "node-a"}), nullptr);
  EXPECT_THAT(bodies_, ElementsAre("decoded", "decoded", "decoded"));
  EXPECT_EQ(changes_, 5);  // put, withdrawn, put, expired, put
}

TEST_F(InventoryHandlerTest, ADriverPutThatChangesThePoolDropsItsBody) {
  const std::string target = "/v1/drivers/gpu.example.com/pools/node-a";
  const std::string body = gpuPool("node-a");
  call("PUT", target, body, "node-a");
  // The same content through the driver's PUT: the body still stands for it.
  Json same = {{"pools", {{"node-a", Json::parse(body)}}}};
  ASSERT_EQ(call("PUT", "/v1/drivers/gpu.example.com", same.dump(), "node-a").response.status, 202);
  call("PUT", target, body, "node-a");
  // Other content: it does not.
  Json other = {{"pools", {{"node-a", Json::parse(gpuPool("node-a", 3))}}}};
  ASSERT_EQ(call("PUT", "/v1/drivers/gpu.example.com", other.dump(), "node-a").response.status,
            202);
  call("PUT", target, body, "node-a");
  EXPECT_EQ(store_.get({kGpu, "node-a"})->pool.devices.size(), 2u);
  EXPECT_THAT(bodies_, ElementsAre("decoded", "unchanged", "decoded"));
}

TEST_F(InventoryHandlerTest, ContentTheApiServerRefusedIsRefusedAgainWithoutDecoding) {
  const std::string target = "/v1/drivers/gpu.example.com/pools/node-a";
  const std::string body = gpuPool("node-a");
  call("PUT", target, body, "node-a");
  store_.updateStatus({kGpu, "node-a"}, [](reconcile::PoolStatus& s) {
    s.phase = reconcile::PoolPhase::kFailed;
    s.rejected_version = s.desired_version;
    s.last_error = Status(StatusCode::kInvalidArgument, "spec.devices[0]: Invalid value");
  });
  bodies_.clear();
  const HandlerResult decoded = call("PUT", target + "?wait=10s", otherBytes(body), "node-a");
  const HandlerResult unchanged = call("PUT", target + "?wait=10s", otherBytes(body), "node-a");
  EXPECT_THAT(bodies_, ElementsAre("decoded", "unchanged"));
  EXPECT_EQ(unchanged.response.status, 422);
  EXPECT_EQ(answerText(unchanged), answerText(decoded));
  EXPECT_EQ(changes_, 1);  // not reconciled again
}

// ---- Whole drivers ----------------------------------------------------------

TEST_F(InventoryHandlerTest, PutDriverReplacesEveryPool) {
  call("PUT", "/v1/drivers/nic.example.com/pools/old", allNodesPool());
  call("PUT", "/v1/drivers/nic.example.com/pools/kept", allNodesPool());
  publish({"nic.example.com", "old"});
  publish({"nic.example.com", "kept"});

  Json body = {
      {"pools", {{"kept", Json::parse(allNodesPool(2))}, {"new", Json::parse(allNodesPool())}}}};
  HandlerResult put = call("PUT", "/v1/drivers/nic.example.com?wait=30s", body.dump());
  ASSERT_TRUE(put.wait.has_value());
  EXPECT_EQ(put.response.status, 202);
  EXPECT_EQ(put.wait->kind, PendingWait::Kind::kDriver);
  EXPECT_THAT(put.wait->withdrawn, ElementsAre("old"));
  const Json answer = bodyOf(put.response);
  EXPECT_EQ(answer.at("driver"), "nic.example.com");
  std::vector<std::string> phases;
  for (const Json& p : answer.at("pools"))
    phases.push_back(p.at("pool").get<std::string>() + "=" + p.at("phase").get<std::string>());
  EXPECT_THAT(phases, ElementsAre("kept=Pending", "new=Pending", "old=Withdrawing"));
  EXPECT_EQ(store_.get({"nic.example.com", "old"}), nullptr);

  publish({"nic.example.com", "kept"});
  publish({"nic.example.com", "new"});
  EXPECT_FALSE(handler_->done(*put.wait));  // "old" still has slices
  store_.eraseStatus({"nic.example.com", "old"});
  EXPECT_TRUE(handler_->done(*put.wait));
  HttpResponse done = handler_->render(*put.wait);
  EXPECT_EQ(done.status, 200);
  EXPECT_EQ(bodyOf(done).at("pools").size(), 3U);
  EXPECT_EQ(bodyOf(done).at("pools")[2].at("phase"), "Withdrawn");
}

TEST_F(InventoryHandlerTest, GetDriverAndListDrivers) {
  call("PUT", "/v1/drivers/gpu.example.com/pools/node-a", gpuPool("node-a"), "node-a");
  call("PUT", "/v1/drivers/gpu.example.com/pools/node-b", gpuPool("node-b"), "node-b");
  call("PUT", "/v1/drivers/nic.example.com/pools/fabric-1", allNodesPool());

  HandlerResult driver = call("GET", "/v1/drivers/gpu.example.com");
  EXPECT_EQ(driver.response.status, 200);
  EXPECT_EQ(bodyOf(driver.response).at("pools").size(), 2U);
  EXPECT_EQ(bodyOf(call("GET", "/v1/drivers/none.example.com").response),
            Json::parse(R"({"driver": "none.example.com", "pools": []})"));

  HandlerResult all = call("GET", "/v1/drivers");
  EXPECT_EQ(all.response.status, 200);
  const Json drivers = bodyOf(all.response).at("drivers");
  ASSERT_EQ(drivers.size(), 2U);
  EXPECT_EQ(drivers[0].at("driver"), kGpu);
  EXPECT_EQ(drivers[0].at("pools").size(), 2U);
  EXPECT_EQ(drivers[1].at("driver"), "nic.example.com");
}

TEST_F(InventoryHandlerTest, ReadsAndWritesNeedTheirVerbs) {
  call("PUT", "/v1/drivers/gpu.example.com/pools/node-a", gpuPool("node-a"), "node-a");
  call("GET", "/v1/drivers/gpu.example.com/pools/node-a");
  call("GET", "/v1/drivers/gpu.example.com");
  call("GET", "/v1/drivers");
  call("POST", "/v1/drivers/gpu.example.com/pools/node-a/renew", "", "node-a", "");
  call("DELETE", "/v1/drivers/gpu.example.com/pools/node-a", "", "node-a", "");
  std::vector<std::string> seen;
  for (const auto& c : auth_.checks()) seen.push_back(c.verb + " " + c.driver);
  EXPECT_THAT(seen,
              ElementsAre("publish gpu.example.com", "get gpu.example.com", "get gpu.example.com",
                          "list ", "publish gpu.example.com", "publish gpu.example.com"));
}

// The driver name of a push becomes a metric label only once its caller is
// authenticated and authorized for that driver: anyone may put any name in
// a path.
TEST_F(InventoryHandlerTest, OnlyAuthorizedPushesNameTheirDriver) {
  const size_t before = pushes_.size();
  call("PUT", "/v1/drivers/invented-1.example.com/pools/p", allNodesPool(), "stolen");
  auth_.deny("publish", "denied.example.com");
  call("PUT", "/v1/drivers/denied.example.com/pools/p", allNodesPool());
  call("PUT", "/v1/drivers/Not_A_Name/pools/p", allNodesPool());
  call("PUT", "/v1/drivers/gpu.example.com/pools/p", allNodesPool());
  ASSERT_EQ(pushes_.size(), before + 4);
  EXPECT_THAT(
      std::vector(pushes_.begin() + before, pushes_.end()),
      ElementsAre(std::pair<std::string, int>("", 401), std::pair<std::string, int>("", 403),
                  std::pair<std::string, int>("", 422), std::pair<std::string, int>(kGpu, 202)));
}

TEST_F(InventoryHandlerTest, LeaderIdentityIsReported) {
  handler_->setLeaderHooks({.is_leader = [] { return true; },
                            .leader_identity = [] { return std::string("replica-7"); },
                            .forward = nullptr});
  HandlerResult put = call("PUT", "/v1/drivers/nic.example.com/pools/p", allNodesPool());
  EXPECT_EQ(bodyOf(put.response).at("leader"), "replica-7");
}

TEST_F(InventoryHandlerTest, FollowerForwardsToTheLeader) {
  std::vector<std::string> forwarded;
  handler_->setLeaderHooks({.is_leader = [] { return false; },
                            .leader_identity = nullptr,
                            .forward = [&](const HttpRequest& r) -> std::optional<HttpResponse> {
                              forwarded.push_back(r.method + " " + r.target);
                              HttpResponse answer;
                              answer.status = 200;
                              answer.body = "{\"from\": \"leader\"}";
                              return answer;
                            }});
  HandlerResult put = call("PUT", "/v1/drivers/nic.example.com/pools/p?wait=1s", allNodesPool());
  EXPECT_EQ(put.response.status, 200);
  EXPECT_EQ(bodyOf(put.response).at("from"), "leader");
  EXPECT_THAT(forwarded, ElementsAre("PUT /v1/drivers/nic.example.com/pools/p?wait=1s"));
  EXPECT_TRUE(store_.keys().empty());
  // The document is served by every replica.
  EXPECT_EQ(call("GET", "/openapi.json").response.status, 200);
  EXPECT_EQ(forwarded.size(), 1U);
}

// ---- Errors: code, field paths, and nothing changed --------------------------

struct ErrorCase {
  std::string name;
  std::string method;
  std::string target;
  std::string body;
  std::string token;
  std::string content_type;
  int code;
  std::vector<std::string> fields;  // expected detail fields, when not empty
};

void PrintTo(const ErrorCase& c, std::ostream* os) { *os << c.name; }

class InventoryHandlerErrors : public InventoryHandlerTest,
                               public ::testing::WithParamInterface<ErrorCase> {};

TEST_P(InventoryHandlerErrors, AnswersWithTheCodeAndChangesNothing) {
  // Two node pools and a cluster-wide one exist.
  ASSERT_EQ(call("PUT", "/v1/drivers/gpu.example.com/pools/node-a", gpuPool("node-a"), "node-a")
                .response.status,
            202);
  ASSERT_EQ(call("PUT", "/v1/drivers/gpu.example.com/pools/node-b", gpuPool("node-b"), "node-b")
                .response.status,
            202);
  ASSERT_EQ(call("PUT", "/v1/drivers/gpu.example.com/pools/shared", allNodesPool()).response.status,
            202);
  auth_.deny("publish", "denied.example.com");
  const std::string before = snapshot();
  const size_t pushes_before = pushes_.size();

  const ErrorCase& c = GetParam();
  HandlerResult result = call(c.method, c.target, c.body, c.token, c.content_type);
  EXPECT_EQ(result.response.status, c.code) << result.response.body;
  EXPECT_FALSE(result.wait.has_value());
  ASSERT_EQ(result.response.content_type, "application/json");
  const Json error = bodyOf(result.response);
  EXPECT_EQ(error.at("code"), c.code);
  EXPECT_TRUE(error.at("reason").is_string());
  EXPECT_FALSE(error.at("message").get<std::string>().empty());
  if (!c.fields.empty()) {
    EXPECT_EQ(detailFields(result.response), c.fields);
  }
  EXPECT_EQ(snapshot(), before);
  if (c.method != "GET" && c.code != 405) {
    // Every answered push is counted with its code, refused ones too.
    ASSERT_EQ(pushes_.size(), pushes_before + 1);
    EXPECT_EQ(pushes_.back().second, c.code);
    // A name is a label only once its caller is authorized for it.
    if (c.code == 401) {
      EXPECT_EQ(pushes_.back().first, "");
    }
  }
}

std::string invalidDevicePool() {
  return R"({"nodeName": "node-a", "devices": [{"name": "GPU_0"}, {"name": "gpu-1",
            "attributes": {"model": {"string": "x", "int": 1}}}]})";
}

const char kPoolA[] = "/v1/drivers/gpu.example.com/pools/node-a";

// A taint's `valu` and a device's `atributes` (issue 12, finding 6).
const char kTypoPool[] = R"({"nodeName": "node-a", "devices": [
    {"name": "gpu-0", "atributes": {"model": {"string": "A100"}}},
    {"name": "gpu-1", "taints": [{"key": "k", "valu": "v", "effect": "NoSchedule"}]}]})";

INSTANTIATE_TEST_SUITE_P(
    Table, InventoryHandlerErrors,
    ::testing::ValuesIn(std::vector<ErrorCase>{
        {"NotJson", "PUT", kPoolA, "{", "node-a", "application/json", 400, {}},
        {"UnknownField",
         "PUT",
         kPoolA,
         R"({"nodeName": "node-a", "nodeNmae": "x"})",
         "node-a",
         "application/json",
         400,
         {"nodeNmae"}},
        {"WrongType",
         "PUT",
         kPoolA,
         R"({"nodeName": "node-a", "devices": {}})",
         "node-a",
         "application/json",
         400,
         {"devices"}},
        {"InvalidDevices",
         "PUT",
         kPoolA,
         invalidDevicePool(),
         "node-a",
         "application/json",
         422,
         {"devices[0].name", "devices[1].attributes[\"model\"]"}},
        {"TextPlain", "PUT", kPoolA, gpuPool("node-a"), "node-a", "text/plain", 415, {}},
        {"NoContentType", "PUT", kPoolA, gpuPool("node-a"), "node-a", "", 415, {}},
        {"NoToken", "PUT", kPoolA, gpuPool("node-a"), "", "application/json", 401, {}},
        {"BadToken", "PUT", kPoolA, gpuPool("node-a"), "stolen", "application/json", 401, {}},
        {"OtherNodesPool",
         "PUT",
         kPoolA,
         gpuPool("node-a"),
         "node-b",
         "application/json",
         403,
         {"nodeName", ""}},
        {"NodeTokenClaimsAnotherNode",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/node-b",
         gpuPool("node-a"),
         "node-a",
         "application/json",
         403,
         {""}},
        {"CentralTokenNodePool",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/node-c",
         gpuPool("node-c"),
         "admin",
         "application/json",
         403,
         {"nodeName"}},
        {"NodeTokenClusterPool",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/shared",
         allNodesPool(),
         "node-a",
         "application/json",
         403,
         {"allNodes", ""}},
        {"NodeTokenNodeSelectorPool",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/selected",
         R"({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone",
            "operator": "In", "values": ["a"]}]}]}, "devices": [{"name": "nic-0"}]})",
         "node-a",
         "application/json",
         403,
         {"nodeSelector"}},
        {"PerDeviceNodeOfAnotherNode",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/spread",
         R"({"perDeviceNodeSelection": true, "devices": [{"name": "gpu-0", "nodeName": "node-a"},
            {"name": "gpu-1", "nodeName": "node-b"}]})",
         "node-a",
         "application/json",
         403,
         {"devices[1].nodeName"}},
        {"CentralTokenPerDeviceNodes",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/spread",
         R"({"perDeviceNodeSelection": true, "slices": [{"devices": [{"name": "gpu-0",
            "allNodes": true}, {"name": "gpu-1", "nodeName": "node-b"}]}]})",
         "admin",
         "application/json",
         403,
         {"slices[0].devices[1].nodeName"}},
        {"DriverPerDeviceNodeOfAnotherNode",
         "PUT",
         "/v1/drivers/nic.example.com",
         R"({"pools": {"p": {"perDeviceNodeSelection": true, "devices": [{"name": "nic-0",
            "nodeName": "node-b"}]}}})",
         "admin",
         "application/json",
         403,
         {"pools[\"p\"].devices[0].nodeName"}},
        {"RbacDenied",
         "PUT",
         "/v1/drivers/denied.example.com/pools/p",
         allNodesPool(),
         "admin",
         "application/json",
         403,
         {}},
        {"BadDriverName",
         "PUT",
         "/v1/drivers/Bad_Driver/pools/p",
         allNodesPool(),
         "admin",
         "application/json",
         422,
         {"driver"}},
        {"BadPoolName",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/Node_A",
         allNodesPool(),
         "admin",
         "application/json",
         422,
         {"pool"}},
        {"BadWait",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/node-a?wait=soon",
         gpuPool("node-a"),
         "node-a",
         "application/json",
         400,
         {"wait"}},
        {"UnknownQuery",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/node-a?dryRun=1",
         gpuPool("node-a"),
         "node-a",
         "application/json",
         400,
         {"dryRun"}},
        {"WaitOnRead",
         "GET",
         "/v1/drivers/gpu.example.com?wait=1s",
         "",
         "admin",
         "",
         400,
         {"wait"}},
        {"BadEscape",
         "PUT",
         "/v1/drivers/gpu.example.com/pools/a%ZZ",
         allNodesPool(),
         "admin",
         "application/json",
         400,
         {}},
        {"MethodNotAllowed",
         "PATCH",
         kPoolA,
         gpuPool("node-a"),
         "node-a",
         "application/json",
         405,
         {}},
        {"UnknownPath", "GET", "/v2/drivers", "", "admin", "", 404, {}},
        {"TrailingSlash", "GET", "/v1/drivers/", "", "admin", "", 404, {}},
        {"UnknownPool",
         "GET",
         "/v1/drivers/gpu.example.com/pools/node-z",
         "",
         "admin",
         "",
         404,
         {}},
        {"DeleteUnknown",
         "DELETE",
         "/v1/drivers/gpu.example.com/pools/node-z",
         "",
         "admin",
         "",
         404,
         {}},
        {"DeleteOtherNodesPool", "DELETE", kPoolA, "", "node-b", "", 403, {}},
        {"RenewUnknown",
         "POST",
         "/v1/drivers/gpu.example.com/pools/node-z/renew",
         "",
         "admin",
         "",
         404,
         {}},
        {"RenewNodePoolCentrally",
         "POST",
         "/v1/drivers/gpu.example.com/pools/node-a/renew",
         "",
         "admin",
         "",
         403,
         {}},
        {"DriverWithdrawsOtherNodes",
         "PUT",
         "/v1/drivers/gpu.example.com",
         Json({{"pools", {{"node-a", Json::parse(gpuPool("node-a"))}}}}).dump(),
         "node-a",
         "application/json",
         403,
         {"pools[\"node-b\"]", "pools[\"shared\"]"}},
        {"DriverMalformed",
         "PUT",
         "/v1/drivers/gpu.example.com",
         R"({"pool": {}})",
         "admin",
         "application/json",
         400,
         {"pool", "pools"}},
        {"UnknownFieldsAnywhere",
         "PUT",
         kPoolA,
         kTypoPool,
         "node-a",
         "application/json",
         400,
         {"devices[0].atributes", "devices[1].taints[0].valu"}},
        {"DriverInvalid",
         "PUT",
         "/v1/drivers/nic.example.com",
         R"({"pools": {"p": {"allNodes": true, "devices": [{"name": "A"}]}}})",
         "admin",
         "application/json",
         422,
         {"pools[\"p\"].devices[0].name"}},
        {"DriverPoolNameInvalid",
         "PUT",
         "/v1/drivers/nic.example.com",
         R"({"pools": {"P": {"allNodes": true}}})",
         "admin",
         "application/json",
         422,
         {"pools[\"P\"]"}},
    }),
    [](const auto& info) { return info.param.name; });

// An unknown field anywhere in a pushed pool is answered like the API
// server's strict field validation: 400, every path in the message and in
// the details.
TEST_F(InventoryHandlerTest, UnknownFieldsAreAStrictDecodingError) {
  HandlerResult result = call("PUT", kPoolA, kTypoPool, "node-a");
  EXPECT_EQ(result.response.status, 400);
  const Json error = bodyOf(result.response);
  EXPECT_EQ(error.at("reason"), "BadRequest");
  EXPECT_EQ(error.at("message"),
            "strict decoding error: unknown field \"devices[0].atributes\", unknown field "
            "\"devices[1].taints[0].valu\"");
  EXPECT_EQ(error.at("details"), Json::parse(R"([
      {"field": "devices[0].atributes", "message": "unknown field"},
      {"field": "devices[1].taints[0].valu", "message": "unknown field"}])"));
}

// A body of a million bad values is answered with a bounded list.
TEST_F(InventoryHandlerTest, ErrorAnswersListAtMostAHundredProblems) {
  std::string devices = "[1";
  for (int i = 1; i < 5000; ++i) devices += ",1";
  devices += "]";
  HandlerResult result =
      call("PUT", kPoolA, R"({"nodeName": "node-a", "devices": )" + devices + "}", "node-a");
  EXPECT_EQ(result.response.status, 400);
  const Json error = bodyOf(result.response);
  ASSERT_EQ(error.at("details").size(), pool::kMaxProblemDetails + 1);
  EXPECT_EQ(error.at("details").back().at("message"),
            "4900 more problems not listed (at most 100 are)");
  EXPECT_THAT(error.at("message").get<std::string>(), ::testing::StartsWith("5000 malformed"));
  EXPECT_LT(result.response.body.size(), 20'000U);
}

// What the parsed body would occupy is estimated before parsing: a body of
// empty objects is refused with 413 before it becomes a document.
TEST_F(InventoryHandlerTest, BodiesThatDecodeTooLargeAre413) {
  InventoryHandlerOptions options;
  options.store = &store_;
  options.authenticator = &auth_;
  options.clock = &clock_;
  // The limit admits exactly an ordinary pool of 40 devices.
  options.max_decoded_bytes = pool::decodedJsonBytes(gpuPool("node-a", 40));
  auto handler = InventoryHandler::create(options);
  ASSERT_TRUE(handler.ok());
  std::string objects = "[{}";
  for (int i = 1; i < 1000; ++i) objects += ",{}";
  objects += "]";
  ASSERT_LT(objects.size(), gpuPool("node-a", 40).size());
  HandlerResult result = (*handler)->handle(
      request("PUT", kPoolA, R"({"nodeName": "node-a", "devices": )" + objects + "}", "node-a"));
  EXPECT_EQ(result.response.status, 413);
  EXPECT_THAT(bodyOf(result.response).at("message").get<std::string>(),
              ::testing::HasSubstr("--max-decoded-bytes"));
  // The ordinary pool, larger as text, passes.
  EXPECT_EQ(
      (*handler)->handle(request("PUT", kPoolA, gpuPool("node-a", 40), "node-a")).response.status,
      202);
}

// Bodies being decoded at once share one budget: a PUT whose body finds no
// room in it is answered 503 with Retry-After and counted, and nothing is
// written; once room is back the same push goes through.
TEST_F(InventoryHandlerTest, BodiesWithoutRoomInTheDecodeBudgetAre503) {
  pool::DecodeBudget budget({.max_bytes = 16 * 1024 * 1024, .clock = &clock_});
  InventoryHandlerOptions options;
  options.store = &store_;
  options.authenticator = &auth_;
  options.clock = &clock_;
  options.decode_budget = &budget;
  options.decode_wait = Clock::Duration::zero();
  int refused = 0;
  options.on_decode_refused = [&refused] { ++refused; };
  auto handler = InventoryHandler::create(options);
  ASSERT_TRUE(handler.ok());
  const std::string before = snapshot();
  {
    std::optional<pool::DecodeBudget::Reservation> held = budget.reserve(16 * 1024 * 1024, {});
    ASSERT_TRUE(held);
    for (const char* target : {kPoolA, "/v1/drivers/gpu.example.com"}) {
      const std::string body = std::string_view(target) == kPoolA
                                   ? gpuPool("node-a", 4)
                                   : R"({"pools": {"node-a": )" + gpuPool("node-a", 4) + "}}";
      HandlerResult result = (*handler)->handle(request("PUT", target, body, "node-a"));
      EXPECT_EQ(result.response.status, 503) << target;
      EXPECT_TRUE(result.response.header("Retry-After")) << target;
      EXPECT_THAT(bodyOf(result.response).at("message").get<std::string>(),
                  ::testing::HasSubstr("--max-inflight-decoded-bytes"));
    }
  }
  EXPECT_EQ(refused, 2);
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(
      (*handler)->handle(request("PUT", kPoolA, gpuPool("node-a", 4), "node-a")).response.status,
      202);
  EXPECT_EQ(budget.reserved(), 0u);
}

// admit() decides from the headers: credentials, route and query, and the
// body limit of the route.
TEST_F(InventoryHandlerTest, AdmitDecidesFromTheHeadersAlone) {
  HttpRequest head = request("PUT", kPoolA, "", "stolen");
  Admission refused = handler_->admit(head);
  ASSERT_TRUE(refused.refusal.has_value());
  EXPECT_EQ(refused.refusal->status, 401);
  // Not authenticated: counted without the name its path chose.
  EXPECT_EQ(pushes_.back(), std::make_pair(std::string(), 401));

  Admission put = handler_->admit(request("PUT", kPoolA, "", "node-a"));
  ASSERT_FALSE(put.refusal.has_value());
  EXPECT_EQ(put.max_body_bytes, kDefaultMaxBodyBytes);
  Admission get = handler_->admit(request("GET", kPoolA, "", "node-a", ""));
  ASSERT_FALSE(get.refusal.has_value());
  EXPECT_EQ(get.max_body_bytes, kMaxBodylessBytes);
  EXPECT_EQ(handler_->admit(request("PUT", kPoolA + std::string("?bogus=1"), "", "node-a"))
                .refusal->status,
            400);

  // The admitted request is served with the caller admission found.
  HttpRequest full = request("PUT", kPoolA, gpuPool("node-a"), "node-a");
  full.admission = std::move(put.state);
  full.headers["authorization"] = "Bearer stolen";  // not looked at again
  EXPECT_EQ(handler_->handle(full).response.status, 202);
}

// admitNow() decides as admit() where the credentials are cached, and leaves
// the rest to a worker.
TEST_F(InventoryHandlerTest, AdmitNowDecidesAsAdmitWithCachedCredentials) {
  for (const char* token : {"stolen", "node-a"}) {
    SCOPED_TRACE(token);
    const HttpRequest head = request("PUT", kPoolA, "", token);
    const Admission blocking = handler_->admit(head);
    std::optional<Admission> now = handler_->admitNow(head);
    ASSERT_TRUE(now.has_value());
    EXPECT_EQ(now->refusal.has_value(), blocking.refusal.has_value());
    if (now->refusal) {
      EXPECT_EQ(now->refusal->body, blocking.refusal->body);
    }
    EXPECT_EQ(now->max_body_bytes, blocking.max_body_bytes);
  }
  EXPECT_EQ(pushes_.size(), 2u);  // the two 401s, each counted once
  auth_.setUncached(true);
  EXPECT_EQ(handler_->admitNow(request("PUT", kPoolA, "", "node-a")), std::nullopt);
  EXPECT_EQ(pushes_.size(), 2u);
}

// handleNow() answers the push of the body that set the pool's current
// content exactly as handle() would, and nothing else.
TEST_F(InventoryHandlerTest, HandleNowAnswersOnlyTheUnchangedBody) {
  const std::string body = gpuPool("node-a", 8);
  const auto admitted = [&](std::string method, std::string target, std::string bytes) {
    HttpRequest r = request(std::move(method), std::move(target), std::move(bytes), "node-a");
    r.admission = handler_->admit(r).state;
    return r;
  };
  ASSERT_EQ(handler_->handle(admitted("PUT", kPoolA, body)).response.status, 202);
  publish({kGpu, "node-a"});
  for (const char* query : {"", "?wait=10s"}) {
    const HttpRequest push = admitted("PUT", kPoolA + std::string(query), body);
    bodies_.clear();
    const HandlerResult blocking = handler_->handle(push);
    const std::string after = snapshot();
    std::optional<HandlerResult> now = handler_->handleNow(push);
    ASSERT_TRUE(now.has_value());
    EXPECT_EQ(answerText(*now), answerText(blocking));
    EXPECT_EQ(now->response.status, 200);
    EXPECT_EQ(snapshot(), after);
    EXPECT_THAT(bodies_, ElementsAre("unchanged", "unchanged"));
    EXPECT_EQ(pushes_.back(), std::make_pair(std::string(kGpu), 200));
  }

  const size_t pushes = pushes_.size();
  bodies_.clear();
  // Another body, a request not admitted, a read, a follower, a body too
  // large to digest on the I/O thread: each for a worker, untouched.
  EXPECT_EQ(handler_->handleNow(admitted("PUT", kPoolA, otherBytes(body))), std::nullopt);
  EXPECT_EQ(handler_->handleNow(request("PUT", kPoolA, body, "node-a")), std::nullopt);
  EXPECT_EQ(handler_->handleNow(admitted("GET", kPoolA, "")), std::nullopt);
  HttpRequest wrong_type = admitted("PUT", kPoolA, body);
  wrong_type.headers["content-type"] = "text/plain";
  EXPECT_EQ(handler_->handleNow(wrong_type), std::nullopt);
  const std::string large = body + std::string(InventoryHandler::kMaxBodyDigestedNow, ' ');
  // Same content in other bytes: decoded, and already published.
  ASSERT_EQ(handler_->handle(admitted("PUT", kPoolA, large)).response.status, 200);
  EXPECT_EQ(handler_->handleNow(admitted("PUT", kPoolA, large)), std::nullopt);
  LeaderHooks follower;
  follower.is_leader = [] { return false; };
  handler_->setLeaderHooks(follower);
  ASSERT_EQ(handler_->handle(admitted("PUT", kPoolA, body)).response.status, 503);
  EXPECT_EQ(handler_->handleNow(admitted("PUT", kPoolA, body)), std::nullopt);
  EXPECT_THAT(bodies_, ElementsAre("decoded"));
  EXPECT_EQ(pushes_.size(), pushes + 2);  // the two handle() calls
}

// ---- Dry runs -----------------------------------------------------------------

// A dry run is validated, authorized and planned like the push, answers the
// planned writes, and changes nothing: no content, lease, status or count.
TEST_F(InventoryHandlerTest, DryRunPlansEveryWritePathAndChangesNothing) {
  ASSERT_EQ(call("PUT", kPoolA, leasedGpuPool("node-a", 60), "node-a").response.status, 202);
  publish({kGpu, "node-a"});
  ASSERT_EQ(call("PUT", "/v1/drivers/nic.example.com/pools/shared", allNodesPool(), "admin")
                .response.status,
            202);
  clock_.advance(std::chrono::seconds(10));
  const std::string before = snapshot();
  const size_t pushes = pushes_.size();
  bodies_.clear();

  struct Case {
    std::string method, target, body, token;
    std::vector<std::string> asked;
  };
  const std::vector<Case> cases = {
      {"PUT",
       kPoolA + std::string("?dryRun=All"),
       gpuPool("node-a", 5),
       "node-a",
       {"node-a 5 devices"}},
      // The same body again: planned too, not taken as a renewal.
      {"PUT",
       kPoolA + std::string("?dryRun=All&wait=10s"),
       leasedGpuPool("node-a", 60),
       "node-a",
       {"node-a 2 devices"}},
      {"DELETE", kPoolA + std::string("?dryRun=All"), "", "node-a", {"node-a withdrawn"}},
      {"POST", kPoolA + std::string("/renew?dryRun=All"), "", "node-a", {"node-a 2 devices"}},
      // Leaving a pool out of a driver push withdraws it.
      {"PUT",
       "/v1/drivers/nic.example.com?dryRun=All",
       Json({{"pools", {{"other", Json::parse(allNodesPool(3))}}}}).dump(),
       "admin",
       {"other 3 devices", "shared withdrawn"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + " " + c.target);
    previewer_.asked.clear();
    const HandlerResult result = call(c.method, c.target, c.body, c.token);
    ASSERT_EQ(result.response.status, 200) << result.response.body;
    EXPECT_FALSE(result.wait.has_value());
    EXPECT_EQ(previewer_.asked, c.asked);
    const Json body = bodyOf(result.response);
    EXPECT_EQ(body["dryRun"], true);
    EXPECT_EQ(body["driver"], c.target.substr(12, c.target.find_first_of("/?", 12) - 12));
    ASSERT_EQ(body["pools"].size(), c.asked.size());
    const Json& first = body["pools"][0];
    EXPECT_EQ(first["writes"][0]["verb"], "update");
    EXPECT_EQ(first["writes"][0]["slice"], "slice-1");
    EXPECT_EQ(first["writes"][0]["changedFields"], Json::array({"spec.devices"}));
    EXPECT_EQ(first["action"], c.asked[0].ends_with("withdrawn") ? "withdraw" : "publish");
    EXPECT_EQ(snapshot(), before);
  }
  EXPECT_EQ(pushes_.size(), pushes) << "a dry run was counted as a push";
  EXPECT_TRUE(bodies_.empty());
}

// What a push would refuse, its dry run refuses the same way, before any
// planning.
TEST_F(InventoryHandlerTest, DryRunRefusesWhatThePushWouldRefuse) {
  ASSERT_EQ(call("PUT", kPoolA, gpuPool("node-a"), "node-a").response.status, 202);
  const std::string before = snapshot();
  struct Case {
    std::string method, target, body, token;
    int status;
  };
  const std::vector<Case> cases = {
      {"PUT", kPoolA + std::string("?dryRun=All"),
       R"({"nodeName":"node-a","devices":[{"name":"Bad Name"}]})", "node-a", 422},
      {"PUT", kPoolA + std::string("?dryRun=All"), gpuPool("node-a"), "node-b", 403},
      {"DELETE", kPoolA + std::string("?dryRun=All"), "", "node-b", 403},
      {"PUT", kPoolA + std::string("?dryRun=All"), gpuPool("node-a"), "stolen", 401},
      {"DELETE", "/v1/drivers/gpu.example.com/pools/unknown?dryRun=All", "", "admin", 404},
      {"PUT", kPoolA + std::string("?dryRun=true"), gpuPool("node-a"), "node-a", 400},
      {"GET", kPoolA + std::string("?dryRun=All"), "", "node-a", 400},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.method + " " + c.target + " as " + c.token);
    const HandlerResult result = call(c.method, c.target, c.body, c.token);
    EXPECT_EQ(result.response.status, c.status) << result.response.body;
  }
  EXPECT_THAT(bodyOf(call("PUT", kPoolA + std::string("?dryRun=true"), gpuPool("node-a"), "node-a")
                         .response)["message"]
                  .get<std::string>(),
              HasSubstr("dryRun: must be All"));
  EXPECT_TRUE(previewer_.asked.empty());
  EXPECT_EQ(snapshot(), before);
}

// The planner's failure (this replica stopped leading, a Node read failed)
// is the dry run's answer.
TEST_F(InventoryHandlerTest, DryRunAnswersThePlannersFailure) {
  previewer_.answer = unavailable("this replica does not lead; it cannot plan writes");
  const HandlerResult result =
      call("PUT", kPoolA + std::string("?dryRun=All"), gpuPool("node-a"), "node-a");
  EXPECT_EQ(result.response.status, 503) << result.response.body;
  EXPECT_THAT(result.response.body, HasSubstr("does not lead"));
  EXPECT_TRUE(store_.keys().empty());
}

// The I/O thread's fast path never takes a dry run, even of the body that
// set the pool's content.
TEST_F(InventoryHandlerTest, HandleNowLeavesDryRunsToAWorker) {
  const std::string body = gpuPool("node-a", 8);
  ASSERT_EQ(call("PUT", kPoolA, body, "node-a").response.status, 202);
  publish({kGpu, "node-a"});
  HttpRequest dry = request("PUT", kPoolA + std::string("?dryRun=All"), body, "node-a");
  dry.admission = handler_->admit(dry).state;
  EXPECT_EQ(handler_->handleNow(dry), std::nullopt);
  EXPECT_EQ(handler_->handle(dry).response.status, 200);
}

TEST_F(InventoryHandlerTest, MethodNotAllowedNamesTheAllowedMethods) {
  HandlerResult result = call("POST", "/v1/drivers/gpu.example.com/pools/node-a");
  EXPECT_EQ(result.response.status, 405);
  EXPECT_EQ(result.response.header("Allow"), "GET, PUT, DELETE");
  EXPECT_EQ(call("DELETE", "/v1/drivers").response.header("allow"), "GET");
}

TEST_F(InventoryHandlerTest, UnauthenticatedAnswersCarryAChallenge) {
  HandlerResult result = call("GET", "/v1/drivers", "", "");
  EXPECT_EQ(result.response.status, 401);
  EXPECT_EQ(bodyOf(result.response).at("reason"), "Unauthorized");
  EXPECT_THAT(std::string(result.response.header("WWW-Authenticate").value_or("")),
              HasSubstr("Bearer"));
}

TEST_F(InventoryHandlerTest, NotLeaderWithoutForwardingIs503) {
  call("PUT", "/v1/drivers/nic.example.com/pools/p", allNodesPool());
  const std::string before = snapshot();
  handler_->setLeaderHooks(
      {.is_leader = [] { return false; },
       .leader_identity = nullptr,
       .forward = [](const HttpRequest&) { return std::optional<HttpResponse>(); }});
  HandlerResult result = call("PUT", "/v1/drivers/nic.example.com/pools/p", allNodesPool(2));
  EXPECT_EQ(result.response.status, 503);
  EXPECT_EQ(bodyOf(result.response).at("reason"), "ServiceUnavailable");
  EXPECT_EQ(result.response.header("Retry-After"), "1");
  EXPECT_EQ(snapshot(), before);
}

// The forwarder read the Lease again (its leader went away) and found this
// replica leading: the push is served here, not refused.
TEST_F(InventoryHandlerTest, AFollowerThatLeadsOnceItTriedToForwardServesThePush) {
  bool leading = false;
  handler_->setLeaderHooks({.is_leader = [&] { return leading; },
                            .leader_identity = nullptr,
                            .forward =
                                [&](const HttpRequest&) {
                                  leading = true;
                                  return std::optional<HttpResponse>();
                                }});
  HandlerResult result = call("PUT", "/v1/drivers/nic.example.com/pools/p", allNodesPool());
  EXPECT_EQ(result.response.status, 202) << result.response.body;
  EXPECT_EQ(store_.keys().size(), 1U);
}

TEST_F(InventoryHandlerTest, CredentialsThatCannotBeCheckedAre503) {
  auth_.setUnavailable(true);
  HandlerResult result = call("PUT", "/v1/drivers/nic.example.com/pools/p", allNodesPool());
  EXPECT_EQ(result.response.status, 503);
  EXPECT_TRUE(store_.keys().empty());
}

TEST_F(InventoryHandlerTest, NodeTokenMayReplaceItsOwnNodesPools) {
  Json body = {{"pools",
                {{"node-a", Json::parse(gpuPool("node-a"))},
                 {"node-a-extra", Json::parse(gpuPool("node-a", 1))}}}};
  HandlerResult put = call("PUT", "/v1/drivers/gpu.example.com", body.dump(), "node-a");
  EXPECT_EQ(put.response.status, 202) << put.response.body;
  EXPECT_EQ(store_.keys(std::string(kGpu)).size(), 2U);
  // A pool of node-a pushed under another pool's name by node-b's token.
  HandlerResult takeover =
      call("PUT", "/v1/drivers/gpu.example.com/pools/node-a-extra", gpuPool("node-b"), "node-b");
  EXPECT_EQ(takeover.response.status, 403);
  EXPECT_EQ(store_.get({kGpu, "node-a-extra"})->pool.selection.node_name, "node-a");
}

TEST_F(InventoryHandlerTest, UnrestrictedCallerPublishesAnything) {
  pool::Caller dev;
  dev.user.username = "system:anonymous";
  dev.unrestricted = true;
  auth_.addToken("dev", dev);
  Json body = {
      {"pools",
       {{"node-a", Json::parse(gpuPool("node-a"))}, {"shared", Json::parse(allNodesPool())}}}};
  EXPECT_EQ(call("PUT", "/v1/drivers/gpu.example.com", body.dump(), "dev").response.status, 202);
  EXPECT_EQ(store_.keys().size(), 2U);
}

TEST_F(InventoryHandlerTest, OpenApiDocumentNeedsNoCredentials) {
  HandlerResult result = call("GET", "/openapi.json", "", "");
  EXPECT_EQ(result.response.status, 200);
  EXPECT_EQ(result.response.content_type, "application/json");
  EXPECT_EQ(bodyOf(result.response).at("openapi"), "3.0.3");
}

TEST(InventoryHandlerCreate, RequiresStoreAuthenticatorAndClock) {
  testing::FakeClock clock;
  reconcile::DesiredStore store(clock);
  FakeAuthenticator auth;
  EXPECT_FALSE(
      InventoryHandler::create({.store = nullptr, .authenticator = &auth, .clock = &clock}).ok());
  EXPECT_FALSE(
      InventoryHandler::create({.store = &store, .authenticator = nullptr, .clock = &clock}).ok());
  EXPECT_FALSE(
      InventoryHandler::create({.store = &store, .authenticator = &auth, .clock = nullptr}).ok());
  EXPECT_TRUE(
      InventoryHandler::create({.store = &store, .authenticator = &auth, .clock = &clock}).ok());
}

TEST(InventoryErrors, StatusCodesMapToHttp) {
  const std::vector<std::pair<StatusCode, int>> table = {
      {StatusCode::kInvalidArgument, 400},  {StatusCode::kUnauthenticated, 401},
      {StatusCode::kPermissionDenied, 403}, {StatusCode::kNotFound, 404},
      {StatusCode::kConflict, 409},         {StatusCode::kAlreadyExists, 409},
      {StatusCode::kTooLarge, 413},         {StatusCode::kUnprocessable, 422},
      {StatusCode::kUnavailable, 503},      {StatusCode::kInternal, 500},
  };
  for (const auto& [code, http] : table) {
    HttpResponse response = errorResponse(Status(code, "x"));
    EXPECT_EQ(response.status, http) << statusCodeName(code);
    EXPECT_EQ(bodyOf(response).at("code"), http);
  }
  EXPECT_EQ(bodyOf(errorResponse(Status(StatusCode::kConflict, "x"))).at("reason"), "Conflict");
  EXPECT_EQ(bodyOf(errorResponse(413, "too large")).at("reason"), "RequestEntityTooLarge");
}

}  // namespace
}  // namespace rsc::controller::inventory

namespace rsc::controller::inventory {
namespace {

// Pull mode: a driver whose inventory the controller pulls takes no pushes (one source of
// truth); reads and other drivers are unaffected.
TEST(InventoryHandlerPulled, WritesForAPulledDriverAreRefusedWith409) {
  testing::FakeClock clock;
  reconcile::DesiredStore store(clock);
  FakeAuthenticator auth;
  InventoryHandlerOptions options;
  options.store = &store;
  options.authenticator = &auth;
  options.clock = &clock;
  std::vector<std::pair<std::string, int>> pushes;
  options.on_push = [&](std::string_view driver, int code) {
    pushes.emplace_back(std::string(driver), code);
  };
  options.is_pulled = [](std::string_view driver) { return driver == "nic.example.com"; };
  auto handler = InventoryHandler::create(options);
  ASSERT_TRUE(handler.ok());
  const auto call = [&](std::string method, std::string target, std::string body = "") {
    HttpRequest r;
    r.method = std::move(method);
    r.target = std::move(target);
    r.body = std::move(body);
    r.headers["authorization"] = "Bearer admin";
    r.headers["content-type"] = "application/json";
    return (*handler)->handle(r).response;
  };
  for (const auto& [method, target, body] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"PUT", "/v1/drivers/nic.example.com/pools/p1", allNodesPool()},
           {"PUT", "/v1/drivers/nic.example.com", "{\"pools\": {}}"},
           {"PUT", "/v1/drivers/nic.example.com?dryRun=All", "{\"pools\": {}}"},
           {"DELETE", "/v1/drivers/nic.example.com/pools/p1", ""},
           {"POST", "/v1/drivers/nic.example.com/pools/p1/renew", ""}}) {
    const HttpResponse response = call(method, target, body);
    EXPECT_EQ(response.status, 409) << method << " " << target;
    const Json error = bodyOf(response);
    EXPECT_EQ(error.at("reason"), "Conflict");
    EXPECT_THAT(error.at("message").get<std::string>(),
                HasSubstr("driver \"nic.example.com\" is pulled from its inventory endpoint"));
    EXPECT_EQ(error.at("details").at(0).at("field"), "driver");
  }
  EXPECT_TRUE(store.keys().empty()) << "a refused push changes nothing";
  EXPECT_EQ(call("GET", "/v1/drivers/nic.example.com").status, 200);
  EXPECT_EQ(call("PUT", "/v1/drivers/gpu.example.com/pools/p1", allNodesPool()).status, 202)
      << "accepted, not yet published";
  EXPECT_EQ(pushes.front(), std::make_pair(std::string("nic.example.com"), 409));
}

}  // namespace
}  // namespace rsc::controller::inventory
