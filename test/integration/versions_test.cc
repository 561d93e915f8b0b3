// The example inventory (controller/inventory/examples) published on the
// Kubernetes release and feature gates of this run's cluster (test/run-tests
// --kubernetes and --dra-gates, or TESTCLUSTER_KUBERNETES and
// TESTCLUSTER_APISERVER_ARGS): every pool is published at generation 1 with
// one create per slice and no other write, and nothing is written again when
// the same pushes come back, when a foreign change makes the controller look
// at each pool again, or when a restarted controller is pushed everything
// again (a test of its own: the restart is where a controller that learns
// what the server drops from its own writes pays again). Writes are counted by the API server
// itself (apiserver_request_total), per example file, so that a rewrite the controller's own
// metrics would not attribute shows as well.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using std::chrono::seconds;
namespace fs = std::filesystem;

// A rewrite loop is driven by the watch events of the controller's own
// writes, each round within milliseconds of the last; a pool whose write
// count has not moved for this long has settled.
constexpr auto kQuietPeriod = seconds(3);
// How long one push may take to settle, storm included, before the test
// gives up on it.
constexpr auto kSettleTimeout = seconds(90);

// One example file: the request that pushes it and the pools it holds.
struct Example {
  std::string file;
  std::string path;  // below the inventory URL
  std::string body;
  std::string driver;
  std::vector<std::string> pools;
};

std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every example, in file name order. `DRIVER-POOL.pool.json` is one pool (the
// example drivers' names have no '-'), `DRIVER.driver.json` a whole driver.
std::vector<Example> examples() {
  std::vector<Example> out;
  const fs::path dir = ClusterEnvironment::sourceRoot() / "controller/inventory/examples";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    Example e;
    e.file = name;
    e.body = readFile(f);
    if (name.ends_with(".pool.json")) {
      const std::string stem = name.substr(0, name.size() - std::string(".pool.json").size());
      const size_t dash = stem.find('-');
      if (dash == std::string::npos) continue;
      e.driver = stem.substr(0, dash);
      e.pools = {stem.substr(dash + 1)};
      e.path = "/v1/drivers/" + e.driver + "/pools/" + e.pools[0];
    } else if (name.ends_with(".driver.json")) {
      e.driver = name.substr(0, name.size() - std::string(".driver.json").size());
      const Json driver = Json::parse(e.body);
      for (const auto& [pool, unused] : driver["pools"].items()) e.pools.push_back(pool);
      e.path = "/v1/drivers/" + e.driver;
    } else {
      continue;
    }
    if (e.pools.empty()) {
      ADD_FAILURE() << name << " holds no pool";
      continue;
    }
    out.push_back(std::move(e));
  }
  return out;
}

// ResourceSlice writes the API server served, by verb.
struct Writes {
  double create = 0;
  double update = 0;
  double patch = 0;
  double del = 0;

  double total() const { return create + update + patch + del; }
  Writes operator-(const Writes& o) const {
    return {create - o.create, update - o.update, patch - o.patch, del - o.del};
  }
  std::string toString() const {
    std::ostringstream s;
    s << create << " create, " << update << " update, " << patch << " patch, " << del << " delete";
    return s.str();
  }
};

class VersionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The example pools' nodes (node-local pools wait for their Node).
    for (const char* node : {"node-a", "node-b", "node-c"}) env_.ensureNode(node);
    // Each test starts from no slice of the controller's (the cluster serves
    // every test of this binary).
    client::ListOptions managed;
    managed.label_selector = "app.kubernetes.io/managed-by=resourceslice-controller";
    const Status deleted = env_.api().deleteResourceSlices(managed);
    ASSERT_TRUE(deleted.ok()) << deleted.toString();
    ASSERT_TRUE(ServiceEnv::eventually([&] {
      const auto left = env_.api().listResourceSlices(managed);
      return left.ok() && left->items.empty();
    }));
    controller_ = env_.startController("versions", {"--auth=none", "-v=4"});
    const HttpAnswer version = env_.kube("GET", "/version");
    server_version_ = version.json().value("gitVersion", "unknown");
    const char* extra = std::getenv("TESTCLUSTER_APISERVER_ARGS");
    std::printf("kube-apiserver %s, extra flags: %s\n", server_version_.c_str(),
                extra != nullptr && *extra != '\0' ? extra : "none");
    RecordProperty("kubernetes", server_version_);
  }

  void TearDown() override {
    if (!controller_.process) return;
    expectCleanStop(controller_);
  }

  Writes writes() {
    // apiserver_request_total names write verbs by their HTTP method.
    return {env_.apiServerRequests("resourceslices", "POST"),
            env_.apiServerRequests("resourceslices", "PUT"),
            env_.apiServerRequests("resourceslices", "PATCH"),
            env_.apiServerRequests("resourceslices", "DELETE")};
  }

  // The writes since `before` once they have stopped for kQuietPeriod.
  Writes settledWritesSince(const Writes& before) {
    const auto deadline = std::chrono::steady_clock::now() + kSettleTimeout;
    Writes last = writes();
    auto quiet_since = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - quiet_since < kQuietPeriod) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "slice writes still going after " << kSettleTimeout.count() << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      const Writes now = writes();
      if (now.total() != last.total()) {
        last = now;
        quiet_since = std::chrono::steady_clock::now();
      }
    }
    return last - before;
  }

  HttpAnswer push(const Example& e) {
    return env_.http("PUT", controller_.inventoryUrl() + e.path + "?wait=60s", e.body);
  }

  Json poolStatus(const std::string& driver, const std::string& pool) {
    return env_.http("GET", controller_.poolUrl(driver, pool)).json();
  }

  // Adds a label of someone else's to the first slice of the pool, with a
  // GET and PUT of the raw object (so that nothing else changes). Returns
  // whether the update was made (one UPDATE of ours in the API server's count).
  bool poke(const std::string& driver, const std::string& pool) {
    const std::vector<client::ResourceSlice> live = env_.poolSlices(driver, pool);
    if (live.empty()) return false;
    const std::string path = "/apis/resource.k8s.io/v1/resourceslices/" + live[0].metadata.name;
    Json object = env_.kube("GET", path).json();
    object["metadata"]["labels"]["versions.example.com/poked"] = std::to_string(++pokes_);
    const HttpAnswer a = env_.kube("PUT", path, object);
    EXPECT_EQ(a.code, 200) << a.body;
    return a.code == 200;
  }

  // One line of the matrix's record: what a step wrote for one example file.
  void report(const std::string& step, const Example& e, const Writes& w,
              const std::string& shape = "") {
    std::printf("%s on %s, %s:%s writes %s\n", e.file.c_str(), server_version_.c_str(),
                step.c_str(), shape.c_str(), w.toString().c_str());
  }

  // The controller's log lines about `pool` (for a failure message).
  std::string logOf(const std::string& pool) {
    std::istringstream lines(controller_.process->log());
    std::string line;
    std::string out;
    while (std::getline(lines, line)) {
      if (line.find(pool) != std::string::npos) out += line + "\n";
    }
    return out.size() > 20000 ? out.substr(out.size() - 20000) : out;
  }

  ServiceEnv env_;
  ControllerProcess controller_;
  std::string server_version_;
  int pokes_ = 0;
};

TEST_F(VersionsTest, ExamplesArePublishedWithOneCreatePerSliceAndNeverRewritten) {
  const std::vector<Example> all = examples();
  ASSERT_GE(all.size(), 4U) << "examples not found";

  // First pushes, one file at a time: one create per slice.
  for (const Example& e : all) {
    SCOPED_TRACE(e.file + " on " + server_version_);
    const Writes before = writes();
    const HttpAnswer a = push(e);
    // 200: published (422: the server refused a pool). Either way the writes
    // are counted and shown.
    EXPECT_EQ(a.code, 200) << a.body;
    const Writes w = settledWritesSince(before);

    size_t slices = 0;
    std::string shape;
    for (const std::string& pool : e.pools) {
      const std::vector<client::ResourceSlice> live = env_.poolSlices(e.driver, pool);
      slices += live.size();
      shape += " " + pool + ":" + std::to_string(live.size()) + " slice(s)";
      EXPECT_FALSE(live.empty()) << pool << " has no slice";
      for (const client::ResourceSlice& s : live) {
        EXPECT_EQ(s.spec.pool.generation, 1) << s.metadata.name << "\n" << logOf(pool);
        EXPECT_EQ(s.spec.pool.resource_slice_count, static_cast<int64_t>(live.size()))
            << s.metadata.name;
      }
      const Json status = poolStatus(e.driver, pool);
      EXPECT_EQ(status.value("phase", ""), "Published") << status.dump();
      EXPECT_EQ(status.value("publishedGeneration", 0), 1) << status.dump();
    }
    report("first push", e, w, shape);
    EXPECT_EQ(w.create, static_cast<double>(slices)) << w.toString() << "\n" << logOf(e.pools[0]);
    EXPECT_EQ(w.update, 0) << w.toString() << "\n" << logOf(e.pools[0]);
    EXPECT_EQ(w.patch, 0) << w.toString();
    EXPECT_EQ(w.del, 0) << w.toString() << "\n" << logOf(e.pools[0]);
  }

  // The same pushes again: nothing to write.
  for (const Example& e : all) {
    const Writes before = writes();
    EXPECT_EQ(push(e).code, 200) << e.file;
    const Writes w = settledWritesSince(before);
    report("same push", e, w);
    EXPECT_EQ(w.total(), 0) << e.file << " on " << server_version_ << ": " << w.toString();
  }

  // A foreign change to one slice of each pool (a label of someone else's,
  // which the controller leaves alone) makes the controller compare the
  // whole pool with what is live: nothing to write but our own updates.
  for (const Example& e : all) {
    const Writes before = writes();
    double pokes = 0;
    for (const std::string& pool : e.pools) pokes += poke(e.driver, pool) ? 1 : 0;
    Writes w = settledWritesSince(before);
    w.update -= pokes;
    report("foreign label", e, w);
    EXPECT_EQ(w.total(), 0) << e.file << " on " << server_version_ << ": " << w.toString() << "\n"
                            << logOf(e.pools[0]);
  }
}

// What the server drops (features off) is known from the answers to the
// controller's own writes; a restarted controller must not need a write per
// slice to learn it again, nor bump a pool for it.
TEST_F(VersionsTest, ARestartedControllerPushedEverythingAgainWritesNothing) {
  const std::vector<Example> all = examples();
  ASSERT_GE(all.size(), 4U) << "examples not found";
  for (const Example& e : all) EXPECT_EQ(push(e).code, 200) << e.file;
  (void)settledWritesSince(writes());

  // A restarted controller adopts what is live; the drivers push again.
  controller_.process->signal(SIGTERM);
  ASSERT_EQ(controller_.process->wait(seconds(20)), 0) << controller_.process->log();
  const double dry_runs = env_.apiServerRequests("resourceslices", "POST", /*dry_run=*/true);
  controller_ = env_.startController("versions-restarted", {"--auth=none", "-v=4"});
  // The restarted controller learnt what the server drops from dry-run
  // creates as it started leading; they stored nothing.
  EXPECT_TRUE(ServiceEnv::eventually([&] {
    return env_.apiServerRequests("resourceslices", "POST", /*dry_run=*/true) > dry_runs;
  })) << controller_.process->log();
  client::ListOptions probes;
  probes.field_selector = "spec.driver=probe.resourceslice-controller.dra.k8s.io";
  const auto stored = env_.api().listResourceSlices(probes);
  ASSERT_TRUE(stored.ok()) << stored.status().toString();
  EXPECT_TRUE(stored->items.empty());
  for (const Example& e : all) {
    const Writes before = writes();
    EXPECT_EQ(push(e).code, 200) << e.file;
    const Writes w = settledWritesSince(before);
    report("push after restart", e, w);
    EXPECT_EQ(w.total(), 0) << e.file << " on " << server_version_ << ": " << w.toString() << "\n"
                            << logOf(e.pools[0]);
  }
}

// A pool using the four fields of Kubernetes 1.37's alpha gates: with the gates on it is
// published with them and reads back equal; on an older release, or with the gates off, it is
// published without them, they are reported in droppedFields, and pushing it again writes nothing.
TEST_F(VersionsTest, TheNewestAlphaFieldsArePublishedOrReportedDropped) {
  const int minor = std::stoi(env_.kube("GET", "/version").json().value("minor", "0"));
  const char* extra = std::getenv("TESTCLUSTER_APISERVER_ARGS");
  const bool gates_on =
      minor >= 37 && extra != nullptr &&
      std::string(extra).find("DRAOptionalNodeOperations=true") != std::string::npos;
  // The NodeDeclaredFeatures admission plugin lets a node-local slice with
  // nodeAllocatableResources through only for a node that declares the feature, as a kubelet
  // with the gate on does.
  env_.ensureNode("node-alpha");
  if (minor >= 37) {
    Json node = env_.kube("GET", "/api/v1/nodes/node-alpha").json();
    node["status"]["declaredFeatures"] = {"DRANodeAllocatableResources"};
    const HttpAnswer declared = env_.kube("PUT", "/api/v1/nodes/node-alpha/status", node);
    ASSERT_EQ(declared.code, 200) << declared.body;
  }
  const Json consumption = {{"counterSet", "gpu-0"},
                            {"counters", {{"memory", {{"value", "10Gi"}}}}},
                            {"compatibilityGroups", {"half"}}};
  const Json pool = {
      {"nodeName", "node-alpha"},
      {"partitionTypeAttribute", "gpu.example.com/profile"},
      {"skipNodeOperations", {"NodePrepareResources", "NodeUnprepareResources"}},
      {"sharedCounters", {{{"name", "gpu-0"}, {"counters", {{"memory", {{"value", "80Gi"}}}}}}}},
      {"devices",
       {{{"name", "gpu-0-half-0"},
         {"attributes", {{"gpu.example.com/profile", {{"string", "half"}}}}},
         {"capacity", {{"cores", {{"value", "8"}}}}},
         {"consumesCounters", {consumption}},
         {"nodeAllocatableResources",
          {{"cpu", {{"mapping", {{"capacityKey", "cores"}, {"capacityMultiplier", "2"}}}}},
           {"memory", {{"overhead", {{"perPod", "1Gi"}}}}}}}}}}};
  const std::string url = controller_.poolUrl("gpu.example.com", "alpha-fields", "?wait=60s");
  const Writes before = writes();
  const HttpAnswer a = env_.http("PUT", url, pool.dump());
  ASSERT_EQ(a.code, 200) << a.body;
  (void)settledWritesSince(before);

  const std::vector<client::ResourceSlice> live =
      env_.poolSlices("gpu.example.com", "alpha-fields");
  // The counter set and the device: one slice up to 1.34, two from 1.35 on.
  ASSERT_EQ(live.size(), minor <= 34 ? 1U : 2U);
  const client::ResourceSlice& devices = live[0].spec.devices.empty() ? live[1] : live[0];
  ASSERT_EQ(devices.spec.devices.size(), 1U);
  const Json live_device = client::toJson(devices.spec.devices[0].device());
  const Json status = poolStatus("gpu.example.com", "alpha-fields");
  const Json dropped = status.value("droppedFields", Json::array());
  std::printf("alpha fields on %s (gates %s): dropped %s\n", server_version_.c_str(),
              gates_on ? "on" : "default/off", dropped.dump().c_str());
  if (gates_on) {
    EXPECT_TRUE(dropped.empty()) << status.dump();
    EXPECT_EQ(devices.spec.partition_type_attribute, "gpu.example.com/profile");
    EXPECT_EQ(devices.spec.skip_node_operations,
              (std::vector<std::string>{"NodePrepareResources", "NodeUnprepareResources"}));
    EXPECT_EQ(live_device["nodeAllocatableResources"],
              pool["devices"][0]["nodeAllocatableResources"])
        << live_device.dump();
    EXPECT_EQ(live_device["consumesCounters"], pool["devices"][0]["consumesCounters"])
        << live_device.dump();
  } else {
    EXPECT_FALSE(devices.spec.partition_type_attribute.has_value());
    EXPECT_TRUE(devices.spec.skip_node_operations.empty());
    EXPECT_FALSE(live_device.contains("nodeAllocatableResources")) << live_device.dump();
    // Reported itself, or with a field that holds it (with DRAPartitionableDevices off the
    // server drops consumesCounters whole, compatibility groups and all).
    const auto reported = [&](const std::string& path) {
      return std::any_of(dropped.begin(), dropped.end(), [&](const Json& d) {
        const std::string field = d.get<std::string>();
        return path == field || path.starts_with(field + ".") || path.starts_with(field + "[");
      });
    };
    for (const char* path : {"spec.partitionTypeAttribute", "spec.skipNodeOperations",
                             "spec.devices[0].nodeAllocatableResources",
                             "spec.devices[0].consumesCounters[0].compatibilityGroups"}) {
      EXPECT_TRUE(reported(path)) << path << " not in " << status.dump();
    }
  }
  // Either way, the same push again writes nothing.
  const Writes again = writes();
  ASSERT_EQ(env_.http("PUT", url, pool.dump()).code, 200);
  const Writes w = settledWritesSince(again);
  EXPECT_EQ(w.total(), 0) << w.toString() << "\n" << logOf("alpha-fields");
}

}  // namespace
}  // namespace rsc::testing
