// Pull mode against the real API server: the controller binary fetches a driver's inventory
// endpoint (a small HTTP server in this test serving the example inventory, with ETags) and
// publishes it; a changed answer is published with the minimal writes, 304 answers write
// nothing, a bad answer is the pools' status and changes nothing, a push for the pulled driver
// is refused, and the endpoint gone withdraws the pools after --pull-grace.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <fstream>
#include <mutex>

#include "client/resource_slice.h"
#include "controller/inventory/http_server.h"
#include "test/integration/leader_flags.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using std::chrono::seconds;
using ::testing::HasSubstr;
namespace inv = controller::inventory;

constexpr char kDriver[] = "nic.example.com";

// A driver's inventory endpoint: GET /v1/inventory answers the current document with its
// ETag, or 304 when If-None-Match names it. Counts what it answered.
class DriverEndpoint {
 public:
  // Listens on `address` (loopback unless a test needs an address an EndpointSlice may hold).
  explicit DriverEndpoint(const std::string& address = "127.0.0.1") : address_(address) {
    inv::HttpServerOptions options;
    options.bind_address = address + ":0";
    options.name = "driver-endpoint";
    auto started = inv::HttpServer::start(
        options, [this](const inv::HttpRequest& request,
                        const inv::HttpServer::Responder& respond) { respond(answer(request)); });
    EXPECT_TRUE(started.ok()) << started.status().toString();
    server_ = std::move(*started);
  }

  std::string url() const {
    return "http://" + address_ + ":" + std::to_string(server_->port()) + "/v1/inventory";
  }
  uint16_t port() const { return server_->port(); }

  // Serves `body` from now on, under a new ETag.
  void serve(const std::string& body) {
    std::lock_guard lock(mu_);
    body_ = body;
    etag_ = "\"v" + std::to_string(++version_) + "\"";
  }

  int notModified() const {
    std::lock_guard lock(mu_);
    return not_modified_;
  }
  int fetches() const {
    std::lock_guard lock(mu_);
    return fetches_;
  }

  void stop() { server_->stop(seconds(1)); }

 private:
  inv::HttpResponse answer(const inv::HttpRequest& request) {
    std::lock_guard lock(mu_);
    ++fetches_;
    if (request.target != "/v1/inventory") return inv::textResponse(404, "not here");
    inv::HttpResponse response;
    response.headers.emplace_back("ETag", etag_);
    if (request.header("if-none-match") == etag_) {
      ++not_modified_;
      response.status = 304;
      return response;
    }
    response.content_type = "application/json";
    response.body = body_;
    return response;
  }

  const std::string address_;
  mutable std::mutex mu_;
  std::string body_;      // guarded by mu_
  std::string etag_;      // guarded by mu_
  int version_ = 0;       // guarded by mu_
  int fetches_ = 0;       // guarded by mu_
  int not_modified_ = 0;  // guarded by mu_
  std::unique_ptr<inv::HttpServer> server_;
};

Json example(const std::string& name) {
  std::ifstream in(std::string(RSC_INVENTORY_EXAMPLES_DIR) + "/" + name);
  return Json::parse(in);
}

std::map<std::string, double> minus(std::map<std::string, double> a,
                                    const std::map<std::string, double>& b) {
  for (auto& [verb, n] : a) n -= b.at(verb);
  return a;
}

class PullTest : public ::testing::Test {
 protected:
  ServiceEnv env_;
};

TEST_F(PullTest, PulledInventoryIsPublishedKeptCurrentAndWithdrawnWhenTheEndpointIsGone) {
  DriverEndpoint endpoint;
  Json inventory = example("nic.example.com.driver.json");
  ASSERT_TRUE(inventory["pools"].contains("fabric-1"));
  endpoint.serve(inventory.dump());
  std::vector<std::string> args = leaderFlags("pull-0", "pull-lease");
  args.insert(args.end(), {"--inventory-source=" + std::string(kDriver) + "=" + endpoint.url(),
                           "--pull-interval=1s", "--pull-timeout=1s", "--pull-grace=4s"});
  ControllerProcess c = env_.startController("pull", args);
  const std::string driver_url = c.inventoryUrl() + "/v1/drivers/" + kDriver;

  // Published, every pool of the answer.
  const auto phases = [&] {
    std::map<std::string, std::string> out;
    const Json status = env_.http("GET", driver_url).json();
    if (!status.is_object()) return out;
    for (const Json& p : status["pools"]) out[p["pool"]] = p["phase"];
    return out;
  };
  std::map<std::string, std::string> published;
  for (const auto& [name, pool] : inventory["pools"].items()) published[name] = "Published";
  ASSERT_TRUE(ServiceEnv::eventually([&] { return phases() == published; }, seconds(30)))
      << c.process->log();
  EXPECT_FALSE(env_.poolSlices(kDriver, "fabric-1").empty());

  // Unchanged answers (304): no reconcile, no write.
  std::map<std::string, double> before = env_.sliceWriteRequests();
  const int not_modified = endpoint.notModified();
  ASSERT_TRUE(ServiceEnv::eventually([&] { return endpoint.notModified() >= not_modified + 3; },
                                     seconds(10)));
  EXPECT_EQ(env_.sliceWriteRequests(), before);
  EXPECT_GE(env_.metric(c, "resourceslice_controller_pull_fetches_total{driver=\"" +
                               std::string(kDriver) + "\",result=\"unchanged\"}"),
            3);

  // One device changes: one slice update, nothing else.
  inventory["pools"]["fabric-1"]["devices"][1]["attributes"]["firmwareVersion"]["version"] =
      "28.40.0";
  endpoint.serve(inventory.dump());
  const auto firmware_updated = [&] {
    for (const client::ResourceSlice& s : env_.poolSlices(kDriver, "fabric-1")) {
      if (client::toJsonText(s).find("28.40.0") != std::string::npos) return true;
    }
    return false;
  };
  ASSERT_TRUE(ServiceEnv::eventually(firmware_updated, seconds(15))) << c.process->log();
  const std::map<std::string, double> one_update = {{"POST", 0}, {"PUT", 1}, {"DELETE", 0}};
  EXPECT_TRUE(ServiceEnv::eventually(
      [&] { return minus(env_.sliceWriteRequests(), before) == one_update; }, seconds(5)));
  EXPECT_EQ(minus(env_.sliceWriteRequests(), before), one_update);

  // A bad answer: the pools' status says so, nothing is written.
  before = env_.sliceWriteRequests();
  Json bad = inventory;
  bad["pools"]["fabric-1"]["devices"][0]["name"] = "NIC_0";
  endpoint.serve(bad.dump());
  const auto last_error = [&](const std::string& pool) {
    const Json status = env_.http("GET", driver_url).json();
    for (const Json& p : status["pools"]) {
      if (p["pool"] == pool && p.contains("lastError")) return p["lastError"];
    }
    return Json();
  };
  ASSERT_TRUE(
      ServiceEnv::eventually([&] { return !last_error("fabric-1").is_null(); }, seconds(10)));
  EXPECT_EQ(last_error("fabric-1")["reason"], "InventorySourceFailed");
  EXPECT_THAT(last_error("fabric-1")["message"].get<std::string>(),
              HasSubstr("pools[\"fabric-1\"].devices[0].name"));
  EXPECT_EQ(env_.sliceWriteRequests(), before);
  EXPECT_TRUE(firmware_updated()) << "what was published stays";
  endpoint.serve(inventory.dump());
  ASSERT_TRUE(
      ServiceEnv::eventually([&] { return last_error("fabric-1").is_null(); }, seconds(10)));

  // Pushes for the pulled driver are refused.
  HttpAnswer push =
      env_.http("PUT", driver_url + "/pools/fabric-1", inventory["pools"]["fabric-1"].dump());
  EXPECT_EQ(push.code, 409) << push.body;
  EXPECT_THAT(push.body, HasSubstr("is pulled from its inventory endpoint"));
  push = env_.http("PUT", driver_url, inventory.dump());
  EXPECT_EQ(push.code, 409) << push.body;

  // The endpoint gone: its pools stay for the grace, then are withdrawn.
  const auto gone = std::chrono::steady_clock::now();
  endpoint.stop();
  ASSERT_TRUE(ServiceEnv::eventually([&] { return env_.poolSlices(kDriver, "fabric-1").empty(); },
                                     seconds(30)))
      << c.process->log();
  // The grace counts from the last answer, at most one interval (1.1 s) before the stop.
  EXPECT_GE(std::chrono::steady_clock::now() - gone, std::chrono::milliseconds(2800))
      << "withdrawn before --pull-grace";
  for (const auto& [name, pool] : inventory["pools"].items()) {
    EXPECT_TRUE(env_.poolSlices(kDriver, name).empty()) << name;
  }
  EXPECT_EQ(env_.metric(c, "resourceslice_controller_pull_source_expired{driver=\"" +
                               std::string(kDriver) + "\"}"),
            1);

  c.process->signal(SIGTERM);
  EXPECT_EQ(c.process->wait(seconds(20)), 0) << c.process->log();
}

// A node-local driver endpoint's pool, as a DaemonSet pod on `node` would serve it.
std::string nodeInventory(const std::vector<std::string>& nodes, const std::string& version = "1") {
  Json pools = Json::object();
  for (const std::string& node : nodes) {
    pools[node] = {
        {"nodeName", node},
        {"devices",
         {{{"name", "nic0"}, {"attributes", {{"firmware", {{"string", "fw-" + version}}}}}}}}};
  }
  return Json{{"pools", pools}}.dump();
}

// A headless Service `name` serving `driver`'s inventory on its port named inventory, with
// the scope annotation when `scope` is set.
Json inventoryService(const std::string& name, const std::string& driver,
                      const std::string& scope = "") {
  Json service = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", {{"name", name}, {"labels", {{"resourceslice.dra.k8s.io/driver", driver}}}}},
      {"spec",
       {{"clusterIP", "None"},
        {"selector", {{"app", name}}},
        {"ports", {{{"name", "inventory"}, {"port", 9000}}}}}}};
  if (!scope.empty()) {
    service["metadata"]["annotations"]["resourceslice.dra.k8s.io/inventory-scope"] = scope;
  }
  return service;
}

// The EndpointSlice the EndpointSlice controller would make for one ready pod of `service`
// (serving `driver`) on `node`: the Service's labels copied, the pod's address and its port
// named inventory.
Json endpointSlice(const std::string& driver, const std::string& service, const std::string& name,
                   const std::string& node, const std::string& address, uint16_t port) {
  return {
      {"apiVersion", "discovery.k8s.io/v1"},
      {"kind", "EndpointSlice"},
      {"metadata",
       {{"name", name},
        {"labels",
         {{"kubernetes.io/service-name", service}, {"resourceslice.dra.k8s.io/driver", driver}}}}},
      {"addressType", "IPv4"},
      {"endpoints",
       {{{"addresses", {address}}, {"conditions", {{"ready", true}}}, {"nodeName", node}}}},
      {"ports", {{{"name", "inventory"}, {"port", port}, {"protocol", "TCP"}}}}};
}

// An IPv4 address of this machine that is not loopback: the API server refuses loopback
// addresses in EndpointSlices, as a pod's address never is one. Empty when there is none.
std::string ownAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (const ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_LOOPBACK) != 0 || (a->ifa_flags & IFF_UP) == 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

TEST_F(PullTest, EndpointsOfALabelledServiceAreDiscoveredAndNodeRestricted) {
  const std::string address = ownAddress();
  if (address.empty()) GTEST_SKIP() << "no IPv4 address but loopback to serve endpoints on";
  const std::string ns = "pull-discovery";
  env_.ensureNamespace(ns);
  env_.ensureNode("node-a");
  env_.ensureNode("node-b");
  DriverEndpoint on_a(address);
  DriverEndpoint on_b(address);
  on_a.serve(nodeInventory({"node-a"}));
  on_b.serve(nodeInventory({"node-b"}));
  const std::string services = "/api/v1/namespaces/" + ns + "/services";
  env_.ensure(services, inventoryService("nic-inventory", kDriver));
  const std::string slices = "/apis/discovery.k8s.io/v1/namespaces/" + ns + "/endpointslices";
  env_.ensure(slices, endpointSlice(kDriver, "nic-inventory", "nic-inventory-a", "node-a", address,
                                    on_a.port()));
  env_.ensure(slices, endpointSlice(kDriver, "nic-inventory", "nic-inventory-b", "node-b", address,
                                    on_b.port()));

  std::vector<std::string> args = leaderFlags("pull-1", "pull-discovery-lease");
  args.insert(args.end(), {"--pull-discovery", "--pull-namespace=" + ns, "--pull-interval=1s",
                           "--pull-timeout=1s", "--pull-grace=4s"});
  ControllerProcess c = env_.startController("pull-discovery", args);
  const std::string driver_url = c.inventoryUrl() + "/v1/drivers/" + kDriver;
  const auto fetches = [&](const std::string& result) {
    return env_.metric(c, "resourceslice_controller_pull_fetches_total{driver=\"" +
                              std::string(kDriver) + "\",result=\"" + result + "\"}");
  };

  // Both endpoints found, each publishing its own node's pool.
  ASSERT_TRUE(ServiceEnv::eventually(
      [&] {
        return env_.poolComplete(kDriver, "node-a", 1) && env_.poolComplete(kDriver, "node-b", 1);
      },
      seconds(30)))
      << c.process->log();
  EXPECT_EQ(env_.metric(c, "resourceslice_controller_pull_sources{driver=\"" +
                               std::string(kDriver) + "\"}"),
            2);

  // A central endpoint (scope cluster) serving the example inventory, whose pools are placed
  // by node selectors: discovered and published as a push of it would be.
  constexpr char kFabric[] = "fabric.example.com";
  DriverEndpoint central(address);
  const Json example_inventory = example("nic.example.com.driver.json");
  central.serve(example_inventory.dump());
  env_.ensure(services, inventoryService("fabric-inventory", kFabric, "cluster"));
  env_.ensure(slices, endpointSlice(kFabric, "fabric-inventory", "fabric-inventory-a", "node-a",
                                    address, central.port()));
  for (const auto& [name, pool] : example_inventory["pools"].items()) {
    const size_t slice_count = pool.contains("slices") ? pool["slices"].size() : 1;
    EXPECT_TRUE(ServiceEnv::eventually(
        [&] { return env_.poolComplete(kFabric, name, slice_count); }, seconds(30)))
        << name << "\n"
        << c.process->log();
  }

  // 304 answers: no write.
  std::map<std::string, double> before = env_.sliceWriteRequests();
  const int not_modified = on_a.notModified() + on_b.notModified();
  ASSERT_TRUE(ServiceEnv::eventually(
      [&] { return on_a.notModified() + on_b.notModified() >= not_modified + 4; }, seconds(10)));
  EXPECT_EQ(env_.sliceWriteRequests(), before);

  // node-a's endpoint changes its pool: one update.
  on_a.serve(nodeInventory({"node-a"}, "2"));
  const auto has_version = [&](const std::string& pool, const std::string& version) {
    for (const client::ResourceSlice& s : env_.poolSlices(kDriver, pool)) {
      if (client::toJsonText(s).find("fw-" + version) != std::string::npos) return true;
    }
    return false;
  };
  ASSERT_TRUE(ServiceEnv::eventually([&] { return has_version("node-a", "2"); }, seconds(15)))
      << c.process->log();
  const std::map<std::string, double> one_update = {{"POST", 0}, {"PUT", 1}, {"DELETE", 0}};
  EXPECT_TRUE(ServiceEnv::eventually(
      [&] { return minus(env_.sliceWriteRequests(), before) == one_update; }, seconds(5)));

  // node-b's endpoint also serves node-a's pool: refused whole, nothing of it applied.
  before = env_.sliceWriteRequests();
  const double forbidden = fetches("Forbidden");
  on_b.serve(nodeInventory({"node-a", "node-b"}, "3"));
  ASSERT_TRUE(ServiceEnv::eventually([&] { return fetches("Forbidden") > forbidden; }, seconds(10)))
      << c.process->log();
  const Json status = env_.http("GET", driver_url).json();
  bool reported = false;
  for (const Json& p : status["pools"]) {
    if (p["pool"] == "node-b" && p.contains("lastError")) {
      EXPECT_EQ(p["lastError"]["reason"], "InventorySourceFailed");
      EXPECT_THAT(p["lastError"]["message"].get<std::string>(),
                  HasSubstr("the endpoint " + ns + "/nic-inventory/" + address + ":" +
                            std::to_string(on_b.port()) + " is bound to node \"node-b\""));
      reported = true;
    }
  }
  EXPECT_TRUE(reported) << status.dump();
  EXPECT_TRUE(has_version("node-a", "2")) << "node-a's pool is node-a's endpoint's";
  EXPECT_TRUE(has_version("node-b", "1"));
  EXPECT_EQ(env_.sliceWriteRequests(), before);
  on_b.serve(nodeInventory({"node-b"}));

  // A push for the discovered driver is refused.
  HttpAnswer push = env_.http("PUT", driver_url, nodeInventory({"node-a"}));
  EXPECT_EQ(push.code, 409) << push.body;

  // node-b's endpoint leaves its Service: its pool is withdrawn after the grace.
  const auto left = std::chrono::steady_clock::now();
  HttpAnswer deleted = env_.kube("DELETE", slices + "/nic-inventory-b");
  ASSERT_EQ(deleted.code, 200) << deleted.body;
  ASSERT_TRUE(ServiceEnv::eventually([&] { return env_.poolSlices(kDriver, "node-b").empty(); },
                                     seconds(30)))
      << c.process->log();
  EXPECT_GE(std::chrono::steady_clock::now() - left, std::chrono::milliseconds(3500))
      << "withdrawn before --pull-grace";
  EXPECT_TRUE(has_version("node-a", "2")) << "the other endpoint's pool stays";
  EXPECT_EQ(env_.metric(c, "resourceslice_controller_pull_sources{driver=\"" +
                               std::string(kDriver) + "\"}"),
            1);

  // A driver that pushes keeps pushing when a Service for it appears: the pull is refused.
  constexpr char kPusher[] = "gpu.example.com";
  push = env_.http("PUT", c.inventoryUrl() + "/v1/drivers/" + kPusher,
                   R"({"pools": {"shared": {"allNodes": true, "devices": [{"name": "gpu0"}]}}})");
  ASSERT_LT(push.code, 300) << push.body;
  DriverEndpoint rival(address);
  rival.serve(R"({"pools": {"other": {"allNodes": true, "devices": [{"name": "gpu1"}]}}})");
  env_.ensure(services, inventoryService("gpu-inventory", kPusher, "cluster"));
  env_.ensure(slices, endpointSlice(kPusher, "gpu-inventory", "gpu-inventory-a", "node-a", address,
                                    rival.port()));
  ASSERT_TRUE(ServiceEnv::eventually(
      [&] {
        return env_.metric(c, "resourceslice_controller_pull_fetches_total{driver=\"" +
                                  std::string(kPusher) + "\",result=\"Conflict\"}") >= 1;
      },
      seconds(15)))
      << c.process->log();
  EXPECT_TRUE(env_.poolSlices(kPusher, "other").empty());
  push = env_.http("PUT", c.poolUrl(kPusher, "shared"),
                   R"({"allNodes": true, "devices": [{"name": "gpu0"}, {"name": "gpu2"}]})");
  EXPECT_LT(push.code, 300) << "the pushing driver goes on: " << push.body;

  c.process->signal(SIGTERM);
  EXPECT_EQ(c.process->wait(seconds(20)), 0) << c.process->log();
}

}  // namespace
}  // namespace rsc::testing
