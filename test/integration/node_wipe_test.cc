// The kubelet's wipes on the real API server, with the service binary as a
// process: the call a kubelet makes at every start (DeleteCollection of its
// node's ResourceSlices, under its own node identity, which the Node
// authorizer and NodeRestriction admit) holds that node's pools: nothing is
// recreated, the status says Held and why, one Event on the Node, a metric;
// the driver's renewal republishes the pool at once at the next generation.
// Pools on other nodes and on all nodes are untouched, and an admin's delete
// of a slice of an allNodes pool is reverted as any foreign change is.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using Clock = std::chrono::steady_clock;

// A pool of `devices` GPUs available on every node.
Json allNodesPool(int devices) {
  Json pool = gpuPool("node-a", devices);
  pool.erase("nodeName");
  pool["allNodes"] = true;
  return pool;
}

// Each live slice of a pool, by name, with its resourceVersion.
std::map<std::string, std::string> versions(const std::vector<client::ResourceSlice>& slices) {
  std::map<std::string, std::string> out;
  for (const client::ResourceSlice& s : slices) out[s.metadata.name] = s.metadata.resource_version;
  return out;
}

class NodeWipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.ensureNode("node-a");
    env_.ensureNode("node-b");
    std::ifstream in(kCluster->caFile());
    std::stringstream ca;
    ca << in.rdbuf();
    tls_.ca_pem = ca.str();
  }

  // A request to the API server as one of the cluster's static identities.
  HttpAnswer kubeAs(const std::string& identity, const std::string& method,
                    const std::string& path) {
    return ServiceEnv::http(method, kCluster->server() + path, "", kCluster->token(identity), tls_);
  }

  void publish(const ControllerProcess& c, const std::string& driver, const std::string& pool,
               const Json& body) {
    const HttpAnswer a = env_.http("PUT", c.poolUrl(driver, pool, "?wait=30s"), body.dump());
    ASSERT_EQ(a.code, 200) << driver << "/" << pool << ": " << a.body;
  }

  ServiceEnv env_;
  HttpTls tls_;
};

TEST_F(NodeWipeTest, TheKubeletsDeleteCollectionHoldsItsNodesPoolsUntilTheDriverRenews) {
  ControllerProcess c = env_.startController("wipe", {"--auth=none"});
  const std::string gpu = "wipe.example.com";
  const std::string nic = "wipe-nic.example.com";
  publish(c, gpu, "node-a", gpuPool("node-a", 200));  // two slices
  publish(c, nic, "node-a", gpuPool("node-a", 2));
  publish(c, gpu, "node-b", gpuPool("node-b", 4));
  publish(c, gpu, "cluster", allNodesPool(4));
  ASSERT_TRUE(env_.poolComplete(gpu, "node-a", 2));
  const int64_t generation = env_.poolSlices(gpu, "node-a")[0].spec.pool.generation;
  const auto node_b = versions(env_.poolSlices(gpu, "node-b"));
  const auto cluster = versions(env_.poolSlices(gpu, "cluster"));
  ASSERT_EQ(node_b.size(), 1U);
  ASSERT_EQ(cluster.size(), 1U);
  const std::map<std::string, double> writes_before = env_.sliceWriteRequests();

  // Exactly the kubelet's call at start (every driver's slices of its node).
  const HttpAnswer wipe = kubeAs("node-a", "DELETE",
                                 "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=" +
                                     client::RestKubeApi::urlEncode("spec.nodeName=node-a"));
  ASSERT_EQ(wipe.code, 200) << wipe.body;
  ASSERT_TRUE(ServiceEnv::eventually([&] {
    return env_.poolSlices(gpu, "node-a").empty() && env_.poolSlices(nic, "node-a").empty();
  }));

  // Held: nothing recreated for 10 s.
  const Clock::time_point held_since = Clock::now();
  while (Clock::now() - held_since < std::chrono::seconds(10)) {
    ASSERT_TRUE(env_.poolSlices(gpu, "node-a").empty()) << "a held pool was recreated";
    ASSERT_TRUE(env_.poolSlices(nic, "node-a").empty()) << "a held pool was recreated";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (const std::string& driver : {gpu, nic}) {
    const Json status = env_.http("GET", c.poolUrl(driver, "node-a")).json();
    EXPECT_EQ(status.value("phase", ""), "Held") << status.dump();
    EXPECT_EQ(status.value("reason", ""), "NodeSlicesDeleted") << status.dump();
    EXPECT_NE(status.value("message", "").find("node-a"), std::string::npos) << status.dump();
    EXPECT_TRUE(status.at("sliceNames").empty()) << status.dump();
  }
  const std::map<std::string, double> writes_held = env_.sliceWriteRequests();
  EXPECT_EQ(writes_held.at("POST"), writes_before.at("POST")) << "a held pool was recreated";
  EXPECT_EQ(writes_held.at("PUT"), writes_before.at("PUT"));

  // One Event per pool, about the Node, as `kubectl describe node` shows
  // them: the second pool's repeats the first's (same Node, reason, action
  // and type), so it is counted in that Event's series, as client-go does.
  const std::string node_events =
      "/api/v1/namespaces/default/events?fieldSelector=" +
      client::RestKubeApi::urlEncode("involvedObject.kind=Node,involvedObject.name=node-a");
  Json events;
  auto held_events = [&] {
    events = env_.kube("GET", node_events).json();
    int64_t n = 0;
    for (const Json& e : events.value("items", Json::array())) {
      if (e.value("reason", "") != "PoolHeld") continue;
      n += e.contains("series") && e["series"].is_object() ? e["series"].value("count", 1) : 1;
    }
    return n;
  };
  EXPECT_TRUE(ServiceEnv::eventually([&] { return held_events() == 2; })) << events.dump();
  EXPECT_EQ(env_.metric(c, "resourceslice_controller_pool_holds_total{driver=\"" + gpu + "\"}"), 1);
  EXPECT_EQ(env_.metric(c, "resourceslice_controller_pool_holds_total{driver=\"" + nic + "\"}"), 1);

  // The other pools are untouched: same slices, same resourceVersions.
  EXPECT_EQ(versions(env_.poolSlices(gpu, "node-b")), node_b);
  EXPECT_EQ(versions(env_.poolSlices(gpu, "cluster")), cluster);

  // The driver renews (its plugin registered again): republished at once.
  const Clock::time_point renewed = Clock::now();
  const HttpAnswer renew = env_.http("POST", c.poolUrl(gpu, "node-a", "/renew?wait=30s"));
  ASSERT_EQ(renew.code, 200) << renew.body;
  ASSERT_TRUE(ServiceEnv::eventually([&] { return env_.poolComplete(gpu, "node-a", 2); },
                                     std::chrono::seconds(5)));
  const auto republish = Clock::now() - renewed;
  std::cout << "renew to republished: "
            << std::chrono::duration_cast<std::chrono::milliseconds>(republish).count() << " ms\n";
  EXPECT_LT(republish, std::chrono::seconds(1));
  for (const client::ResourceSlice& s : env_.poolSlices(gpu, "node-a")) {
    EXPECT_EQ(s.spec.pool.generation, generation + 1) << s.metadata.name;
  }
  EXPECT_EQ(env_.http("GET", c.poolUrl(gpu, "node-a")).json().value("phase", ""), "Published");
  // The other driver has not renewed: still held.
  EXPECT_TRUE(env_.poolSlices(nic, "node-a").empty());
  EXPECT_EQ(env_.http("GET", c.poolUrl(nic, "node-a")).json().value("phase", ""), "Held");
  EXPECT_EQ(held_events(), 2) << "republishing made another Event";
  expectCleanStop(c);
}

TEST_F(NodeWipeTest, AnAdminsDeleteOfAnAllNodesSliceIsReverted) {
  ControllerProcess c = env_.startController("revert", {"--auth=none"});
  const std::string driver = "revert.example.com";
  publish(c, driver, "cluster", allNodesPool(200));
  ASSERT_TRUE(env_.poolComplete(driver, "cluster", 2));
  const std::string deleted = env_.poolSlices(driver, "cluster")[0].metadata.name;
  const HttpAnswer d =
      kubeAs("admin", "DELETE", "/apis/resource.k8s.io/v1/resourceslices/" + deleted);
  ASSERT_EQ(d.code, 200) << d.body;
  EXPECT_TRUE(ServiceEnv::eventually([&] {
    const auto now = env_.poolSlices(driver, "cluster");
    return env_.poolComplete(driver, "cluster", 2) &&
           std::none_of(now.begin(), now.end(),
                        [&](const auto& s) { return s.metadata.name == deleted; });
  }));
  EXPECT_EQ(env_.http("GET", c.poolUrl(driver, "cluster")).json().value("phase", ""), "Published");
  EXPECT_EQ(env_.metric(c, "resourceslice_controller_pool_holds_total{driver=\"" + driver + "\"}"),
            0);
  expectCleanStop(c);
}

}  // namespace
}  // namespace rsc::testing
