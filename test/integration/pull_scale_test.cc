// Attack test (issue 31): whoever may create EndpointSlices in a namespace the controller
// discovers can make it pull from as many endpoints as they list. Against the real API server
// and the controller binary, a labelled Service gets 200, then 2,000, then 10,000 endpoints
// (--pull-max-sources), each with the Pod it names (targetRef, with the endpoint's address as
// its podIP, as discovery requires); the controller must keep a bounded number of threads
// (counted by the kernel: /proc/PID/status), stay ready and fetch every source. A thread per source
// (the poller before issue 31) runs 230 threads at 200 sources and dies at a pids limit.
//
// The endpoints are this machine's own non-loopback address (the API server refuses loopback
// addresses in EndpointSlices), each on a port nothing listens on, so every fetch fails at
// once ("Unreachable") and the test measures the schedule, not the network. One endpoint per
// EndpointSlice: a slice has one inventory port, and a source is an address and a port.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <sstream>
#include <thread>

#include "test/integration/leader_flags.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using std::chrono::seconds;

constexpr char kNs[] = "pull-scale";
constexpr char kDriver[] = "scale.example.com";
constexpr char kService[] = "scale-inventory";
constexpr char kNode[] = "node-a";
constexpr char kServiceAccount[] = "scale-driver";
// The most threads the controller may run, however many sources, over those it runs at rest
// (pull workers included; 29 when this test was written): those the HTTP client library
// (cpprestsdk, Boost.Asio) starts with the first fetches, once (3 then: 32 at 200 and at 2,000
// sources). A thread per source is 200 more.
constexpr int kFirstFetchThreads = 4;
// The first port of the endpoints; endpoint i is on kFirstPort + i.
constexpr int kFirstPort = 40000;
// Parallel API requests while setting up (the API server answers each in milliseconds).
constexpr int kSetupThreads = 8;

// The controller's pull flags, in one place.
std::vector<std::string> pullFlags() {
  return {"--pull-discovery",
          "--pull-driver=" + std::string(kDriver) + "=" + kNs + "/" + kServiceAccount,
          "--pull-interval=10s", "--pull-timeout=2s"};
}

// The process's threads; -1 when it is gone.
int threadsOf(pid_t pid) {
  const double threads = procStatus(pid, "Threads");
  return std::isnan(threads) ? -1 : static_cast<int>(threads);
}

class PullScaleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    address_ = ownAddress();
    env_.ensureNamespace(kNs);
    env_.ensureNode(kNode);
    env_.ensureServiceAccount(kNs, kServiceAccount);
    Json service = {
        {"apiVersion", "v1"},
        {"kind", "Service"},
        {"metadata",
         {{"name", kService},
          {"labels", {{"resourceslice.dra.k8s.io/driver", kDriver}}},
          {"annotations", {{"resourceslice.dra.k8s.io/inventory-scope", "cluster"}}}}},
        {"spec",
         {{"ports", {{{"name", "inventory"}, {"port", 80}, {"targetPort", "inventory"}}}}}}};
    env_.ensure("/api/v1/namespaces/" + std::string(kNs) + "/services", service);
  }

  // Endpoint i: its Pod (on kNode, running with the endpoint's address) and its EndpointSlice.
  void addEndpoint(int i) {
    const std::string ns = kNs;
    const std::string pod = "scale-driver-" + std::to_string(i);
    env_.runningPod(ns, pod, kNode, address_, kServiceAccount);

    const Json slice = {
        {"apiVersion", "discovery.k8s.io/v1"},
        {"kind", "EndpointSlice"},
        {"metadata",
         {{"name", pod},
          {"labels",
           {{"kubernetes.io/service-name", kService},
            {"resourceslice.dra.k8s.io/driver", kDriver}}}}},
        {"addressType", "IPv4"},
        {"endpoints",
         {{{"addresses", {address_}},
           {"conditions", {{"ready", true}}},
           {"nodeName", kNode},
           {"targetRef", {{"kind", "Pod"}, {"namespace", ns}, {"name", pod}}}}}},
        {"ports", {{{"name", "inventory"}, {"port", kFirstPort + i}, {"protocol", "TCP"}}}}};
    env_.ensure("/apis/discovery.k8s.io/v1/namespaces/" + ns + "/endpointslices", slice);
  }

  // Endpoints [from, to), on kSetupThreads threads.
  void addEndpoints(int from, int to) {
    std::atomic<int> next = from;
    std::vector<std::jthread> threads;
    for (int t = 0; t < kSetupThreads; ++t) {
      threads.emplace_back([&] {
        for (int i = next++; i < to; i = next++) addEndpoint(i);
      });
    }
  }

  // Every fetch of the driver's sources so far, over all results.
  double fetches(const ControllerProcess& c) {
    const HttpAnswer a =
        ServiceEnv::http("GET", "http://127.0.0.1:" + std::to_string(c.metrics_port) + "/metrics");
    const std::string prefix =
        std::string("resourceslice_controller_pull_fetches_total{driver=\"") + kDriver + "\"";
    double sum = 0;
    std::istringstream lines(a.body);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with(prefix)) sum += std::stod(line.substr(line.rfind(' ') + 1));
    }
    return sum;
  }
  double sources(const ControllerProcess& c) {
    return env_.metric(
        c, std::string("resourceslice_controller_pull_sources{driver=\"") + kDriver + "\"}");
  }

  // Grows the endpoints to `n`, waits until the controller pulls from all of them and has
  // fetched each at least once more, and returns the most threads it ran meanwhile.
  int scaleTo(const ControllerProcess& c, int from, int n) {
    const auto setup_start = std::chrono::steady_clock::now();
    addEndpoints(from, n);
    const auto setup_end = std::chrono::steady_clock::now();
    const double setup_seconds = std::chrono::duration<double>(setup_end - setup_start).count();
    const pid_t pid = c.process->pid();
    int most = threadsOf(pid);
    const auto sample = [&] {
      most = std::max(most, threadsOf(pid));
      return true;
    };
    // A minute, and a minute more for every 2,500 sources to discover and fetch.
    const auto patience = seconds(60 + 60 * (n - from) / 2500);
    EXPECT_TRUE(ServiceEnv::eventually([&] { return sample() && sources(c) == n; }, patience))
        << "sources: " << sources(c) << "\n"
        << c.process->log();
    const double before = fetches(c);
    EXPECT_TRUE(
        ServiceEnv::eventually([&] { return sample() && fetches(c) >= before + n; }, patience))
        << "fetches: " << fetches(c) - before << " of " << n;
    sample();
    EXPECT_EQ(
        ServiceEnv::http("GET", "http://127.0.0.1:" + std::to_string(c.health_port) + "/readyz")
            .code,
        200);
    EXPECT_TRUE(c.process->running());
    std::cout << "[ figures ] " << n << " sources: at most " << most << " threads; " << fetches(c)
              << " fetches so far; setup " << setup_seconds << " s, then "
              << std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_end).count()
              << " s until each was fetched; VmRSS " << procStatus(pid, "VmRSS") / 1024 << " MiB\n";
    return most;
  }

  ServiceEnv env_;
  std::string address_;
};

TEST_F(PullScaleTest, ThousandsOfDiscoveredEndpointsCostNoThreadEach) {
  if (address_.empty()) GTEST_SKIP() << "no IPv4 address but loopback for the endpoints";
  std::vector<std::string> args = leaderFlags("pull-scale-0", "pull-scale-lease");
  const std::vector<std::string> pull = pullFlags();
  args.insert(args.end(), pull.begin(), pull.end());
  ControllerProcess c = env_.startController("pull-scale", args);
  const int at_rest = threadsOf(c.process->pid());
  std::cout << "[ figures ] 0 sources: " << at_rest << " threads; VmRSS "
            << procStatus(c.process->pid(), "VmRSS") / 1024 << " MiB\n";
  const int bound = at_rest + kFirstFetchThreads;
  EXPECT_LE(scaleTo(c, 0, 200), bound) << c.process->log();
  EXPECT_LE(scaleTo(c, 200, 2000), bound);
  // Up to --pull-max-sources (10,000 by default): still no thread more.
  EXPECT_LE(scaleTo(c, 2000, 10000), bound);
  expectCleanStop(c);
}

}  // namespace
}  // namespace rsc::testing
