// The Node cache on the real API server, with the service binary as a
// process: a pool pushed before its Node exists is published as soon as the
// Node is created, not when its backoff ends; a Node deleted and created again
// has its new UID in the owner references of its pools' slices; and
// publishing node-local pools reads no Node (the API server's own count of
// Node GETs does not move).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <set>
#include <string>
#include <thread>

#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kDriver[] = "gpu.example.com";
// Failed reconciles of one pool are retried after 5 ms, doubling each time.
// The queue counts the push's batching as a retry too, so once this many are
// counted, the next failure is retried no sooner than 5 ms * 2^10 = 5.12 s
// later: a pool published within kPublishedSoon of its Node's creation after
// that was not waiting for its backoff.
constexpr int kRetriesBeforeTheNode = 11;
constexpr auto kPublishedSoon = seconds(2);

class NodeCacheTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (!controller_.process) return;
    expectCleanStop(controller_);
  }

  void startController() {
    controller_ = env_.startController(
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), {"--auth=none"});
  }

  std::string poolUrl(const std::string& pool, const std::string& query = "") {
    return controller_.poolUrl(kDriver, pool, query);
  }

  std::string nodeUid(const std::string& node) {
    const HttpAnswer a = env_.kube("GET", "/api/v1/nodes/" + node);
    EXPECT_EQ(a.code, 200) << a.body;
    return a.code == 200 ? a.json()["metadata"]["uid"].get<std::string>() : "";
  }

  // The owner UIDs of the pool's slices.
  std::set<std::string> ownerUids(const std::string& pool) {
    std::set<std::string> uids;
    for (const client::ResourceSlice& s : env_.poolSlices(kDriver, pool)) {
      for (const client::OwnerReference& ref : s.metadata.owner_references) uids.insert(ref.uid);
    }
    return uids;
  }

  double retries() {
    return env_.metric(controller_, "workqueue_retries_total{name=\"resourceslice\"}");
  }

  ServiceEnv env_;
  ControllerProcess controller_;
};

TEST_F(NodeCacheTest, APoolIsPublishedAsSoonAsItsNodeIsCreated) {
  startController();
  const std::string node = "nc-late";
  const HttpAnswer pushed = env_.http("PUT", poolUrl(node), gpuPool(node, 2).dump());
  ASSERT_EQ(pushed.code, 202) << pushed.body;

  // The pool fails for want of its Node, again and again, until its backoff
  // is long; the Node is created right after a retry was scheduled.
  ASSERT_TRUE(ServiceEnv::eventually([&] { return retries() >= kRetriesBeforeTheNode; }))
      << "retries: " << retries();
  const Json failed = env_.http("GET", poolUrl(node)).json();
  EXPECT_EQ(failed["phase"], "Failed") << failed.dump();
  const double seen = retries();
  ASSERT_TRUE(ServiceEnv::eventually([&] { return retries() > seen; }, seconds(30)));
  const auto created_at = std::chrono::steady_clock::now();
  env_.ensureNode(node);

  ASSERT_TRUE(
      ServiceEnv::eventually([&] { return env_.poolComplete(kDriver, node, 1); }, seconds(30)));
  const auto took = std::chrono::steady_clock::now() - created_at;
  RecordProperty("published_ms",
                 static_cast<int>(std::chrono::duration_cast<milliseconds>(took).count()));
  EXPECT_LT(took, kPublishedSoon) << "the pool waited for its backoff";
  EXPECT_EQ(ownerUids(node), std::set<std::string>{nodeUid(node)});
  EXPECT_EQ(env_.http("GET", poolUrl(node)).json()["phase"], "Published");
}

TEST_F(NodeCacheTest, ARecreatedNodesUidReachesTheSlicesOfItsPools) {
  const std::string node = "nc-again";
  env_.ensureNode(node);
  startController();
  const HttpAnswer pushed = env_.http("PUT", poolUrl(node, "?wait=30s"), gpuPool(node, 2).dump());
  ASSERT_EQ(pushed.code, 200) << pushed.body;
  const std::string first = nodeUid(node);
  ASSERT_EQ(ownerUids(node), std::set<std::string>{first});

  // This cluster has no garbage collector: the slices stay while the Node is
  // deleted and created again.
  ASSERT_EQ(env_.kube("DELETE", "/api/v1/nodes/" + node).code, 200);
  env_.ensureNode(node);
  const std::string second = nodeUid(node);
  ASSERT_NE(first, second);
  EXPECT_TRUE(ServiceEnv::eventually(
      [&] { return ownerUids(node) == std::set<std::string>{second}; }, kPublishedSoon))
      << "owner UIDs are not " << second;
  EXPECT_TRUE(env_.poolComplete(kDriver, node, 1));
}

TEST_F(NodeCacheTest, PublishingNodeLocalPoolsReadsNoNode) {
  constexpr int kPools = 20;
  for (int i = 0; i < kPools; ++i) env_.ensureNode("nc-bulk-" + std::to_string(i));
  // Ready means both caches are filled: every Node above is in the cache.
  startController();

  // The count moves with a Node GET: a read of our own proves it.
  const double before_probe = env_.apiServerRequests("nodes", "GET");
  ASSERT_FALSE(std::isnan(before_probe));
  env_.kube("GET", "/api/v1/nodes/nc-bulk-0");
  ASSERT_TRUE(ServiceEnv::eventually(
      [&] { return env_.apiServerRequests("nodes", "GET") == before_probe + 1; }, seconds(5)))
      << "the API server's counter does not see Node GETs";
  const double before = env_.apiServerRequests("nodes", "GET");

  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pushes;
  std::vector<int> codes(kPools);
  for (int i = 0; i < kPools; ++i) {
    pushes.emplace_back([&, i] {
      const std::string node = "nc-bulk-" + std::to_string(i);
      codes[i] = env_.http("PUT", poolUrl(node, "?wait=30s"), gpuPool(node, 4).dump()).code;
    });
  }
  for (std::thread& t : pushes) t.join();
  const auto took = std::chrono::steady_clock::now() - start;
  for (int i = 0; i < kPools; ++i) EXPECT_EQ(codes[i], 200) << "pool " << i;
  RecordProperty("publish_20_pools_ms",
                 static_cast<int>(std::chrono::duration_cast<milliseconds>(took).count()));

  EXPECT_EQ(env_.apiServerRequests("nodes", "GET") - before, 0) << "Node GETs while publishing";
  for (int i = 0; i < kPools; ++i) {
    const std::string node = "nc-bulk-" + std::to_string(i);
    EXPECT_EQ(ownerUids(node), std::set<std::string>{nodeUid(node)}) << node;
  }
}

}  // namespace
}  // namespace rsc::testing
