#include "controller/pull/discovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <stop_token>

#include "controller/pull/fetcher.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller::pull {
namespace {

using ::testing::ElementsAre;
using testing::FakeClock;
using testing::FakeKubeApi;
using ::testing::IsEmpty;

constexpr char kDriver[] = "gpu.example.com";
constexpr char kNs[] = "drivers";
constexpr char kSvc[] = "gpu-inventory";

// A TCP port of a Service (ServicePort) or of an EndpointSlice (EndpointPort).
template <typename Port>
Port tcpPort(std::string name, decltype(Port::port) number, std::string app_protocol = "") {
  Port p;
  p.name = std::move(name);
  p.port = number;
  p.protocol = "TCP";
  p.app_protocol = std::move(app_protocol);
  return p;
}

client::ServicePort port(std::string name, int32_t number, std::string app_protocol = "") {
  return tcpPort<client::ServicePort>(std::move(name), number, std::move(app_protocol));
}

client::Service service(std::string ns = kNs, std::string name = kSvc,
                        std::string driver = kDriver) {
  client::Service s;
  s.metadata.namespace_ = std::move(ns);
  s.metadata.name = std::move(name);
  s.metadata.labels[kDriverLabel] = std::move(driver);
  s.spec.ports = {port("metrics", 9090), port(kInventoryPortName, 80)};
  return s;
}

client::Endpoint endpoint(std::vector<std::string> addresses, std::optional<std::string> node = {},
                          std::optional<bool> ready = true,
                          std::optional<bool> terminating = std::nullopt) {
  client::Endpoint e;
  e.addresses = std::move(addresses);
  e.node_name = std::move(node);
  e.conditions.ready = ready;
  e.conditions.terminating = terminating;
  return e;
}

client::EndpointPort slicePort(std::string name, std::optional<int32_t> number,
                               std::string app_protocol = "") {
  return tcpPort<client::EndpointPort>(std::move(name), number, std::move(app_protocol));
}

// A slice of the Service `service` (its labels as the EndpointSlice controller writes them).
client::EndpointSlice slice(std::string name, std::vector<client::Endpoint> endpoints,
                            std::string service = kSvc, std::string ns = kNs,
                            std::string address_type = "IPv4") {
  client::EndpointSlice s;
  s.metadata.namespace_ = std::move(ns);
  s.metadata.name = std::move(name);
  s.metadata.labels[kServiceNameLabel] = std::move(service);
  s.metadata.labels[kDriverLabel] = kDriver;
  s.address_type = std::move(address_type);
  s.endpoints = std::move(endpoints);
  s.ports = {slicePort("metrics", 9090), slicePort(kInventoryPortName, 8080)};
  return s;
}

SourceSpec spec(const std::string& host_port, std::optional<std::string> node = {},
                std::string ns = kNs, std::string svc = kSvc) {
  SourceSpec s;
  s.driver = kDriver;
  s.id = ns + "/" + svc + "/" + host_port;
  s.url = "http://" + host_port + kDefaultInventoryPath;
  s.caller.node_name = std::move(node);
  return s;
}

std::vector<std::string> ids(const std::vector<SourceSpec>& sources) {
  std::vector<std::string> out;
  for (const auto& s : sources) out.push_back(s.id);
  return out;
}

DiscoveryResult discover(const std::vector<client::Service>& services,
                         const std::vector<client::EndpointSlice>& slices,
                         DiscoveryOptions options = {}) {
  return discoveredSources(services, slices, options);
}

// ---- the rule ----------------------------------------------------------------

TEST(DiscoveredSources, EveryReadyAddressOfTheInventoryPortIsOneSource) {
  const auto result = discover(
      {service()},
      {slice("a", {endpoint({"10.0.0.2", "10.0.0.1"}, "node-a"), endpoint({"10.0.0.3"})})});
  EXPECT_THAT(result.sources, ElementsAre(spec("10.0.0.1:8080", "node-a"),
                                          spec("10.0.0.2:8080", "node-a"), spec("10.0.0.3:8080")));
  EXPECT_THAT(result.problems, IsEmpty());
}

TEST(DiscoveredSources, NotReadyAndTerminatingEndpointsAreLeftOut) {
  const auto result =
      discover({service()}, {slice("a", {endpoint({"10.0.0.1"}, "n", false),
                                         endpoint({"10.0.0.2"}, "n", std::nullopt),  // unset: ready
                                         endpoint({"10.0.0.3"}, "n", true, true),
                                         endpoint({"10.0.0.4"}, "n", std::nullopt, false)})});
  EXPECT_THAT(ids(result.sources), ElementsAre("drivers/gpu-inventory/10.0.0.2:8080",
                                               "drivers/gpu-inventory/10.0.0.4:8080"));
}

TEST(DiscoveredSources, OnlyTheSlicePortNamedInventoryCounts) {
  auto wrong_name = slice("a", {endpoint({"10.0.0.1"})});
  wrong_name.ports = {slicePort("metrics", 9090), slicePort("inventry", 8080)};
  auto no_number = slice("b", {endpoint({"10.0.0.2"})});
  no_number.ports = {slicePort(kInventoryPortName, std::nullopt)};
  EXPECT_THAT(discover({service()}, {wrong_name, no_number}).sources, IsEmpty());

  // The Service's own port must be named too.
  auto svc = service();
  svc.spec.ports = {port("http", 80)};
  const auto result = discover({svc}, {slice("c", {endpoint({"10.0.0.3"})})});
  EXPECT_THAT(result.sources, IsEmpty());
  EXPECT_THAT(result.problems,
              ElementsAre(DiscoveryProblem{kNs, kSvc, "no port named \"inventory\""}));
}

TEST(DiscoveredSources, HttpsByTheSlicePortsAppProtocolElseTheServices) {
  auto by_slice = slice("a", {endpoint({"10.0.0.1"})});
  by_slice.ports = {slicePort(kInventoryPortName, 8443, "https")};
  auto svc = service();
  svc.metadata.annotations[kCaAnnotation] = "PEM";
  auto result = discover({svc}, {by_slice});
  ASSERT_EQ(result.sources.size(), 1u);
  EXPECT_EQ(result.sources[0].url, "https://10.0.0.1:8443/v1/inventory");
  EXPECT_EQ(result.sources[0].tls_server_name, "gpu-inventory.drivers.svc");
  EXPECT_EQ(result.sources[0].ca_pem, "PEM");

  // The slice says nothing: the Service's port decides.
  svc.spec.ports = {port(kInventoryPortName, 443, "https")};
  result = discover({svc}, {slice("a", {endpoint({"10.0.0.1"})})});
  ASSERT_EQ(result.sources.size(), 1u);
  EXPECT_EQ(result.sources[0].url, "https://10.0.0.1:8080/v1/inventory");

  // The slice's appProtocol wins over the Service's.
  auto plain = slice("a", {endpoint({"10.0.0.1"})});
  plain.ports = {slicePort(kInventoryPortName, 8080, "http")};
  result = discover({svc}, {plain});
  ASSERT_EQ(result.sources.size(), 1u);
  EXPECT_EQ(result.sources[0].url, "http://10.0.0.1:8080/v1/inventory");
  EXPECT_EQ(result.sources[0].tls_server_name, "");
  EXPECT_EQ(result.sources[0].ca_pem, "");
}

TEST(DiscoveredSources, PathAnnotation) {
  auto svc = service();
  svc.metadata.annotations[kPathAnnotation] = "/api/inventory?format=json";
  auto result = discover({svc}, {slice("a", {endpoint({"10.0.0.1"})})});
  ASSERT_EQ(result.sources.size(), 1u);
  EXPECT_EQ(result.sources[0].url, "http://10.0.0.1:8080/api/inventory?format=json");

  for (const char* bad : {"inventory", "", "/a b", "/a#b"}) {
    svc.metadata.annotations[kPathAnnotation] = bad;
    result = discover({svc}, {slice("a", {endpoint({"10.0.0.1"})})});
    EXPECT_THAT(result.sources, IsEmpty()) << bad;
    ASSERT_EQ(result.problems.size(), 1u) << bad;
    EXPECT_THAT(result.problems[0].message, ::testing::HasSubstr(kPathAnnotation));
  }
}

TEST(DiscoveredSources, ScopeNodeBindsTheEndpointsNodeAndClusterNone) {
  const auto slices = std::vector{slice("a", {endpoint({"10.0.0.1"}, "node-a")})};
  auto svc = service();
  EXPECT_THAT(discover({svc}, slices).sources, ElementsAre(spec("10.0.0.1:8080", "node-a")));
  svc.metadata.annotations[kScopeAnnotation] = "node";
  EXPECT_THAT(discover({svc}, slices).sources, ElementsAre(spec("10.0.0.1:8080", "node-a")));
  svc.metadata.annotations[kScopeAnnotation] = "cluster";
  EXPECT_THAT(discover({svc}, slices).sources, ElementsAre(spec("10.0.0.1:8080")));

  svc.metadata.annotations[kScopeAnnotation] = "zone";
  const auto result = discover({svc}, slices);
  EXPECT_THAT(result.sources, IsEmpty());
  EXPECT_THAT(result.problems,
              ElementsAre(DiscoveryProblem{
                  kNs, kSvc,
                  "annotation resourceslice.dra.k8s.io/inventory-scope: must be \"node\" or "
                  "\"cluster\", not \"zone\""}));
}

TEST(DiscoveredSources, BadDriverLabelIsAProblemAndNoLabelIsNone) {
  auto bad = service(kNs, "bad", "Not_A_Driver");
  auto unlabelled = service(kNs, "other");
  unlabelled.metadata.labels.clear();
  const auto result = discover({bad, unlabelled}, {slice("a", {endpoint({"10.0.0.1"})}, "bad"),
                                                   slice("b", {endpoint({"10.0.0.2"})}, "other")});
  EXPECT_THAT(result.sources, IsEmpty());
  ASSERT_EQ(result.problems.size(), 1u);
  EXPECT_EQ(result.problems[0].service, "bad");
  EXPECT_THAT(result.problems[0].message,
              ::testing::StartsWith("label " + std::string(kDriverLabel)));
}

TEST(DiscoveredSources, NamespaceFilter) {
  const auto services = std::vector{service("a"), service("b")};
  const auto slices = std::vector{slice("s", {endpoint({"10.0.0.1"})}, kSvc, "a"),
                                  slice("s", {endpoint({"10.0.0.2"})}, kSvc, "b")};
  EXPECT_THAT(ids(discover(services, slices).sources),
              ElementsAre("a/gpu-inventory/10.0.0.1:8080", "b/gpu-inventory/10.0.0.2:8080"));
  EXPECT_THAT(ids(discover(services, slices, {{"b", "c"}}).sources),
              ElementsAre("b/gpu-inventory/10.0.0.2:8080"));
}

TEST(DiscoveredSources, SlicesBelongToTheServiceOfTheirNamespaceAndLabel) {
  // A slice without its Service, a Service without slices, a slice of the same name in
  // another namespace.
  const auto result = discover({service(kNs, "lonely"), service(kNs, kSvc)},
                               {slice("a", {endpoint({"10.0.0.1"})}, "gone"),
                                slice("b", {endpoint({"10.0.0.2"})}, kSvc, "elsewhere"),
                                slice("c", {endpoint({"10.0.0.3"})})});
  EXPECT_THAT(ids(result.sources), ElementsAre("drivers/gpu-inventory/10.0.0.3:8080"));
  EXPECT_THAT(result.problems, IsEmpty());
}

TEST(DiscoveredSources, IPv6InBracketsAndFqdnIgnored) {
  const auto result =
      discover({service()}, {slice("a", {endpoint({"fd00::1"})}, kSvc, kNs, "IPv6"),
                             slice("b", {endpoint({"driver.example.com"})}, kSvc, kNs, "FQDN")});
  ASSERT_EQ(result.sources.size(), 1u);
  EXPECT_EQ(result.sources[0].id, "drivers/gpu-inventory/[fd00::1]:8080");
  EXPECT_EQ(result.sources[0].url, "http://[fd00::1]:8080/v1/inventory");
}

TEST(DiscoveredSources, AnAddressInTwoSlicesIsOneSourceAndOrderDoesNotMatter) {
  const auto a = slice("a", {endpoint({"10.0.0.1"}, "node-a"), endpoint({"10.0.0.2"})});
  const auto b = slice("b", {endpoint({"10.0.0.1"}, "node-b")});
  const auto s1 = service(kNs, kSvc);
  const auto s2 = service(kNs, "z-svc");
  const auto c = slice("c", {endpoint({"10.0.0.1"})}, "z-svc");
  const auto forward = discover({s1, s2}, {a, b, c});
  const auto backward = discover({s2, s1}, {c, b, a});
  EXPECT_THAT(forward.sources, ElementsAre(spec("10.0.0.1:8080", "node-a"), spec("10.0.0.2:8080"),
                                           spec("10.0.0.1:8080", std::nullopt, kNs, "z-svc")));
  EXPECT_EQ(forward.sources, backward.sources);
}

// ---- SourceDiscovery over FakeKubeApi -------------------------------------------

// Records on_change's lists; tests wait for the n-th call (the timeout is a safety net).
class Recorder {
 public:
  void operator()(std::vector<SourceSpec> sources) {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(sources));
    cv_.notify_all();
  }
  bool waitForCalls(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return calls_.size() >= n; });
  }
  std::vector<std::vector<SourceSpec>> calls() {
    std::lock_guard lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::vector<SourceSpec>> calls_;
};

class SourceDiscoveryTest : public ::testing::Test {
 protected:
  void start(DiscoveryOptions options = {}) {
    discovery_ = std::make_unique<SourceDiscovery>(
        api_, clock_, options,
        [this](std::vector<SourceSpec> sources) { recorder_(std::move(sources)); });
    const size_t watches = std::max<size_t>(1, options.namespaces.size());
    discovery_->start();
    std::stop_source never;
    ASSERT_TRUE(discovery_->waitForSync(never.get_token()));
    // Every informer watches, so that settle() covers every event from now on.
    ASSERT_TRUE(api_.waitForActiveWatches(watches, "services"));
    ASSERT_TRUE(api_.waitForActiveWatches(watches, "endpointslices"));
  }
  // Waits until every watch has handled what the fake wrote (and so every refresh ran).
  void settle() { ASSERT_TRUE(api_.waitForWatchesDelivered()); }

  FakeClock clock_;
  FakeKubeApi api_{clock_};
  Recorder recorder_;
  std::unique_ptr<SourceDiscovery> discovery_;
};

TEST_F(SourceDiscoveryTest, ReportsAfterSyncAndAfterEachChangeButNotForANoOp) {
  ASSERT_TRUE(api_.putService(service()).ok());
  ASSERT_TRUE(api_.putEndpointSlice(slice("a", {endpoint({"10.0.0.1"}, "node-a")})).ok());
  start();
  ASSERT_TRUE(recorder_.waitForCalls(1));
  EXPECT_THAT(recorder_.calls()[0], ElementsAre(spec("10.0.0.1:8080", "node-a")));
  EXPECT_TRUE(discovery_->hasSynced());
  EXPECT_EQ(discovery_->sources(), recorder_.calls()[0]);

  // An endpoint added.
  ASSERT_TRUE(api_.putEndpointSlice(slice("a", {endpoint({"10.0.0.1"}, "node-a"),
                                                endpoint({"10.0.0.2"}, "node-b")}))
                  .ok());
  ASSERT_TRUE(recorder_.waitForCalls(2));
  EXPECT_THAT(recorder_.calls()[1],
              ElementsAre(spec("10.0.0.1:8080", "node-a"), spec("10.0.0.2:8080", "node-b")));

  // A change that leaves the list equal (an annotation, a not-ready endpoint): no call.
  auto svc = service();
  svc.metadata.annotations["example.com/note"] = "x";
  ASSERT_TRUE(api_.putService(svc).ok());
  ASSERT_TRUE(api_.putEndpointSlice(slice("a", {endpoint({"10.0.0.1"}, "node-a"),
                                                endpoint({"10.0.0.2"}, "node-b"),
                                                endpoint({"10.0.0.3"}, "node-c", false)}))
                  .ok());
  settle();
  EXPECT_EQ(recorder_.calls().size(), 2u);

  // An endpoint no longer ready, then the slice gone.
  ASSERT_TRUE(api_.putEndpointSlice(slice("a", {endpoint({"10.0.0.1"}, "node-a", false),
                                                endpoint({"10.0.0.2"}, "node-b")}))
                  .ok());
  ASSERT_TRUE(recorder_.waitForCalls(3));
  EXPECT_THAT(recorder_.calls()[2], ElementsAre(spec("10.0.0.2:8080", "node-b")));
  ASSERT_TRUE(api_.removeEndpointSlice(kNs, "a").ok());
  ASSERT_TRUE(recorder_.waitForCalls(4));
  EXPECT_THAT(recorder_.calls()[3], IsEmpty());
  settle();
  EXPECT_EQ(recorder_.calls().size(), 4u);
}

TEST_F(SourceDiscoveryTest, ReportsAnEmptyFirstListAndFollowsTheService) {
  ASSERT_TRUE(api_.putEndpointSlice(slice("a", {endpoint({"10.0.0.1"})})).ok());
  start();
  ASSERT_TRUE(recorder_.waitForCalls(1));
  EXPECT_THAT(recorder_.calls()[0], IsEmpty());  // a slice without its Service

  ASSERT_TRUE(api_.putService(service()).ok());
  ASSERT_TRUE(recorder_.waitForCalls(2));
  EXPECT_THAT(recorder_.calls()[1], ElementsAre(spec("10.0.0.1:8080")));

  // The Service switched to cluster scope, then deleted.
  auto svc = service();
  svc.metadata.annotations[kScopeAnnotation] = "cluster";
  ASSERT_TRUE(api_.putService(svc).ok());
  settle();
  EXPECT_EQ(recorder_.calls().size(), 2u);  // no node either way: the same list
  ASSERT_TRUE(api_.removeService(kNs, kSvc).ok());
  ASSERT_TRUE(recorder_.waitForCalls(3));
  EXPECT_THAT(recorder_.calls()[2], IsEmpty());
}

TEST_F(SourceDiscoveryTest, WatchesOnlyTheAllowedNamespacesByTheDriverLabel) {
  ASSERT_TRUE(api_.putService(service("a")).ok());
  ASSERT_TRUE(api_.putService(service("b")).ok());
  ASSERT_TRUE(api_.putEndpointSlice(slice("s", {endpoint({"10.0.0.1"})}, kSvc, "a")).ok());
  ASSERT_TRUE(api_.putEndpointSlice(slice("s", {endpoint({"10.0.0.2"})}, kSvc, "b")).ok());
  start({{"b", "c"}});
  ASSERT_TRUE(recorder_.waitForCalls(1));
  EXPECT_THAT(ids(recorder_.calls()[0]), ElementsAre("b/gpu-inventory/10.0.0.2:8080"));

  // Two informers per namespace, each listing by the driver label in its namespace.
  std::vector<std::string> listed;
  for (const auto& action : api_.actions()) {
    if (action.verb != "list") continue;
    EXPECT_EQ(action.options.label_selector, kDriverLabel);
    listed.push_back(action.resource + " " + action.namespace_);
  }
  std::sort(listed.begin(), listed.end());
  EXPECT_THAT(listed,
              ElementsAre("endpointslices b", "endpointslices c", "services b", "services c"));

  // Changes in a namespace not watched reach nobody.
  ASSERT_TRUE(api_.putEndpointSlice(slice("s", {endpoint({"10.0.0.9"})}, kSvc, "a")).ok());
  settle();
  EXPECT_EQ(recorder_.calls().size(), 1u);
}

TEST_F(SourceDiscoveryTest, ClusterWideKeepsEqualNamesOfTwoNamespacesApart) {
  ASSERT_TRUE(api_.putService(service("a")).ok());
  ASSERT_TRUE(api_.putService(service("b")).ok());
  ASSERT_TRUE(api_.putEndpointSlice(slice("s", {endpoint({"10.0.0.1"})}, kSvc, "a")).ok());
  ASSERT_TRUE(api_.putEndpointSlice(slice("s", {endpoint({"10.0.0.2"})}, kSvc, "b")).ok());
  start();
  ASSERT_TRUE(recorder_.waitForCalls(1));
  EXPECT_THAT(ids(recorder_.calls()[0]),
              ElementsAre("a/gpu-inventory/10.0.0.1:8080", "b/gpu-inventory/10.0.0.2:8080"));

  // A watched change in one namespace leaves the other's source alone.
  ASSERT_TRUE(api_.removeEndpointSlice("a", "s").ok());
  ASSERT_TRUE(recorder_.waitForCalls(2));
  EXPECT_THAT(ids(recorder_.calls()[1]), ElementsAre("b/gpu-inventory/10.0.0.2:8080"));
}

TEST_F(SourceDiscoveryTest, StopEndsTheWatches) {
  start();
  ASSERT_TRUE(recorder_.waitForCalls(1));
  EXPECT_EQ(api_.activeWatches("services"), 1u);
  EXPECT_EQ(api_.activeWatches("endpointslices"), 1u);
  discovery_->stop();
  EXPECT_EQ(api_.activeWatches("services"), 0u);
  EXPECT_EQ(api_.activeWatches("endpointslices"), 0u);
  ASSERT_TRUE(api_.putService(service()).ok());
  ASSERT_TRUE(api_.putEndpointSlice(slice("a", {endpoint({"10.0.0.1"})})).ok());
  EXPECT_EQ(recorder_.calls().size(), 1u);
}

}  // namespace
}  // namespace rsc::controller::pull
