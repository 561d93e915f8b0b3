// Pull-mode discovery against the real API server: a labelled Service, a hand-made
// EndpointSlice (there is no EndpointSlice controller in the test cluster; loopback addresses
// are refused, so it names a TEST-NET-1 address) and the Pod it names (its status written as a
// kubelet would) become the source SourceDiscovery reports, over RestKubeApi, for the driver's
// bound namespace; the Pod missing, the endpoint made not ready, or the driver bound elsewhere
// takes it away. Proves the Service, EndpointSlice and Pod codecs, paths and label selection
// against the server; the controller's use of it is pull_test's.
#include "controller/pull/discovery.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "test/integration/service_env.h"

namespace rsc::controller::pull {
namespace {

using testing::ClusterEnvironment;
using testing::Json;
using testing::ServiceEnv;

// NOLINTNEXTLINE(readability-identifier-naming)
const auto* const kCluster = ClusterEnvironment::install();

constexpr char kNs[] = "rsc-it-discovery";
constexpr char kService[] = "gpu-inventory";
constexpr char kDriver[] = "gpu.example.com";
// The server answers within milliseconds; this only bounds a broken test.
constexpr auto kWait = std::chrono::seconds(60);

// The lists on_change reported, for the test's thread to wait on.
class Lists {
 public:
  void add(std::vector<SourceSpec> sources) {
    std::lock_guard lock(mu_);
    last_ = std::move(sources);
    ++count_;
    cv_.notify_all();
  }
  // Waits until the last list reported is `expected`.
  bool waitFor(const std::vector<SourceSpec>& expected) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return count_ > 0 && last_ == expected; });
  }
  std::vector<SourceSpec> last() {
    std::lock_guard lock(mu_);
    return last_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SourceSpec> last_;
  size_t count_ = 0;
};

// An address nothing listens on (TEST-NET-1): discovery only reads it.
constexpr char kAddress[] = "192.0.2.10";

Json endpointSlice(bool ready, const std::string& address = kAddress) {
  return {
      {"apiVersion", "discovery.k8s.io/v1"},
      {"kind", "EndpointSlice"},
      {"metadata",
       {{"name", std::string(kService) + "-manual"},
        {"labels", {{kServiceNameLabel, kService}, {kDriverLabel, kDriver}}}}},
      {"addressType", "IPv4"},
      {"endpoints",
       {{{"addresses", {address}},
         {"conditions", {{"ready", ready}}},
         {"nodeName", "node-a"},
         {"targetRef", {{"kind", "Pod"}, {"namespace", kNs}, {"name", "gpu-driver-0"}}}}}},
      {"ports",
       {{{"name", kInventoryPortName},
         {"port", 8443},
         {"protocol", "TCP"},
         {"appProtocol", "https"}}}},
  };
}

TEST(DiscoveryIntegration, ALabelledServiceAndItsEndpointSliceAreOneSource) {
  ServiceEnv env;
  env.ensureNamespace(kNs);
  const std::string base = std::string("/api/v1/namespaces/") + kNs;
  const std::string slices =
      std::string("/apis/discovery.k8s.io/v1/namespaces/") + kNs + "/endpointslices";
  const Json service = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata",
       {{"name", kService},
        {"labels", {{kDriverLabel, kDriver}}},
        {"annotations", {{kPathAnnotation, "/inventory"}, {kCaAnnotation, "PEM"}}}}},
      {"spec",
       {{"ports",
         {{{"name", kInventoryPortName}, {"port", 443}, {"targetPort", 8443}},
          {{"name", "metrics"}, {"port", 9090}}}}}},
  };
  const auto created_service = env.kube("POST", base + "/services", service);
  ASSERT_EQ(created_service.code, 201) << created_service.body;
  // The server refuses loopback addresses in EndpointSlices (so an end-to-end test needs an
  // address of another interface for its endpoint).
  const auto loopback = env.kube("POST", slices, endpointSlice(/*ready=*/true, "127.0.0.1"));
  EXPECT_EQ(loopback.code, 422) << loopback.body;
  EXPECT_THAT(loopback.body, ::testing::HasSubstr("loopback"));
  const auto created_slice = env.kube("POST", slices, endpointSlice(/*ready=*/true));
  ASSERT_EQ(created_slice.code, 201) << created_slice.body;

  // One discovery with the driver bound to the namespace, one with it bound elsewhere.
  Lists in_namespace;
  Lists elsewhere;
  DiscoveryOptions bound;
  bound.bindings.push_back({kDriver, kNs, "gpu-driver"});
  DiscoveryOptions unbound;
  unbound.bindings.push_back({kDriver, "default", ""});
  unbound.bindings.push_back({"nic.example.com", kNs, ""});
  SourceDiscovery namespaced(env.api(), RealClock::instance(), bound,
                             [&](std::vector<SourceSpec> s) { in_namespace.add(std::move(s)); });
  SourceDiscovery other(env.api(), RealClock::instance(), unbound,
                        [&](std::vector<SourceSpec> s) { elsewhere.add(std::move(s)); });
  namespaced.start();
  other.start();
  // No Pod yet: the hand-made slice alone proves nothing.
  EXPECT_TRUE(in_namespace.waitFor({}));
  env.runningPod(kNs, "gpu-driver-0", "node-a", kAddress, "gpu-driver");

  SourceSpec expected;
  expected.driver = kDriver;
  expected.id = std::string(kNs) + "/" + kService + "/" + kAddress + ":8443";
  expected.url = std::string("https://") + kAddress + ":8443/inventory";
  expected.caller.node_name = "node-a";
  expected.ca_pem = "PEM";
  expected.tls_server_name = std::string(kService) + "." + kNs + ".svc";
  EXPECT_TRUE(in_namespace.waitFor({expected})) << in_namespace.last().size();
  EXPECT_TRUE(elsewhere.waitFor({})) << elsewhere.last().size();

  // The endpoint no longer ready: no source.
  const std::string slice_path = slices + "/" + kService + "-manual";
  Json updated = endpointSlice(/*ready=*/false);
  updated["metadata"]["resourceVersion"] =
      Json::parse(created_slice.body)["metadata"]["resourceVersion"];
  const auto put = env.kube("PUT", slice_path, updated);
  ASSERT_EQ(put.code, 200) << put.body;
  EXPECT_TRUE(in_namespace.waitFor({}));

  // Ready again, then the Service deleted: the source comes and goes.
  updated = endpointSlice(/*ready=*/true);
  updated["metadata"]["resourceVersion"] = Json::parse(put.body)["metadata"]["resourceVersion"];
  ASSERT_EQ(env.kube("PUT", slice_path, updated).code, 200);
  EXPECT_TRUE(in_namespace.waitFor({expected}));
  ASSERT_EQ(env.kube("DELETE", base + "/services/" + kService).code, 200);
  EXPECT_TRUE(in_namespace.waitFor({}));
  EXPECT_THAT(elsewhere.last(), ::testing::IsEmpty());

  namespaced.stop();
  other.stop();
  env.kube("DELETE", slice_path);
}

}  // namespace
}  // namespace rsc::controller::pull
