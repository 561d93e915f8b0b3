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
// The node of a test Pod whose endpoint names none.
constexpr char kPodNode[] = "node-p";
constexpr char kPodSa[] = "gpu-driver";

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

// The name of the test Pod that serves `address`.
std::string podName(std::string address) {
  std::ranges::replace_if(
      address, [](char c) { return c == '.' || c == ':'; }, '-');
  return "pod-" + address;
}

// An endpoint whose targetRef names the Pod of its first address.
client::Endpoint endpoint(std::vector<std::string> addresses, std::optional<std::string> node = {},
                          std::optional<bool> ready = true,
                          std::optional<bool> terminating = std::nullopt) {
  client::Endpoint e;
  e.target_ref = client::EndpointTargetRef{"Pod", "", podName(addresses.at(0)), "", nullptr};
  e.addresses = std::move(addresses);
  e.node_name = std::move(node);
  e.conditions.ready = ready;
  e.conditions.terminating = terminating;
  return e;
}

// The Pods that vouch for the endpoints of `slices`, as the kubelet and the EndpointSlice
// controller would make them: a Pod per targetRef with the endpoint's addresses, on its node
// (kPodNode when it names none), as kPodSa. Slices are read in name order and the first Pod of
// a name stays, so any order of `slices` gives the same Pods.
std::vector<client::Pod> podsFor(std::vector<client::EndpointSlice> slices) {
  std::ranges::sort(slices, {}, [](const client::EndpointSlice& s) { return s.metadata.name; });
  std::map<std::pair<std::string, std::string>, client::Pod> pods;
  for (const client::EndpointSlice& slice : slices) {
    for (const client::Endpoint& e : slice.endpoints) {
      if (!e.target_ref) continue;
      client::Pod pod;
      pod.metadata.namespace_ = slice.metadata.namespace_;
      pod.metadata.name = e.target_ref->name;
      pod.spec.node_name = e.node_name.value_or(kPodNode);
      pod.spec.service_account_name = kPodSa;
      for (const std::string& address : e.addresses) pod.status.pod_ips.push_back({address});
      pods.try_emplace({pod.metadata.namespace_, pod.metadata.name}, std::move(pod));
    }
  }
  std::vector<client::Pod> out;
  for (auto& [key, pod] : pods) out.push_back(std::move(pod));
  return out;
}

// kDriver bound to each of `namespaces`.
DiscoveryOptions bound(const std::vector<std::string>& namespaces = {kNs, "a", "b", "c",
                                                                     "elsewhere"}) {
  DiscoveryOptions options;
  for (const std::string& ns : namespaces) options.bindings.push_back({kDriver, ns, ""});
  return options;
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
                         const DiscoveryOptions& options = bound()) {
  return discoveredSources(services, slices, podsFor(slices), options);
}

// ---- the rule ----------------------------------------------------------------

TEST(DiscoveredSources, EveryReadyAddressOfTheInventoryPortIsOneSource) {
  const auto result = discover(
      {service()},
      {slice("a", {endpoint({"10.0.0.2", "10.0.0.1"}, "node-a"), endpoint({"10.0.0.3"})})});
  EXPECT_THAT(result.sources,
              ElementsAre(spec("10.0.0.1:8080", "node-a"), spec("10.0.0.2:8080", "node-a"),
                          spec("10.0.0.3:8080", kPodNode)));
  EXPECT_THAT(result.problems, IsEmpty());
  EXPECT_THAT(result.refused, IsEmpty());
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

TEST(DiscoveredSources, OnlyTheNamespacesADriverIsBoundTo) {
  const auto services = std::vector{service("a"), service("b")};
  const auto slices = std::vector{slice("s", {endpoint({"10.0.0.1"})}, kSvc, "a"),
                                  slice("s", {endpoint({"10.0.0.2"})}, kSvc, "b")};
  EXPECT_THAT(ids(discover(services, slices).sources),
              ElementsAre("a/gpu-inventory/10.0.0.1:8080", "b/gpu-inventory/10.0.0.2:8080"));
  EXPECT_THAT(ids(discover(services, slices, bound({"b", "c"})).sources),
              ElementsAre("b/gpu-inventory/10.0.0.2:8080"));
  // No binding: nothing at all is discovered.
  const auto none = discover(services, slices, DiscoveryOptions{});
  EXPECT_THAT(none.sources, IsEmpty());
  EXPECT_THAT(none.refused, IsEmpty());
}

TEST(DiscoveredSources, AServiceOfADriverNotBoundToItsNamespaceIsRefused) {
  // The namespace is bound for kDriver; a Service there claims another driver, which is bound
  // elsewhere, and one claims a driver bound nowhere (a pushing driver).
  DiscoveryOptions options = bound({kNs});
  options.bindings.push_back({"nic.example.com", "nic-system", ""});
  const auto nic = service(kNs, "nic", "nic.example.com");
  const auto pushed = service(kNs, "pushed", "pushed.example.com");
  const auto result = discover({service(), nic, pushed},
                               {slice("a", {endpoint({"10.0.0.1"}, "node-a")}),
                                slice("b", {endpoint({"10.0.0.2"}, "node-a")}, "nic"),
                                slice("c", {endpoint({"10.0.0.3"}, "node-a")}, "pushed")},
                               options);
  EXPECT_THAT(result.sources, ElementsAre(spec("10.0.0.1:8080", "node-a")));
  ASSERT_EQ(result.refused.size(), 2u);
  EXPECT_EQ(result.refused[0].id, "drivers/nic");
  EXPECT_EQ(result.refused[0].driver, "nic.example.com");
  EXPECT_EQ(result.refused[0].reason, IgnoredReason::kUnbound);
  EXPECT_EQ(result.refused[0].message,
            "driver \"nic.example.com\" is not bound to namespace \"drivers\" (--pull-driver)");
  EXPECT_EQ(result.refused[1].id, "drivers/pushed");
  EXPECT_EQ(result.refused[1].reason, IgnoredReason::kUnbound);
}

// An endpoint is as good as the Pod its targetRef names: every way a hand-written
// EndpointSlice can lie is refused, and the node always comes from the Pod.
TEST(DiscoveredSources, AnEndpointCountsOnlyWhenItsPodVouchesForIt) {
  struct Case {
    std::string name;
    std::function<void(client::Endpoint&, client::Pod&)> edit;
    std::string problem;  // empty: accepted
  };
  const std::vector<Case> cases = {
      {"genuine", [](client::Endpoint&, client::Pod&) {}, ""},
      {"no targetRef", [](client::Endpoint& e, client::Pod&) { e.target_ref.reset(); },
       "the endpoint names no Pod (targetRef)"},
      {"targetRef to a Node",
       [](client::Endpoint& e, client::Pod&) { e.target_ref->kind = "Node"; },
       "the endpoint names no Pod (targetRef)"},
      {"Pod of another namespace",
       [](client::Endpoint& e, client::Pod&) { e.target_ref->namespace_ = "kube-system"; },
       "its targetRef names a Pod of another namespace (kube-system)"},
      {"no such Pod", [](client::Endpoint& e, client::Pod&) { e.target_ref->name = "ghost"; },
       "its targetRef Pod \"ghost\" does not exist"},
      {"another Pod of that name",
       [](client::Endpoint& e, client::Pod& p) {
         e.target_ref->uid = "old-uid";
         p.metadata.uid = "new-uid";
       },
       "its targetRef Pod \"pod-10-0-0-1\" does not exist"},
      {"terminating",
       [](client::Endpoint&, client::Pod& p) {
         p.metadata.deletion_timestamp = "2026-12-04T00:00:00Z";
       },
       "its Pod \"pod-10-0-0-1\" is being deleted"},
      {"another address",
       [](client::Endpoint&, client::Pod& p) { p.status.pod_ips = {{"10.9.9.9"}}; },
       "its Pod \"pod-10-0-0-1\" does not have the address 10.0.0.1"},
      {"not scheduled", [](client::Endpoint&, client::Pod& p) { p.spec.node_name.clear(); },
       "its Pod \"pod-10-0-0-1\" runs on no node"},
      {"the slice names another node",
       [](client::Endpoint& e, client::Pod&) { e.node_name = "node-b"; },
       "its Pod \"pod-10-0-0-1\" runs on node \"node-a\", not on the EndpointSlice's \"node-b\""},
      {"another ServiceAccount",
       [](client::Endpoint&, client::Pod& p) { p.spec.service_account_name = "intruder"; },
       "its Pod \"pod-10-0-0-1\" runs as ServiceAccount \"intruder\", not as \"gpu-driver\" "
       "(--pull-driver)"},
  };
  DiscoveryOptions options;
  options.bindings.push_back({kDriver, kNs, kPodSa});
  for (const Case& c : cases) {
    auto s = slice("a", {endpoint({"10.0.0.1"}, "node-a")});
    auto pods = podsFor({s});
    c.edit(s.endpoints[0], pods[0]);
    const auto result = discoveredSources({service()}, {s}, pods, options);
    if (c.problem.empty()) {
      EXPECT_THAT(result.sources, ElementsAre(spec("10.0.0.1:8080", "node-a"))) << c.name;
      EXPECT_THAT(result.refused, IsEmpty()) << c.name;
      continue;
    }
    EXPECT_THAT(result.sources, IsEmpty()) << c.name;
    EXPECT_THAT(result.refused,
                ElementsAre(DiscoveryRefusal{"drivers/gpu-inventory/10.0.0.1:8080", kDriver,
                                             IgnoredReason::kUnverified, c.problem}))
        << c.name;
  }
}

TEST(DiscoveredSources, TheNodeIsThePodsWhateverTheSliceLeavesOut) {
  auto s = slice("a", {endpoint({"10.0.0.1"})});  // no nodeName in the slice
  auto pods = podsFor({s});
  pods[0].spec.node_name = "node-z";
  EXPECT_THAT(discoveredSources({service()}, {s}, pods, bound()).sources,
              ElementsAre(spec("10.0.0.1:8080", "node-z")));
  // podIP alone (no podIPs) counts too.
  pods[0].status.pod_ips.clear();
  pods[0].status.pod_ip = "10.0.0.1";
  EXPECT_THAT(discoveredSources({service()}, {s}, pods, bound()).sources,
              ElementsAre(spec("10.0.0.1:8080", "node-z")));
}

TEST(ParsePullDriver, BindingsPerNamespaceAndErrorsThatNameThePart) {
  auto parsed = parsePullDriver("nic.example.com=nic-system/nic-driver,edge");
  ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
  EXPECT_THAT(*parsed, ElementsAre(PullBinding{"nic.example.com", "nic-system", "nic-driver"},
                                   PullBinding{"nic.example.com", "edge", ""}));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"nic.example.com", "must be DRIVER=NAMESPACE"},
      {"Nic=ns", "the driver name \"Nic\""},
      {"nic.example.com=", "the namespace name \"\""},
      {"nic.example.com=Bad_NS", "the namespace name \"Bad_NS\""},
      {"nic.example.com=ns/", "the ServiceAccount name \"\""},
      {"nic.example.com=ns,ns/sa", "the namespace \"ns\" is listed twice"},
  };
  for (const auto& [value, message] : bad) {
    const auto result = parsePullDriver(value);
    ASSERT_FALSE(result.ok()) << value;
    EXPECT_THAT(result.status().message(), ::testing::HasSubstr(message)) << value;
  }
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
  // One Pod serves 10.0.0.1 (on node-a): the slice that says node-b is not believed.
  EXPECT_THAT(forward.sources,
              ElementsAre(spec("10.0.0.1:8080", "node-a"), spec("10.0.0.2:8080", kPodNode),
                          spec("10.0.0.1:8080", "node-a", kNs, "z-svc")));
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
  void start(DiscoveryOptions options = bound({kNs})) {
    options.on_refused = [this](IgnoredReason reason) {
      std::lock_guard lock(refused_mu_);
      refused_.emplace_back(ignoredReasonName(reason));
    };
    const size_t watches = options.namespaces().size();
    discovery_ = std::make_unique<SourceDiscovery>(
        api_, clock_, options,
        [this](std::vector<SourceSpec> sources) { recorder_(std::move(sources)); });
    discovery_->start();
    std::stop_source never;
    ASSERT_TRUE(discovery_->waitForSync(never.get_token()));
    // Every informer watches, so that settle() covers every event from now on.
    ASSERT_TRUE(api_.waitForActiveWatches(watches, "services"));
    ASSERT_TRUE(api_.waitForActiveWatches(watches, "endpointslices"));
    ASSERT_TRUE(api_.waitForActiveWatches(watches, "pods"));
  }
  // Puts the slice and the Pods that vouch for its endpoints.
  void putSlice(const client::EndpointSlice& s) {
    for (const client::Pod& pod : podsFor({s})) ASSERT_TRUE(api_.putPod(pod).ok());
    ASSERT_TRUE(api_.putEndpointSlice(s).ok());
  }
  std::vector<std::string> refused() {
    std::lock_guard lock(refused_mu_);
    return refused_;
  }
  // Waits until every watch has handled what the fake wrote (and so every refresh ran).
  void settle() { ASSERT_TRUE(api_.waitForWatchesDelivered()); }

  FakeClock clock_;
  FakeKubeApi api_{clock_};
  Recorder recorder_;
  std::mutex refused_mu_;
  std::vector<std::string> refused_;  // guarded by refused_mu_
  std::unique_ptr<SourceDiscovery> discovery_;
};

TEST_F(SourceDiscoveryTest, ReportsAfterSyncAndAfterEachChangeButNotForANoOp) {
  ASSERT_TRUE(api_.putService(service()).ok());
  putSlice(slice("a", {endpoint({"10.0.0.1"}, "node-a")}));
  start();
  ASSERT_TRUE(recorder_.waitForCalls(1));
  EXPECT_THAT(recorder_.calls()[0], ElementsAre(spec("10.0.0.1:8080", "node-a")));
  EXPECT_TRUE(discovery_->hasSynced());
  EXPECT_EQ(discovery_->sources(), recorder_.calls()[0]);

  // An endpoint added.
  putSlice(slice("a", {endpoint({"10.0.0.1"}, "node-a"), endpoint({"10.0.0.2"}, "node-b")}));
  ASSERT_TRUE(recorder_.waitForCalls(2));
  EXPECT_THAT(recorder_.calls()[1],
              ElementsAre(spec("10.0.0.1:8080", "node-a"), spec("10.0.0.2:8080", "node-b")));

  // A change that leaves the list equal (an annotation, a not-ready endpoint): no call.
  auto svc = service();
  svc.metadata.annotations["example.com/note"] = "x";
  ASSERT_TRUE(api_.putService(svc).ok());
  putSlice(slice("a", {endpoint({"10.0.0.1"}, "node-a"), endpoint({"10.0.0.2"}, "node-b"),
                       endpoint({"10.0.0.3"}, "node-c", false)}));
  settle();
  EXPECT_EQ(recorder_.calls().size(), 2u);

  // An endpoint no longer ready, then the slice gone.
  putSlice(slice("a", {endpoint({"10.0.0.1"}, "node-a", false), endpoint({"10.0.0.2"}, "node-b")}));
  ASSERT_TRUE(recorder_.waitForCalls(3));
  EXPECT_THAT(recorder_.calls()[2], ElementsAre(spec("10.0.0.2:8080", "node-b")));
  ASSERT_TRUE(api_.removeEndpointSlice(kNs, "a").ok());
  ASSERT_TRUE(recorder_.waitForCalls(4));
  EXPECT_THAT(recorder_.calls()[3], IsEmpty());
  settle();
  EXPECT_EQ(recorder_.calls().size(), 4u);
}

TEST_F(SourceDiscoveryTest, ReportsAnEmptyFirstListAndFollowsTheService) {
  putSlice(slice("a", {endpoint({"10.0.0.1"})}));
  start();
  ASSERT_TRUE(recorder_.waitForCalls(1));
  EXPECT_THAT(recorder_.calls()[0], IsEmpty());  // a slice without its Service

  ASSERT_TRUE(api_.putService(service()).ok());
  ASSERT_TRUE(recorder_.waitForCalls(2));
  EXPECT_THAT(recorder_.calls()[1], ElementsAre(spec("10.0.0.1:8080", kPodNode)));

  // The Service switched to cluster scope (no node), then deleted.
  auto svc = service();
  svc.metadata.annotations[kScopeAnnotation] = "cluster";
  ASSERT_TRUE(api_.putService(svc).ok());
  ASSERT_TRUE(recorder_.waitForCalls(3));
  EXPECT_THAT(recorder_.calls()[2], ElementsAre(spec("10.0.0.1:8080")));
  ASSERT_TRUE(api_.removeService(kNs, kSvc).ok());
  ASSERT_TRUE(recorder_.waitForCalls(4));
  EXPECT_THAT(recorder_.calls()[3], IsEmpty());
}

TEST_F(SourceDiscoveryTest, WatchesOnlyTheBoundNamespaces) {
  ASSERT_TRUE(api_.putService(service("a")).ok());
  ASSERT_TRUE(api_.putService(service("b")).ok());
  putSlice(slice("s", {endpoint({"10.0.0.1"})}, kSvc, "a"));
  putSlice(slice("s", {endpoint({"10.0.0.2"})}, kSvc, "b"));
  start(bound({"b", "c"}));
  ASSERT_TRUE(recorder_.waitForCalls(1));
  EXPECT_THAT(ids(recorder_.calls()[0]), ElementsAre("b/gpu-inventory/10.0.0.2:8080"));

  // Three informers per namespace, nothing cluster-wide: Services and EndpointSlices by the
  // driver label, every Pod.
  std::vector<std::string> listed;
  for (const auto& action : api_.actions()) {
    if (action.verb != "list") continue;
    EXPECT_EQ(action.options.label_selector, action.resource == "pods" ? "" : kDriverLabel);
    listed.push_back(action.resource + " " + action.namespace_);
  }
  std::sort(listed.begin(), listed.end());
  EXPECT_THAT(listed, ElementsAre("endpointslices b", "endpointslices c", "pods b", "pods c",
                                  "services b", "services c"));

  // Changes in a namespace not watched reach nobody.
  putSlice(slice("s", {endpoint({"10.0.0.9"})}, kSvc, "a"));
  settle();
  EXPECT_EQ(recorder_.calls().size(), 1u);
}

TEST_F(SourceDiscoveryTest, EqualNamesOfTwoNamespacesStayApart) {
  ASSERT_TRUE(api_.putService(service("a")).ok());
  ASSERT_TRUE(api_.putService(service("b")).ok());
  putSlice(slice("s", {endpoint({"10.0.0.1"})}, kSvc, "a"));
  putSlice(slice("s", {endpoint({"10.0.0.2"})}, kSvc, "b"));
  start(bound({"a", "b"}));
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
  EXPECT_EQ(api_.activeWatches("pods"), 1u);
  discovery_->stop();
  EXPECT_EQ(api_.activeWatches("services"), 0u);
  EXPECT_EQ(api_.activeWatches("endpointslices"), 0u);
  EXPECT_EQ(api_.activeWatches("pods"), 0u);
  ASSERT_TRUE(api_.putService(service()).ok());
  putSlice(slice("a", {endpoint({"10.0.0.1"})}));
  EXPECT_EQ(recorder_.calls().size(), 1u);
}

TEST_F(SourceDiscoveryTest, AnEndpointFollowsItsPodAndARefusalIsCountedOnce) {
  ASSERT_TRUE(api_.putService(service()).ok());
  // A hand-made slice whose Pod does not exist (yet).
  ASSERT_TRUE(api_.putEndpointSlice(slice("a", {endpoint({"10.0.0.1"}, "node-a")})).ok());
  start();
  ASSERT_TRUE(recorder_.waitForCalls(1));
  EXPECT_THAT(recorder_.calls()[0], IsEmpty());
  EXPECT_THAT(refused(), ElementsAre("Unverified"));

  // Other events recompute the list; the same refusal is not counted again.
  auto svc = service();
  svc.metadata.annotations["example.com/note"] = "x";
  ASSERT_TRUE(api_.putService(svc).ok());
  settle();
  EXPECT_THAT(refused(), ElementsAre("Unverified"));

  // The Pod appears (scheduled, its IP set): the endpoint is a source on the Pod's node.
  client::Pod pod = podsFor({slice("a", {endpoint({"10.0.0.1"}, "node-a")})}).at(0);
  ASSERT_TRUE(api_.putPod(pod).ok());
  ASSERT_TRUE(recorder_.waitForCalls(2));
  EXPECT_THAT(recorder_.calls()[1], ElementsAre(spec("10.0.0.1:8080", "node-a")));

  // The Pod starts terminating: the endpoint goes at once, before its slice says so.
  pod.metadata.deletion_timestamp = "2026-12-04T00:00:00Z";
  ASSERT_TRUE(api_.putPod(pod).ok());
  ASSERT_TRUE(recorder_.waitForCalls(3));
  EXPECT_THAT(recorder_.calls()[2], IsEmpty());
  EXPECT_THAT(refused(), ElementsAre("Unverified", "Unverified"));
}

}  // namespace
}  // namespace rsc::controller::pull
