// Pool integrity on the real API server, with the service binary as a
// process: a managed slice whose managed-by label someone removes is taken
// back (not duplicated at the same generation), a push the API server
// refuses (or an admission policy, which the inventory's validation cannot
// foresee) leaves the published slices whole and is not retried with a new
// generation until the driver pushes something else, and a generation at
// the int64 limit never goes down.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <thread>

#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using std::chrono::seconds;

constexpr char kManagedBy[] = "app.kubernetes.io/managed-by";

class PoolIntegrityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    controller_ = env_.startController(
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), {"--auth=none"});
  }
  void TearDown() override { expectCleanStop(controller_); }

  // Every slice that claims the pool, labelled or not: what the scheduler
  // sees.
  std::vector<client::ResourceSlice> claimingSlices(const std::string& driver,
                                                    const std::string& pool) {
    return env_.poolSlices(driver, pool, /*managed_only=*/false);
  }

  // Exactly `count` slices claim the pool, all at one generation, all saying
  // `count`, all labelled as ours.
  bool whole(const std::string& driver, const std::string& pool, size_t count) {
    const auto all = claimingSlices(driver, pool);
    if (all.size() != count) return false;
    for (const client::ResourceSlice& s : all) {
      if (s.spec.pool.generation != all[0].spec.pool.generation) return false;
      if (s.spec.pool.resource_slice_count != static_cast<int64_t>(count)) return false;
      auto it = s.metadata.labels.find(kManagedBy);
      if (it == s.metadata.labels.end() || it->second != "resourceslice-controller") return false;
    }
    return true;
  }

  // Publishes `devices` GPUs on `node` (a new Node) as pool `node`, and
  // checks that it is whole with `slices` slices.
  void publish(const std::string& driver, const std::string& node, int devices, size_t slices) {
    env_.ensureNode(node);
    const HttpAnswer a = env_.http("PUT", controller_.poolUrl(driver, node, "?wait=30s"),
                                   gpuPool(node, devices).dump());
    ASSERT_EQ(a.code, 200) << a.body;
    ASSERT_TRUE(whole(driver, node, slices));
  }

  Json status(const std::string& driver, const std::string& pool) {
    return env_.http("GET", controller_.poolUrl(driver, pool)).json();
  }

  // The resourceVersions of the pool's slices: equal when nothing was
  // written.
  std::vector<std::string> versions(const std::string& driver, const std::string& pool) {
    std::vector<std::string> out;
    for (const auto& s : claimingSlices(driver, pool)) out.push_back(s.metadata.resource_version);
    std::sort(out.begin(), out.end());
    return out;
  }

  // A refused write is not retried in a loop: after retries (with backoff)
  // had time to run, the pool's slices are still `kept` and it is whole in
  // `slices` slices.
  void expectNotWrittenAgain(const std::string& driver, const std::string& pool,
                             const std::vector<std::string>& kept, size_t slices) {
    std::this_thread::sleep_for(seconds(3));
    EXPECT_EQ(versions(driver, pool), kept) << "the pool was written again";
    EXPECT_TRUE(whole(driver, pool, slices));
  }

  // After a push the API server refuses (`answer` accepted it), or that the
  // inventory's own validation refused: the pool ends Failed with the
  // server's message (containing `message`).
  void expectRefused(const std::string& driver, const std::string& pool, const HttpAnswer& answer,
                     const std::string& message) {
    if (answer.code != 200 && answer.code != 202) {
      EXPECT_TRUE(answer.code == 400 || answer.code == 422) << answer.body;
      return;
    }
    EXPECT_TRUE(ServiceEnv::eventually([&] {
      const Json s = status(driver, pool);
      return s["phase"] == "Failed" && s.contains("lastError") &&
             s["lastError"]["message"].get<std::string>().find(message) != std::string::npos;
    })) << status(driver, pool).dump();
  }

  ServiceEnv env_;
  ControllerProcess controller_;
};

// `kubectl label resourceslice <slice> app.kubernetes.io/managed-by-` used to
// leave two slices at generation 1 with resourceSliceCount 1, forever.
TEST_F(PoolIntegrityTest, ASliceWhoseLabelIsRemovedIsTakenBack) {
  const std::string driver = "integrity.example.com";
  for (const auto& [node, devices, slices] :
       {std::tuple{"node-a", 3, size_t{1}}, std::tuple{"node-b", 200, size_t{2}}}) {
    SCOPED_TRACE(node);
    publish(driver, node, devices, slices);

    // A real update that removes the label.
    const std::string name = claimingSlices(driver, node).back().metadata.name;
    StatusOr<client::ResourceSlice> got = env_.api().getResourceSlice(name);
    ASSERT_TRUE(got.ok()) << got.status().toString();
    got->metadata.labels.erase(kManagedBy);
    StatusOr<client::ResourceSlice> unlabelled = env_.api().updateResourceSlice(*got);
    ASSERT_TRUE(unlabelled.ok()) << unlabelled.status().toString();
    ASSERT_FALSE(unlabelled->metadata.labels.contains(kManagedBy));

    EXPECT_TRUE(ServiceEnv::eventually([&] {
      const auto all = claimingSlices(driver, node);
      return whole(driver, node, slices) && std::any_of(all.begin(), all.end(), [&](const auto& s) {
               return s.metadata.name == name &&
                      s.metadata.resource_version != unlabelled->metadata.resource_version;
             });
    })) << controller_.process->log();
    // Relabelled in place: the same slices, no bump.
    for (const auto& s : claimingSlices(driver, node)) EXPECT_EQ(s.spec.pool.generation, 1);
    EXPECT_EQ(status(driver, node)["phase"], "Published");
  }
}

// A node-local pool re-pushed with a node selector the API server refuses
// (matchFields metadata.name "N_021" is no node name) used to lose its slice
// and get none.
TEST_F(PoolIntegrityTest, ARefusedNodeSelectorKeepsThePublishedSlice) {
  const std::string driver = "refused.example.com";
  publish(driver, "node-c", 3, 1);
  const std::vector<std::string> published = versions(driver, "node-c");

  Json moved = gpuPool("node-c", 3);
  moved.erase("nodeName");
  moved["nodeSelector"] = Json::parse(
      R"({"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["N_021"]}]}]})");
  expectRefused(driver, "node-c",
                env_.http("PUT", controller_.poolUrl(driver, "node-c"), moved.dump()), "N_021");
  expectNotWrittenAgain(driver, "node-c", published, 1);
}

// A list attribute (`ints`) passes our validation; an API server whose
// DRAListTypeAttributes gate is off refuses it (or drops it). Either way the
// published slice stays as it was and nothing is retried in a loop.
TEST_F(PoolIntegrityTest, AListAttributeTheServerRefusesKeepsThePublishedSlice) {
  const std::string driver = "lists.example.com";
  publish(driver, "node-d", 2, 1);
  const std::vector<std::string> published = versions(driver, "node-d");

  Json listed = gpuPool("node-d", 2);
  listed["devices"][1]["attributes"]["cores"] = Json::parse(R"({"ints":[1,2,3]})");
  const HttpAnswer a =
      env_.http("PUT", controller_.poolUrl(driver, "node-d", "?wait=20s"), listed.dump());
  if (a.code == 200 && a.json()["phase"] == "Published") {
    // A server that keeps (or drops and reports) the field: the pool is whole.
    EXPECT_TRUE(whole(driver, "node-d", 1));
    return;
  }
  // The held push ends as soon as the server refused the slice, naming it.
  ASSERT_EQ(a.code, 422) << a.body;
  EXPECT_EQ(a.json()["details"][0]["field"], "pools[node-d]") << a.body;
  EXPECT_NE(a.body.find("attributes[cores]"), std::string::npos) << a.body;
  expectRefused(driver, "node-d", a, "ints");
  expectNotWrittenAgain(driver, "node-d", published, 1);
}

// A two-slice pool re-pushed with a change in each slice and a taint whose
// timeAdded the API server refuses used to be left incomplete, and every
// retry bumped its generation again.
TEST_F(PoolIntegrityTest, ARefusedTaintLeavesThePoolWholeAndIsNotRetried) {
  const std::string driver = "taint.example.com";
  // 128 + 62 devices: a taint keeps its device in the second slice (at most
  // 64 with taints), so the second write of the bump is the refused one.
  publish(driver, "node-d", 190, 2);

  Json changed = gpuPool("node-d", 190);
  changed["devices"][10]["attributes"]["model"]["string"] = "H100";
  changed["devices"][150]["taints"] = Json::parse(
      R"([{"key":"example.com/unhealthy","effect":"NoSchedule","timeAdded":"yesterday"}])");
  expectRefused(driver, "node-d",
                env_.http("PUT", controller_.poolUrl(driver, "node-d"), changed.dump()),
                "yesterday");
  // Whole, with the published content, and not bumped again.
  EXPECT_TRUE(ServiceEnv::eventually([&] { return whole(driver, "node-d", 2); }));
  const std::vector<std::string> kept = versions(driver, "node-d");
  expectNotWrittenAgain(driver, "node-d", kept, 2);
  for (const auto& s : claimingSlices(driver, "node-d")) {
    for (const client::Device& d : client::decodeAll(s.spec.devices)) {
      EXPECT_EQ(d.attributes.at("model").string_value, "A100") << d.name;
      EXPECT_TRUE(d.taints.empty()) << d.name;
    }
  }

  // The driver fixes its push: published.
  changed["devices"][150]["taints"][0].erase("timeAdded");
  const HttpAnswer a =
      env_.http("PUT", controller_.poolUrl(driver, "node-d", "?wait=30s"), changed.dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_EQ(a.json()["phase"], "Published");
  EXPECT_TRUE(whole(driver, "node-d", 2));
}

// The inventory's validation cannot know every rule of the server: here an
// admission policy refuses (422) any slice of this driver with a device named
// "refused-0". A two-slice pool re-pushed with a change in each slice, the
// second one such a device, has its first slice written at the new
// generation before the second is refused: the published content is put
// back once, and nothing is written again until the driver pushes again.
TEST_F(PoolIntegrityTest, ASliceRefusedByAnAdmissionPolicyLeavesThePoolWhole) {
  const std::string driver = "policy.example.com";
  const std::string policies = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";
  const std::string bindings =
      "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings";
  env_.ensure(policies, Json::parse(R"json({
      "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
      "metadata": {"name": "refuse-device"},
      "spec": {"failurePolicy": "Fail",
        "matchConstraints": {"resourceRules": [{"apiGroups": ["resource.k8s.io"],
          "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
          "resources": ["resourceslices"]}]},
        "validations": [{"reason": "Invalid", "message": "device refused-0 refused by policy",
          "expression": "object.spec.driver != 'policy.example.com' || !has(object.spec.devices) || object.spec.devices.all(d, d.name != 'refused-0')"}]}})json"));
  env_.ensure(bindings, Json::parse(R"json({
      "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
      "metadata": {"name": "refuse-device"},
      "spec": {"policyName": "refuse-device", "validationActions": ["Deny"]}})json"));
  // The policy takes effect once the server has loaded it.
  client::ResourceSlice probe;
  probe.metadata.name = "policy-probe";
  probe.spec.driver = driver;
  probe.spec.pool = {"probe", 1, 1};
  probe.spec.all_nodes = true;
  client::Device refused;
  refused.name = "refused-0";
  probe.spec.devices.emplace_back(refused);
  ASSERT_TRUE(ServiceEnv::eventually([&] {
    StatusOr<client::ResourceSlice> created = env_.api().createResourceSlice(probe);
    if (created.ok()) (void)env_.api().deleteResourceSlice(probe.metadata.name, {});
    return created.status().code() == StatusCode::kUnprocessable;
  }));

  publish(driver, "node-f", 190, 2);
  Json changed = gpuPool("node-f", 190);
  changed["devices"][10]["attributes"]["model"]["string"] = "H100";
  changed["devices"][150]["name"] = "refused-0";
  HttpAnswer a = env_.http("PUT", controller_.poolUrl(driver, "node-f"), changed.dump());
  ASSERT_EQ(a.code, 202) << a.body;
  expectRefused(driver, "node-f", a, "refused by policy");
  EXPECT_TRUE(ServiceEnv::eventually([&] { return whole(driver, "node-f", 2); }));
  const std::vector<std::string> kept = versions(driver, "node-f");
  expectNotWrittenAgain(driver, "node-f", kept, 2);
  std::set<std::string> names;
  for (const auto& s : claimingSlices(driver, "node-f")) {
    EXPECT_GE(s.spec.pool.generation, 3) << "the published content was not written back";
    for (const client::Device& d : client::decodeAll(s.spec.devices)) {
      EXPECT_EQ(d.attributes.at("model").string_value, "A100") << d.name;
      names.insert(d.name);
    }
  }
  EXPECT_TRUE(names.contains("gpu-150"));
  EXPECT_FALSE(names.contains("refused-0"));

  changed["devices"][150]["name"] = "gpu-150";
  a = env_.http("PUT", controller_.poolUrl(driver, "node-f", "?wait=30s"), changed.dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_EQ(a.json()["phase"], "Published");
  env_.kube("DELETE", bindings + "/refuse-device");
  env_.kube("DELETE", policies + "/refuse-device");
}

// A pool pushed at generation 2^63-1 and then grown past one slice used to
// be published at generation 1, below what the scheduler had seen. Such a
// push is refused now (at most 2^62); a live slice that someone else raised
// to 2^63-1 is where the reconciler's rule shows: generations saturate and
// never go down.
TEST_F(PoolIntegrityTest, AGenerationAtTheLimitNeverGoesDown) {
  const std::string driver = "limit.example.com";
  env_.ensureNode("node-e");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  Json pool = gpuPool("node-e", 128);
  pool["generation"] = kMax;
  HttpAnswer a = env_.http("PUT", controller_.poolUrl(driver, "node-e", "?wait=30s"), pool.dump());
  ASSERT_EQ(a.code, 422) << a.body;
  EXPECT_EQ(a.json()["details"][0]["field"], "generation");

  a = env_.http("PUT", controller_.poolUrl(driver, "node-e", "?wait=30s"),
                gpuPool("node-e", 128).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  ASSERT_TRUE(whole(driver, "node-e", 1));
  client::ResourceSlice raised = claimingSlices(driver, "node-e")[0];
  raised.spec.pool.generation = kMax;
  ASSERT_TRUE(env_.api().updateResourceSlice(raised).ok());

  a = env_.http("PUT", controller_.poolUrl(driver, "node-e", "?wait=30s"),
                gpuPool("node-e", 129).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_EQ(a.json()["publishedGeneration"], kMax);
  EXPECT_TRUE(ServiceEnv::eventually([&] { return whole(driver, "node-e", 2); }));
  for (const auto& s : claimingSlices(driver, "node-e")) {
    EXPECT_EQ(s.spec.pool.generation, kMax) << s.metadata.name;
  }
}

}  // namespace
}  // namespace rsc::testing
