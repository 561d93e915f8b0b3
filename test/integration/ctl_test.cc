// resourceslicectl against the real API server and a real controller: it
// pushes the example inventory, lists the statuses, shows a diff that names
// exactly the slice writes the push then makes (as the API server counts
// them), waits, reads the live slices, withdraws, finds the controller
// through the leader Lease, and fails with a message wherever it can fail.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "test/integration/leader_flags.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using ::testing::HasSubstr;
using ::testing::Not;

struct CtlRun {
  int code = -1;
  std::string output;  // stdout, then stderr
  std::string stdout_text;
};

class CtlTest : public ::testing::Test {
 protected:
  // Runs resourceslicectl with `args` and waits for it.
  CtlRun ctl(const std::vector<std::string>& args) {
    // stderr apart, so that what a command prints (JSON, YAML) is read
    // without a log line of the client library in it.
    const std::string run = std::to_string(++runs_);
    const auto err = env_.logDir() / ("ctl-" + run + ".err");
    std::vector<std::string> argv = {
        "/bin/sh", "-c",         "err=$1; shift; exec \"$@\" 2>>\"$err\"",
        "sh",      err.string(), RSC_CTL_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    Process p(argv, env_.logDir() / ("ctl-" + run + ".log"));
    const std::optional<int> code = p.wait(std::chrono::seconds(120));
    std::ifstream in(err);
    const std::string stderr_text{std::istreambuf_iterator<char>(in), {}};
    EXPECT_TRUE(code.has_value()) << "resourceslicectl did not exit: " << p.log() << stderr_text;
    return {code.value_or(-1), p.log() + stderr_text, p.log()};
  }

  // The same with --server of `c` first.
  CtlRun ctlAt(const ControllerProcess& c, std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", c.inventoryUrl()});
    return ctl(args);
  }

  // The writes a diff printed, by the method that makes them.
  static std::map<std::string, double> plannedWrites(const std::string& diff) {
    std::map<std::string, double> out = {{"POST", 0}, {"PUT", 0}, {"DELETE", 0}};
    std::istringstream lines(diff);
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("  + create")) out["POST"] += 1;
      if (line.starts_with("  ~ update")) out["PUT"] += 1;
      if (line.starts_with("  - delete")) out["DELETE"] += 1;
    }
    return out;
  }

  std::string writeFile(const std::string& name, const std::string& text) {
    const auto path = env_.logDir() / name;
    std::ofstream(path) << text;
    return path.string();
  }

  static Json example(const std::string& name) {
    std::ifstream in(std::string(RSC_INVENTORY_EXAMPLES_DIR) + "/" + name);
    return Json::parse(in);
  }

  ServiceEnv env_;
  int runs_ = 0;
};

TEST_F(CtlTest, PushGetDiffWaitSlicesWithdrawTheExamples) {
  for (const char* node : {"node-a", "node-b", "node-c"}) env_.ensureNode(node);
  ControllerProcess c = env_.startController("ctl", leaderFlags("ctl-0", "ctl-lease"));

  // Push every example and wait for each to be published.
  CtlRun r = ctlAt(c, {"push", RSC_INVENTORY_EXAMPLES_DIR, "--wait=30s"});
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* pool :
       {"gpu.example.com/node-a", "gpu.example.com/node-b", "gpu.example.com/node-c",
        "nic.example.com/fabric-1", "nic.example.com/fabric-2"}) {
    EXPECT_THAT(r.output, HasSubstr(std::string(pool) + ": Published")) << r.output;
  }

  // The statuses, as JSON and as a table.
  r = ctlAt(c, {"get", "pools", "-o", "json"});
  ASSERT_EQ(r.code, 0) << r.output;
  const Json list = Json::parse(r.stdout_text, nullptr, false);
  ASSERT_TRUE(list.is_object()) << r.output;
  size_t published = 0;
  for (const Json& d : list["drivers"]) {
    for (const Json& p : d["pools"]) published += p["phase"] == "Published" ? 1 : 0;
  }
  EXPECT_EQ(published, 5U) << r.output;
  r = ctlAt(c, {"get", "pools", "gpu.example.com"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("DRIVER            POOL     PHASE       GENERATION   SLICES"));
  EXPECT_THAT(r.output, HasSubstr("gpu.example.com   node-b   Published"));
  r = ctlAt(c, {"get", "pool", "nic.example.com", "fabric-1", "-o", "yaml"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("phase: Published\n"));

  // Unchanged files: no changes, exit 0, nothing written.
  std::map<std::string, double> before = env_.sliceWriteRequests();
  r = ctlAt(c, {"diff", RSC_INVENTORY_EXAMPLES_DIR});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("gpu.example.com/node-a: no changes"));
  EXPECT_EQ(env_.sliceWriteRequests(), before);

  // Changed files: the diff lists exactly the writes the push then makes.
  Json node_a = example("gpu.example.com-node-a.pool.json");
  node_a["devices"][1]["attributes"]["productName"]["string"] = "NVIDIA H100 NVL";
  Json nic = example("nic.example.com.driver.json");
  nic["pools"].erase("fabric-2");
  const std::string changed_dir = (env_.logDir() / "changed").string();
  std::filesystem::create_directories(changed_dir);
  writeFile("changed/gpu.example.com-node-a.pool.json", node_a.dump());
  writeFile("changed/nic.example.com.driver.json", nic.dump());
  before = env_.sliceWriteRequests();
  r = ctlAt(c, {"diff", changed_dir});
  ASSERT_EQ(r.code, 1) << r.output;
  EXPECT_EQ(env_.sliceWriteRequests(), before) << "a diff wrote";
  EXPECT_THAT(r.output, HasSubstr("spec.devices[gpu-1].attributes.productName.string"));
  EXPECT_THAT(r.output, HasSubstr("nic.example.com/fabric-2: withdraw"));
  const std::string diff = r.output;
  const std::map<std::string, double> planned = plannedWrites(diff);
  EXPECT_EQ(planned.at("PUT"), 1) << r.output;
  EXPECT_GE(planned.at("DELETE"), 1) << r.output;
  r = ctlAt(c, {"push", changed_dir, "--wait=30s"});
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_TRUE(ServiceEnv::eventually(
      [&] { return env_.poolSlices("nic.example.com", "fabric-2").empty(); }));
  std::map<std::string, double> made = env_.sliceWriteRequests();
  for (auto& [verb, n] : made) n -= before.at(verb);
  EXPECT_EQ(made, planned) << "the diff:\n" << diff;

  // Waiting for a published pool returns at once; the live slices are complete.
  r = ctlAt(c, {"wait", "gpu.example.com", "node-a", "--for=published", "--timeout=30s"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("gpu.example.com/node-a: Published"));
  r = ctl({"--kubeconfig", kCluster->kubeconfig().string(), "slices", "gpu.example.com"});
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* pool : {"node-a", "node-b", "node-c"}) {
    EXPECT_THAT(r.output, HasSubstr("pool " + std::string(pool) + ": complete")) << r.output;
  }
  EXPECT_THAT(r.output, Not(HasSubstr("incomplete")));

  // Without --server: the leader Lease names the controller; its URL is
  // plain http here (no inventory TLS), which only the local tests' flag
  // allows.
  r = ctl({"--kubeconfig", kCluster->kubeconfig().string(), "--lease-namespace", "default",
           "--lease-name", "ctl-lease", "--allow-insecure-lease-url", "get", "pool",
           "gpu.example.com", "node-b"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Published"));

  // Withdraw one pool, then a whole driver (only with --all).
  r = ctlAt(c, {"withdraw", "gpu.example.com", "node-a", "--wait=30s"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(env_.poolSlices("gpu.example.com", "node-a").empty());
  r = ctl({"--kubeconfig", kCluster->kubeconfig().string(), "slices", "gpu.example.com", "node-a"});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("No ResourceSlices found."));
  r = ctlAt(c, {"withdraw", "nic.example.com"});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--all"));
  EXPECT_FALSE(env_.poolSlices("nic.example.com", "fabric-1").empty());
  r = ctlAt(c, {"withdraw", "nic.example.com", "--all", "--wait=30s"});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(ServiceEnv::eventually(
      [&] { return env_.poolSlices("nic.example.com", "fabric-1").empty(); }));
}

// A controller with a self-signed inventory certificate, found through its
// Lease alone: the https URL is checked against the CA it publishes in the
// Lease's namespace, and against nothing else.
TEST_F(CtlTest, FindsATlsControllerThroughItsLeaseAndPublishedCa) {
  std::vector<std::string> args = leaderFlags("ctl-tls-0", "ctl-tls");
  args.insert(args.end(),
              {"--inventory-tls-secret=ctl-inventory-tls", "--inventory-ca-configmap=ctl-tls-ca",
               "--inventory-tls-names=localhost,127.0.0.1"});
  ControllerProcess c = env_.startController("ctl-tls", args);
  const std::vector<std::string> found = {"--kubeconfig",      kCluster->kubeconfig().string(),
                                          "--lease-namespace", "default",
                                          "--lease-name",      "ctl-tls"};
  CtlRun r;
  ASSERT_TRUE(ServiceEnv::eventually([&] {
    std::vector<std::string> a = found;
    a.insert(a.end(), {"--ca-configmap", "ctl-tls-ca", "get", "pools"});
    r = ctl(a);
    return r.code == 0;
  })) << r.output;
  EXPECT_THAT(r.output, HasSubstr("No pools found."));

  // The chart's ConfigMap name does not exist here: refused before any
  // request (never the system store).
  std::vector<std::string> a = found;
  a.insert(a.end(), {"get", "pools"});
  r = ctl(a);
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("error: the leader Lease default/ctl-tls announces https://"))
      << r.output;
  EXPECT_THAT(r.output, HasSubstr("no CA to verify it")) << r.output;
}

TEST_F(CtlTest, EveryFailureExitsNonZeroWithOneLine) {
  env_.ensureNode("node-a");
  ControllerProcess c = env_.startController("ctl-fail", {"--auth=none"});
  const std::string bad =
      writeFile("bad.example.com-node-a.pool.json",
                R"({"nodeName": "node-a", "devices": [{"name": "GPU_0", "attributes": {}}]})");
  const std::string kubeconfig = kCluster->kubeconfig().string();
  struct Case {
    std::string name;
    std::vector<std::string> args;
    bool at_controller;
    int code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"invalid pool", {"push", bad}, true, 1, "422 Invalid"},
      {"invalid pool's field", {"push", bad}, true, 1, "devices[0].name"},
      {"diff of an invalid pool", {"diff", bad}, true, 2, "422 Invalid"},
      {"missing file", {"push", "/nonexistent.pool.json"}, true, 1, "/nonexistent.pool.json"},
      {"unknown pool", {"get", "pool", "none.example.com", "x"}, true, 1, "404 NotFound"},
      {"wait for an unknown pool",
       {"wait", "none.example.com", "x", "--timeout=2s"},
       true,
       1,
       "404"},
      {"withdraw an unknown pool", {"withdraw", "none.example.com", "x"}, true, 1, "404"},
      {"controller not there",
       {"--server", "http://127.0.0.1:1", "get", "pools"},
       false,
       1,
       "GET /v1/drivers"},
      {"no Lease",
       {"--kubeconfig", kubeconfig, "--lease-name", "none", "get", "pools"},
       false,
       1,
       "Lease default/none"},
      {"no kubeconfig",
       {"--kubeconfig", "/nonexistent", "slices", "x.example.com"},
       false,
       1,
       "/nonexistent"},
      {"unknown command", {"frob"}, false, 1, "unknown command"},
      {"unknown flag", {"get", "pools", "--frob"}, false, 1, "unknown flag --frob"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const CtlRun r = k.at_controller ? ctlAt(c, k.args) : ctl(k.args);
    EXPECT_EQ(r.code, k.code) << r.output;
    EXPECT_THAT(r.output, HasSubstr("error: ")) << r.output;
    EXPECT_THAT(r.output, HasSubstr(k.message)) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  EXPECT_TRUE(env_.poolSlices("bad.example.com", "node-a").empty());
}

}  // namespace
}  // namespace rsc::testing
