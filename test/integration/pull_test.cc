// Pull mode against the real API server: the controller binary fetches a driver's inventory
// endpoint (a small HTTP server in this test serving the example inventory, with ETags) and
// publishes it; a changed answer is published with the minimal writes, 304 answers write
// nothing, a bad answer is the pools' status and changes nothing, a push for the pulled driver
// is refused, and the endpoint gone withdraws the pools after --pull-grace. Then discovery's
// doors tried as an attacker who may create Services, EndpointSlices and Pods would: forged
// endpoints, a Service that claims a pushing driver across a restart, and a Service with its
// own CA waiting for the controller's token.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "client/resource_slice.h"
#include "controller/http/certificates.h"
#include "controller/http/http_server.h"
#include "test/integration/leader_flags.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kDriver[] = "nic.example.com";

// A driver's inventory endpoint: GET /v1/inventory answers the current document with its
// ETag, or 304 when If-None-Match names it. Counts what it answered.
class DriverEndpoint {
 public:
  // Listens on `address` (loopback unless a test needs an address an EndpointSlice may hold),
  // over TLS with `tls` when given.
  explicit DriverEndpoint(const std::string& address = "127.0.0.1",
                          std::optional<controller::http::TlsKeyPair> tls = std::nullopt)
      : address_(address) {
    controller::http::HttpServerOptions options;
    options.bind_address = address + ":0";
    options.name = "driver-endpoint";
    if (tls) {
      auto pair = std::make_shared<const controller::http::TlsKeyPair>(std::move(*tls));
      options.tls_key_pair = [pair] { return pair; };
    }
    auto started = controller::http::HttpServer::start(
        options, [this](const controller::http::HttpRequest& request,
                        const controller::http::HttpServer::Responder& respond) {
          respond(answer(request));
        });
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
  // The Authorization headers of the requests that carried one.
  std::vector<std::string> authorizations() const {
    std::lock_guard lock(mu_);
    return authorizations_;
  }

  void stop() { server_->stop(seconds(1)); }

 private:
  controller::http::HttpResponse answer(const controller::http::HttpRequest& request) {
    std::lock_guard lock(mu_);
    ++fetches_;
    if (auto authorization = request.header("authorization")) {
      authorizations_.emplace_back(*authorization);
    }
    if (request.target != "/v1/inventory") return controller::http::textResponse(404, "not here");
    controller::http::HttpResponse response;
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
  std::string body_;                         // guarded by mu_
  std::string etag_;                         // guarded by mu_
  int version_ = 0;                          // guarded by mu_
  int fetches_ = 0;                          // guarded by mu_
  int not_modified_ = 0;                     // guarded by mu_
  std::vector<std::string> authorizations_;  // guarded by mu_
  std::unique_ptr<controller::http::HttpServer> server_;
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

// The EndpointSlice the EndpointSlice controller would make for one ready pod `pod` of
// `service` (serving `driver`) on `node`: the Service's labels copied, the pod's address, its
// targetRef (none when `pod` is empty) and its port named inventory.
Json endpointSlice(const std::string& driver, const std::string& service, const std::string& name,
                   const std::string& node, const std::string& address, uint16_t port,
                   const std::string& pod, const std::string& app_protocol = "") {
  Json endpoint = {{"addresses", {address}}, {"conditions", {{"ready", true}}}, {"nodeName", node}};
  if (!pod.empty()) endpoint["targetRef"] = {{"kind", "Pod"}, {"name", pod}};
  Json port_json = {{"name", "inventory"}, {"port", port}, {"protocol", "TCP"}};
  if (!app_protocol.empty()) port_json["appProtocol"] = app_protocol;
  return {
      {"apiVersion", "discovery.k8s.io/v1"},
      {"kind", "EndpointSlice"},
      {"metadata",
       {{"name", name},
        {"labels",
         {{"kubernetes.io/service-name", service}, {"resourceslice.dra.k8s.io/driver", driver}}}}},
      {"addressType", "IPv4"},
      {"endpoints", {endpoint}},
      {"ports", {port_json}}};
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
  // The driver's pods, one per node (the test's endpoints share this machine's address).
  env_.runningPod(ns, "nic-a", "node-a", address);
  env_.runningPod(ns, "nic-b", "node-b", address);
  env_.ensure(slices, endpointSlice(kDriver, "nic-inventory", "nic-inventory-a", "node-a", address,
                                    on_a.port(), "nic-a"));
  env_.ensure(slices, endpointSlice(kDriver, "nic-inventory", "nic-inventory-b", "node-b", address,
                                    on_b.port(), "nic-b"));

  constexpr char kFabric[] = "fabric.example.com";
  std::vector<std::string> args = leaderFlags("pull-1", "pull-discovery-lease");
  args.insert(args.end(), {"--pull-discovery", "--pull-driver=" + std::string(kDriver) + "=" + ns,
                           "--pull-driver=" + std::string(kFabric) + "=" + ns, "--pull-interval=1s",
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
  DriverEndpoint central(address);
  const Json example_inventory = example("nic.example.com.driver.json");
  central.serve(example_inventory.dump());
  env_.runningPod(ns, "fabric-0", "node-a", address);
  env_.ensure(services, inventoryService("fabric-inventory", kFabric, "cluster"));
  env_.ensure(slices, endpointSlice(kFabric, "fabric-inventory", "fabric-inventory-a", "node-a",
                                    address, central.port(), "fabric-0"));
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

  // A driver that pushes keeps pushing when a Service for it appears, even with a Pod behind
  // it: it is bound to no namespace, so the Service is refused and never fetched.
  constexpr char kPusher[] = "gpu.example.com";
  push = env_.http("PUT", c.inventoryUrl() + "/v1/drivers/" + kPusher,
                   R"({"pools": {"shared": {"allNodes": true, "devices": [{"name": "gpu0"}]}}})");
  ASSERT_LT(push.code, 300) << push.body;
  DriverEndpoint rival(address);
  rival.serve(R"({"pools": {"other": {"allNodes": true, "devices": [{"name": "gpu1"}]}}})");
  env_.runningPod(ns, "gpu-0", "node-a", address);
  env_.ensure(services, inventoryService("gpu-inventory", kPusher, "cluster"));
  env_.ensure(slices, endpointSlice(kPusher, "gpu-inventory", "gpu-inventory-a", "node-a", address,
                                    rival.port(), "gpu-0"));
  ASSERT_TRUE(ServiceEnv::eventually(
      [&] {
        return env_.metric(
                   c, "resourceslice_controller_pull_sources_ignored_total{reason=\"Unbound\"}") >=
               1;
      },
      seconds(15)))
      << c.process->log();
  EXPECT_EQ(rival.fetches(), 0);
  EXPECT_TRUE(env_.poolSlices(kPusher, "other").empty());
  push = env_.http("PUT", c.poolUrl(kPusher, "shared"),
                   R"({"allNodes": true, "devices": [{"name": "gpu0"}, {"name": "gpu2"}]})");
  EXPECT_LT(push.code, 300) << "the pushing driver goes on: " << push.body;

  c.process->signal(SIGTERM);
  EXPECT_EQ(c.process->wait(seconds(20)), 0) << c.process->log();
}

// ---- Discovery's doors, as an attacker tries them ------------------------------------------

// A namespace of a discovered driver, or an attacker's: a Service, and endpoints that a Pod
// serves (created as a driver's DaemonSet would) or that only a hand-written EndpointSlice
// claims.
class DiscoveryDoors {
 public:
  DiscoveryDoors(ServiceEnv& env, std::string ns) : env_(env), ns_(std::move(ns)) {
    env_.ensureNamespace(ns_);
  }
  // The Service `name` claiming `driver`, with `annotations`; https when `https`.
  void service(const std::string& name, const std::string& driver, bool https = false,
               const Json& annotations = Json::object()) {
    Json svc = inventoryService(name, driver);
    if (https) svc["spec"]["ports"][0]["appProtocol"] = "https";
    for (const auto& [key, value] : annotations.items()) {
      svc["metadata"]["annotations"][key] = value;
    }
    env_.ensure("/api/v1/namespaces/" + ns_ + "/services", svc);
  }
  // A Pod `pod` on `pod_node` (as ServiceAccount `sa`) at `address`, unless `pod` is empty,
  // and an EndpointSlice entry of Service `service` that says `slice_node` and names `pod`.
  void endpoint(const std::string& service, const std::string& driver, const std::string& pod,
                const std::string& pod_node, const std::string& slice_node,
                const std::string& address, uint16_t port, bool https = false,
                const std::string& sa = "default") {
    if (!pod.empty()) env_.runningPod(ns_, pod, pod_node, address, sa);
    env_.ensure("/apis/discovery.k8s.io/v1/namespaces/" + ns_ + "/endpointslices",
                endpointSlice(driver, service, service + "-" + std::to_string(++slices_),
                              slice_node, address, port, pod, https ? "https" : ""));
  }

 private:
  ServiceEnv& env_;
  const std::string ns_;
  int slices_ = 0;
};

class PullDoorsTest : public PullTest {
 protected:
  void SetUp() override {
    address_ = ownAddress();
    if (address_.empty()) GTEST_SKIP() << "no IPv4 address but loopback to serve endpoints on";
    for (const char* node : {"node-a", "node-b"}) env_.ensureNode(node);
  }
  // The flags of a controller that pulls `driver` from `bound` (NAMESPACE[/SA]) every second.
  // Each test has drivers and namespaces of its own: the cluster outlives the test.
  std::vector<std::string> pullFlags(const std::string& id, const std::string& driver,
                                     const std::string& bound) {
    std::vector<std::string> args = leaderFlags(id, id + "-lease");
    args.insert(args.end(), {"--pull-discovery", "--pull-driver=" + driver + "=" + bound,
                             "--pull-interval=1s", "--pull-timeout=1s", "--pull-grace=4s"});
    return args;
  }
  double ignored(const ControllerProcess& c, const std::string& reason) {
    return env_.metric(
        c, "resourceslice_controller_pull_sources_ignored_total{reason=\"" + reason + "\"}");
  }

  std::string address_;
};

// Row 1 of the attacks: a hand-made EndpointSlice that names node-b, in the driver's own
// namespace (without a Pod, or with the attacker's Pod on node-a) and in a namespace of the
// attacker's, published node-b's pool from the forged endpoint within a second when discovery
// watched every namespace and believed an EndpointSlice's nodeName.
TEST_F(PullDoorsTest, AForgedEndpointSliceIsNotBelieved) {
  const std::string driver_name = "forged.example.com";
  DriverEndpoint genuine(address_);
  genuine.serve(nodeInventory({"node-a"}));
  DriverEndpoint no_pod(address_);
  DriverEndpoint wrong_node(address_);
  DriverEndpoint elsewhere(address_);
  for (DriverEndpoint* forged : {&no_pod, &wrong_node, &elsewhere}) {
    forged->serve(nodeInventory({"node-b"}, "forged"));
  }

  DiscoveryDoors driver(env_, "forged-nic");
  driver.service("nic-inventory", driver_name);
  driver.endpoint("nic-inventory", driver_name, "nic-a", "node-a", "node-a", address_,
                  genuine.port());
  // In the driver's namespace: no Pod at all; the attacker's own Pod, which runs on node-a.
  driver.endpoint("nic-inventory", driver_name, "", "", "node-b", address_, no_pod.port());
  driver.endpoint("nic-inventory", driver_name, "intruder", "node-a", "node-b", address_,
                  wrong_node.port());
  // In the attacker's namespace, with a Pod truly on node-b.
  DiscoveryDoors intruder(env_, "forged-intruder");
  intruder.service("nic-inventory", driver_name);
  intruder.endpoint("nic-inventory", driver_name, "nic-b", "node-b", "node-b", address_,
                    elsewhere.port());

  ControllerProcess c =
      env_.startController("doors-forged", pullFlags("doors-1", driver_name, "forged-nic"));
  ASSERT_TRUE(ServiceEnv::eventually([&] { return env_.poolComplete(driver_name, "node-a", 1); },
                                     seconds(30)))
      << c.process->log();
  // Several intervals later, no forged endpoint was ever asked and node-b has no pool.
  const int asked = genuine.fetches();
  ASSERT_TRUE(ServiceEnv::eventually([&] { return genuine.fetches() >= asked + 3; }, seconds(15)));
  EXPECT_EQ(no_pod.fetches() + wrong_node.fetches() + elsewhere.fetches(), 0);
  EXPECT_TRUE(env_.poolSlices(driver_name, "node-b", /*managed_only=*/false).empty());
  EXPECT_EQ(ignored(c, "Unverified"), 2) << "the two endpoints of the driver's namespace";
  EXPECT_EQ(env_.metric(c, "resourceslice_controller_pull_sources{driver=\"" + driver_name + "\"}"),
            1);
  expectCleanStop(c);
}

// Row 2: a Service claiming a driver that pushes, then a restart. The driver's pushes were
// answered 409 from then on, the attacker's pool was published, and at the end of the
// adoption grace all of the driver's pools were withdrawn.
TEST_F(PullDoorsTest, AServiceCannotTakeOverAPushingDriverAcrossARestart) {
  constexpr char kPusher[] = "pusher.example.com";
  DriverEndpoint rival(address_);
  rival.serve(R"({"pools": {"stolen": {"allNodes": true, "devices": [{"name": "gpu9"}]}}})");
  // Both in the namespace bound to a pulled driver and in the attacker's own, with Pods.
  for (const std::string ns : {"takeover-nic", "takeover-intruder"}) {
    DiscoveryDoors doors(env_, ns);
    doors.service("gpu-inventory", kPusher);
    doors.endpoint("gpu-inventory", kPusher, "gpu-0", "node-a", "node-a", address_, rival.port());
  }
  std::vector<std::string> args = pullFlags("doors-2", "takeover.example.com", "takeover-nic");
  args.push_back("--adoption-grace=3s");
  // Each pool pushed until the answer is not 503 (no leader yet).
  const auto push_all = [&](const ControllerProcess& c) {
    std::vector<int> codes;
    for (int i = 0; i < 4; ++i) {
      const std::string pool = "pool-" + std::to_string(i);
      int code = 0;
      ServiceEnv::eventually(
          [&] {
            code = env_.http("PUT", c.poolUrl(kPusher, pool, "?wait=20s"),
                             R"({"allNodes": true, "devices": [{"name": "gpu0"}]})")
                       .code;
            return code != 503;
          },
          seconds(15));
      codes.push_back(code);
    }
    return codes;
  };
  const std::vector<int> ok = {200, 200, 200, 200};
  {
    ControllerProcess first = env_.startController("doors-takeover-1", args);
    ASSERT_EQ(push_all(first), ok) << first.process->log();
    expectCleanStop(first);
  }
  ControllerProcess second = env_.startController("doors-takeover-2", args);
  EXPECT_EQ(push_all(second), ok) << second.process->log();
  // Past the adoption grace, every pool is still published, and nothing was stolen.
  ASSERT_TRUE(ServiceEnv::eventually([&] { return ignored(second, "Unbound") >= 1; }, seconds(15)))
      << second.process->log();
  std::this_thread::sleep_for(seconds(5));  // the adoption grace (3 s), and then some
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(env_.poolComplete(kPusher, "pool-" + std::to_string(i), 1)) << i;
  }
  EXPECT_TRUE(env_.poolSlices(kPusher, "stolen", /*managed_only=*/false).empty());
  EXPECT_EQ(rival.fetches(), 0);
  expectCleanStop(second);
}

// Row 3: a Service with the attacker's own CA in its inventory-ca annotation and an HTTPS
// endpoint with a certificate for <svc>.<ns>.svc: the controller's pull token was sent to it
// on every fetch. Now the token goes only to endpoints that passed every check: the driver's
// namespace, a Pod of the bound ServiceAccount; the genuine endpoint still gets it.
TEST_F(PullDoorsTest, ThePullTokenGoesOnlyToEndpointsThatPassedEveryCheck) {
  constexpr char kToken[] = "pull-token-for-drivers-only";
  const auto tls_for = [&](const std::string& name) {
    controller::http::CertificateRequest request;
    request.common_name = name + " CA";
    request.not_before = std::chrono::system_clock::now();
    StatusOr<controller::http::TlsKeyPair> ca = controller::http::makeCertificateAuthority(request);
    EXPECT_TRUE(ca.ok()) << ca.status().toString();
    request.common_name = name;  // not the CA's: a leaf named as its issuer reads as self-signed
    request.names = {name};
    StatusOr<controller::http::TlsKeyPair> leaf =
        controller::http::issueServingCertificate(request, &*ca);
    EXPECT_TRUE(leaf.ok()) << leaf.status().toString();
    return std::pair(ca->cert_pem, *leaf);
  };
  const std::string driver_name = "token.example.com";
  const auto [genuine_ca, genuine_tls] = tls_for("nic-inventory.token-nic.svc");
  const auto [evil_ca, evil_tls] = tls_for("nic-inventory.token-intruder.svc");
  const auto [evil_ca2, evil_tls2] = tls_for("evil.token-nic.svc");
  DriverEndpoint genuine(address_, genuine_tls);
  genuine.serve(nodeInventory({"node-a"}));
  DriverEndpoint evil(address_, evil_tls);
  evil.serve(nodeInventory({"node-b"}, "evil"));
  DriverEndpoint evil2(address_, evil_tls2);
  evil2.serve(nodeInventory({"node-b"}, "evil"));

  DiscoveryDoors driver(env_, "token-nic");
  driver.service("nic-inventory", driver_name, true,
                 {{"resourceslice.dra.k8s.io/inventory-ca", genuine_ca}});
  driver.endpoint("nic-inventory", driver_name, "nic-a", "node-a", "node-a", address_,
                  genuine.port(), true, "nic-driver");
  // In the driver's namespace: the attacker's Service and CA, a Pod of another ServiceAccount.
  driver.service("evil", driver_name, true, {{"resourceslice.dra.k8s.io/inventory-ca", evil_ca2}});
  driver.endpoint("evil", driver_name, "evil-b", "node-b", "node-b", address_, evil2.port(), true);
  // In the attacker's namespace.
  DiscoveryDoors intruder(env_, "token-intruder");
  intruder.service("nic-inventory", driver_name, true,
                   {{"resourceslice.dra.k8s.io/inventory-ca", evil_ca}});
  intruder.endpoint("nic-inventory", driver_name, "nic-b", "node-b", "node-b", address_,
                    evil.port(), true);

  const std::filesystem::path token_file = env_.logDir() / "pull-token";
  std::ofstream(token_file) << kToken;
  std::vector<std::string> args = pullFlags("doors-3", driver_name, "token-nic/nic-driver");
  args.push_back("--pull-token-file=" + token_file.string());
  ControllerProcess c = env_.startController("doors-token", args);
  ASSERT_TRUE(ServiceEnv::eventually([&] { return env_.poolComplete(driver_name, "node-a", 1); },
                                     seconds(30)))
      << c.process->log();
  const int asked = genuine.fetches();
  ASSERT_TRUE(ServiceEnv::eventually([&] { return genuine.fetches() >= asked + 3; }, seconds(15)));
  ASSERT_FALSE(genuine.authorizations().empty());
  EXPECT_EQ(genuine.authorizations().back(), std::string("Bearer ") + kToken);
  EXPECT_EQ(evil.fetches(), 0);
  EXPECT_EQ(evil2.fetches(), 0);
  EXPECT_TRUE(env_.poolSlices(driver_name, "node-b", /*managed_only=*/false).empty());
  EXPECT_EQ(ignored(c, "Unverified"), 1) << "the Pod of another ServiceAccount";
  expectCleanStop(c);
}

}  // namespace
}  // namespace rsc::testing
