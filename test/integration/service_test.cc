// The service binary against the real API server: pushes become slices,
// drivers authenticate with their pods' tokens, two replicas elect a leader
// and forward pushes to it, a killed leader's work is finished by the other,
// SIGTERM releases the Lease, leased pools expire, --cleanup cleans up (under
// the Lease with --leader-elect).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "test/integration/leader_flags.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using std::chrono::seconds;

// `pool` with a lease of `seconds`: withdrawn unless renewed in time.
Json leased(Json pool, int seconds) {
  pool["leaseSeconds"] = seconds;
  return pool;
}

// Pushes `pool` as the pool `node` of `driver` and waits until it is
// published (200); says what the controller answered otherwise.
::testing::AssertionResult published(const ControllerProcess& c, const std::string& driver,
                                     const std::string& node, const Json& pool) {
  const HttpAnswer a = ServiceEnv::http("PUT", c.poolUrl(driver, node, "?wait=30s"), pool.dump());
  if (a.code == 200) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << "PUT " << driver << "/" << node << ": " << a.code << " " << a.body;
}

class ServiceTest : public ::testing::Test {
 protected:
  // Most tests publish node-a's pools, whose slices the Node owns; with it
  // here, each test also runs alone.
  void SetUp() override { env_.ensureNode("node-a"); }

  std::string holder(const std::string& lease) { return env_.leaseHolder(lease); }

  ServiceEnv env_;
};

TEST_F(ServiceTest, PushIsPublishedAndAnEqualPushWritesNothing) {
  ControllerProcess c = env_.startController("push", {"--auth=none"});
  const std::string driver = "push.example.com";

  HttpAnswer a =
      env_.http("PUT", c.poolUrl(driver, "node-a", "?wait=30s"), gpuPool("node-a", 200).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_EQ(a.json()["phase"], "Published");
  EXPECT_EQ(a.json()["sliceNames"].size(), 2U);
  EXPECT_TRUE(env_.poolComplete(driver, "node-a", 2));
  const auto slices = env_.poolSlices(driver, "node-a");
  ASSERT_EQ(slices[0].metadata.owner_references.size(), 1U);
  EXPECT_EQ(slices[0].metadata.owner_references[0].kind, "Node");
  const std::string creates =
      "resourceslice_controller_slice_writes_total{driver=\"push.example.com\",result=\"success\","
      "verb=\"create\"}";
  EXPECT_EQ(env_.metric(c, creates), 2);

  // The same push again: published at once, no API write, and the same
  // bytes are not even decoded.
  a = env_.http("PUT", c.poolUrl(driver, "node-a", "?wait=30s"), gpuPool("node-a", 200).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  const std::string bodies =
      "resourceslice_controller_push_bodies_total{driver=\"push.example.com\",";
  EXPECT_EQ(env_.metric(c, bodies + "path=\"decoded\"}"), 1);
  EXPECT_EQ(env_.metric(c, bodies + "path=\"unchanged\"}"), 1);
  // One device changes: one update, same generation.
  Json changed = gpuPool("node-a", 200);
  changed["devices"][150]["attributes"]["model"]["string"] = "H100";
  a = env_.http("PUT", c.poolUrl(driver, "node-a", "?wait=30s"), changed.dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_EQ(a.json()["publishedGeneration"], 1);
  const std::string updates =
      "resourceslice_controller_slice_writes_total{driver=\"push.example.com\",result=\"success\","
      "verb=\"update\"}";
  EXPECT_EQ(env_.metric(c, updates), 1);
  EXPECT_EQ(env_.metric(c, creates), 2);

  // Someone deletes a slice of this node-local pool: it is held (the rest
  // withdrawn, as after a kubelet's wipe) until the driver renews it.
  ASSERT_TRUE(env_.api().deleteResourceSlice(slices[1].metadata.name, {}).ok());
  EXPECT_TRUE(ServiceEnv::eventually([&] { return env_.poolSlices(driver, "node-a").empty(); }));
  EXPECT_EQ(env_.http("GET", c.poolUrl(driver, "node-a")).json().value("phase", ""), "Held");
  a = env_.http("POST", c.poolUrl(driver, "node-a", "/renew?wait=30s"));
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_TRUE(ServiceEnv::eventually([&] {
    const auto now = env_.poolSlices(driver, "node-a");
    return now.size() == 2 && env_.poolComplete(driver, "node-a", 2);
  }));

  // Withdraw.
  a = env_.http("DELETE", c.poolUrl(driver, "node-a", "?wait=30s"));
  EXPECT_TRUE(a.code == 200 || a.code == 202) << a.body;
  EXPECT_TRUE(ServiceEnv::eventually([&] { return env_.poolSlices(driver, "node-a").empty(); }));

  expectCleanStop(c);
}

// A dry run answers the writes the push then makes, as the API server counts
// them, and changes nothing: no slice write, no pool status.
TEST_F(ServiceTest, DryRunPlansExactlyTheWritesOfThePushAndWritesNothing) {
  ControllerProcess c = env_.startController("dry-run", {"--auth=none"});
  const std::string driver = "dry.example.com";
  ASSERT_TRUE(published(c, driver, "node-a", gpuPool("node-a", 200)));

  // The planned writes of a dry run's answer, by the method that makes them.
  const auto planned = [](const Json& answer) {
    std::map<std::string, double> out = {{"POST", 0}, {"PUT", 0}, {"DELETE", 0}};
    for (const Json& w : answer["pools"][0]["writes"]) {
      const std::string verb = w["verb"];
      out[verb == "create" ? "POST" : verb == "update" ? "PUT" : "DELETE"] += 1;
    }
    return out;
  };
  const auto minus = [](std::map<std::string, double> after,
                        const std::map<std::string, double>& before) {
    for (auto& [verb, n] : after) n -= before.at(verb);
    return after;
  };

  Json changed = gpuPool("node-a", 200);
  changed["devices"][150]["attributes"]["model"]["string"] = "H100";
  struct Step {
    std::string name, method, body;
    bool bumped;
  };
  const std::vector<Step> steps = {
      {"one device changed", "PUT", changed.dump(), false},
      {"grown to three slices", "PUT", gpuPool("node-a", 300).dump(), true},
      {"shrunk to one slice", "PUT", gpuPool("node-a", 20).dump(), true},
      {"withdrawn", "DELETE", "", false},
  };
  for (const Step& step : steps) {
    SCOPED_TRACE(step.name);
    const std::map<std::string, double> before = env_.sliceWriteRequests();
    const std::string status_before = env_.http("GET", c.poolUrl(driver, "node-a")).body;
    HttpAnswer dry = env_.http(step.method, c.poolUrl(driver, "node-a", "?dryRun=All"), step.body);
    ASSERT_EQ(dry.code, 200) << dry.body;
    const Json answer = dry.json();
    ASSERT_EQ(answer["pools"].size(), 1U) << dry.body;
    if (step.method == "PUT") {
      EXPECT_EQ(answer["pools"][0]["generationBumped"], step.bumped);
    }
    if (step.name == "one device changed") {
      EXPECT_EQ(answer["pools"][0]["writes"][0]["changedFields"],
                Json::array({"spec.devices[gpu-150].attributes.model.string"}))
          << dry.body;
    }
    // Nothing written, nothing changed.
    EXPECT_EQ(env_.sliceWriteRequests(), before);
    EXPECT_EQ(env_.http("GET", c.poolUrl(driver, "node-a")).body, status_before);

    const HttpAnswer a =
        env_.http(step.method, c.poolUrl(driver, "node-a", "?wait=30s"), step.body);
    ASSERT_TRUE(a.code == 200 || (step.method == "DELETE" && a.code == 202)) << a.body;
    if (step.method == "DELETE") {
      ASSERT_TRUE(
          ServiceEnv::eventually([&] { return env_.poolSlices(driver, "node-a").empty(); }));
    }
    // The API server counts a request as it ends, which may be just after
    // the controller saw its answer.
    const std::map<std::string, double> want = planned(answer);
    EXPECT_TRUE(ServiceEnv::eventually(
        [&] { return minus(env_.sliceWriteRequests(), before) == want; }, std::chrono::seconds(5)))
        << dry.body;
    EXPECT_EQ(minus(env_.sliceWriteRequests(), before), want);
  }
  expectCleanStop(c);
}

// A manual edit of a managed slice is reverted, and one Kubernetes Event says
// so, about the slice, naming the editor's field manager (from managedFields).
TEST_F(ServiceTest, ARevertedManualEditMakesOneEventNamingTheSliceAndTheEditor) {
  ControllerProcess c = env_.startController("events", {"--auth=none"});
  const std::string driver = "events.example.com";
  ASSERT_TRUE(published(c, driver, "node-a", gpuPool("node-a", 4)));
  const auto slices = env_.poolSlices(driver, "node-a");
  ASSERT_EQ(slices.size(), 1U);
  const std::string name = slices[0].metadata.name;

  // An edit as `kubectl edit` makes it, under its field manager.
  const std::string path = "/apis/resource.k8s.io/v1/resourceslices/" + name;
  Json edited = env_.kube("GET", path).json();
  edited["spec"]["devices"][0]["attributes"]["model"]["string"] = "tampered";
  HttpAnswer put = env_.kube("PUT", path + "?fieldManager=kubectl-edit", edited);
  ASSERT_EQ(put.code, 200) << put.body;
  EXPECT_TRUE(ServiceEnv::eventually([&] {
    const auto now = env_.poolSlices(driver, "node-a");
    return now.size() == 1 &&
           client::decodeAll(now[0].spec.devices)[0].attributes.at("model").string_value == "A100";
  }));

  // As `kubectl get events --field-selector involvedObject.kind=ResourceSlice`
  // lists them (core/v1), and through events.k8s.io/v1.
  const std::string core =
      "/api/v1/namespaces/default/events?fieldSelector=" + client::RestKubeApi::urlEncode(
                                                               "involvedObject.kind=ResourceSlice,"
                                                               "involvedObject.name=" +
                                                               name);
  Json listed;
  EXPECT_TRUE(ServiceEnv::eventually([&] {
    listed = env_.kube("GET", core).json();
    return listed.contains("items") && !listed["items"].empty();
  })) << listed.dump();
  ASSERT_EQ(listed["items"].size(), 1U) << listed.dump();
  const Json& event = listed["items"][0];
  EXPECT_EQ(event["reason"], "ForeignChangeReverted");
  EXPECT_EQ(event["type"], "Normal");
  const std::string message = event.value("message", "");
  EXPECT_NE(message.find("kubectl-edit"), std::string::npos) << message;
  EXPECT_NE(message.find(name), std::string::npos) << message;

  const std::string v1 = "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=" +
                         client::RestKubeApi::urlEncode(
                             "regarding.kind=ResourceSlice,"
                             "regarding.name=" +
                             name);
  const Json events = env_.kube("GET", v1).json();
  ASSERT_EQ(events["items"].size(), 1U) << events.dump();
  EXPECT_EQ(events["items"][0]["regarding"]["uid"], slices[0].metadata.uid);
  EXPECT_EQ(events["items"][0]["reportingController"], "resourceslice-controller");
  EXPECT_EQ(events["items"][0]["action"], "Update");
  EXPECT_EQ(env_.metric(c,
                        "resourceslice_controller_events_total{reason=\"ForeignChangeReverted\","
                        "result=\"created\"}"),
            1);

  expectCleanStop(c);
  // The matching log line, at the default verbosity.
  const std::string log = c.process->log();
  const size_t line = log.find("Reverted a change to a managed slice by someone else");
  ASSERT_NE(line, std::string::npos) << log;
  const std::string rest = log.substr(line, log.find('\n', line) - line);
  EXPECT_NE(rest.find("kubectl-edit"), std::string::npos) << rest;
  EXPECT_NE(rest.find(name), std::string::npos) << rest;
}

TEST_F(ServiceTest, DriversAuthenticateWithTheirPodTokensAndPublishOnlyTheirNode) {
  const std::string audience = "resourceslice-test";
  env_.ensureNamespace("drivers");
  const std::string on_a =
      env_.podToken("drivers", "gpu-driver", "gpu-driver-a", "node-a", audience);
  env_.grantPublish("drivers", "gpu-driver", {"auth.example.com"});
  const std::string no_grant =
      env_.podToken("drivers", "other-driver", "other-driver-a", "node-a", audience);
  const std::string wrong_audience =
      env_.podToken("drivers", "gpu-driver", "gpu-driver-a2", "node-a", "someone-else");
  env_.ensureNode("node-b");
  ControllerProcess c =
      env_.startController("auth", {"--auth=tokenreview", "--token-audience=" + audience});
  const std::string body_a = gpuPool("node-a", 4).dump();

  HttpAnswer a =
      env_.http("PUT", c.poolUrl("auth.example.com", "node-a", "?wait=30s"), body_a, on_a);
  EXPECT_EQ(a.code, 200) << a.body;
  EXPECT_TRUE(env_.poolComplete("auth.example.com", "node-a", 1));

  a = env_.http("PUT", c.poolUrl("auth.example.com", "node-b", "?wait=30s"),
                gpuPool("node-b", 4).dump(), on_a);
  EXPECT_EQ(a.code, 403) << "a pod on node-a published node-b's pool: " << a.body;
  a = env_.http("PUT", c.poolUrl("auth.example.com", "node-a"), body_a);
  EXPECT_EQ(a.code, 401) << a.body;
  a = env_.http("PUT", c.poolUrl("auth.example.com", "node-a"), body_a, no_grant);
  EXPECT_EQ(a.code, 403) << "a ServiceAccount without the RBAC grant published: " << a.body;
  a = env_.http("PUT", c.poolUrl("other.example.com", "node-a"), body_a, on_a);
  EXPECT_EQ(a.code, 403) << "the grant is for auth.example.com only: " << a.body;
  a = env_.http("PUT", c.poolUrl("auth.example.com", "node-a"), body_a, wrong_audience);
  EXPECT_EQ(a.code, 401) << "a token for another audience was accepted: " << a.body;
  EXPECT_TRUE(env_.poolSlices("auth.example.com", "node-b").empty());
  EXPECT_TRUE(env_.poolSlices("other.example.com", "node-a").empty());

  expectCleanStop(c);
}

TEST_F(ServiceTest, PushesToEitherReplicaReachTheLeaderAndSigtermReleasesTheLease) {
  env_.ensureNode("node-b");
  const std::string lease = "le-forward";
  ControllerProcess r1 = env_.startController("le-1", leaderFlags("le-1", lease));
  ControllerProcess r2 = env_.startController("le-2", leaderFlags("le-2", lease));
  ASSERT_TRUE(ServiceEnv::eventually([&] { return !holder(lease).empty(); }));
  const std::string leader_id = holder(lease);
  ControllerProcess& leader = leader_id == "le-1" ? r1 : r2;
  ControllerProcess& follower = leader_id == "le-1" ? r2 : r1;
  // The follower learns the leader's address from the Lease.
  ASSERT_TRUE(ServiceEnv::eventually(
      [&] { return env_.http("GET", follower.inventoryUrl() + "/v1/drivers").code == 200; }));

  HttpAnswer a = env_.http("PUT", follower.poolUrl("fwd.example.com", "node-a", "?wait=30s"),
                           gpuPool("node-a", 3).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_EQ(a.json()["leader"], leader_id);
  a = env_.http("PUT", leader.poolUrl("fwd.example.com", "node-b", "?wait=30s"),
                gpuPool("node-b", 3).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_TRUE(env_.poolComplete("fwd.example.com", "node-a", 1));
  EXPECT_TRUE(env_.poolComplete("fwd.example.com", "node-b", 1));
  EXPECT_EQ(env_.metric(leader, "leader_election_master_status{name=\"" + lease + "\"}"), 1);
  EXPECT_EQ(env_.metric(follower, "leader_election_master_status{name=\"" + lease + "\"}"), 0);

  // SIGTERM: exit 0 with the Lease released; the other replica takes over.
  expectCleanStop(leader);
  const std::string after = holder(lease);
  EXPECT_TRUE(after.empty() || after == follower.identity) << after;
  EXPECT_TRUE(
      ServiceEnv::eventually([&] { return holder(lease) == follower.identity; }, seconds(10)));
  // Pushes reach the new leader; nothing the old one published was lost.
  a = env_.http("PUT", follower.poolUrl("fwd.example.com", "node-a", "?wait=30s"),
                gpuPool("node-a", 4).dump());
  EXPECT_EQ(a.code, 200) << a.body;
  EXPECT_TRUE(env_.poolComplete("fwd.example.com", "node-b", 1));
  // Events: each replica's election, about the Lease, and the new leader's
  // adoption of both pools' slices.
  const std::string events = "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=";
  const auto notes = [&](const std::string& selector, const std::string& instance) {
    std::set<std::string> found;
    const Json list = env_.kube("GET", events + client::RestKubeApi::urlEncode(selector)).json();
    for (const Json& e : list.value("items", Json::array())) {
      if (e.value("reportingInstance", "") == instance) found.insert(e.value("note", ""));
    }
    return found;
  };
  for (const ControllerProcess* r : {&r1, &r2}) {
    EXPECT_TRUE(ServiceEnv::eventually([&] {
      return notes("regarding.kind=Lease,regarding.name=" + lease + ",reason=LeaderElected",
                   r->identity)
                 .size() == 1;
    })) << r->identity;
  }
  std::set<std::string> adopted;
  EXPECT_TRUE(ServiceEnv::eventually([&] {
    adopted.clear();
    for (const std::string& note : notes("reason=SlicesAdopted", follower.identity)) {
      if (note.find("fwd.example.com/") != std::string::npos) adopted.insert(note);
    }
    return adopted.size() == 2;
  })) << adopted.size();
  expectCleanStop(follower);
}

TEST_F(ServiceTest, KilledLeaderIsReplacedAndEveryPoolEndsCompleteWithoutDuplicates) {
  constexpr int kPools = 30;
  constexpr int kDevices = 300;  // three slices per pool
  for (int i = 0; i < kPools; ++i) env_.ensureNode("fo-node-" + std::to_string(i));
  const std::string lease = "le-failover";
  const std::string driver = "failover.example.com";
  ControllerProcess r1 = env_.startController("fo-1", leaderFlags("fo-1", lease));
  ControllerProcess r2 = env_.startController("fo-2", leaderFlags("fo-2", lease));
  ASSERT_TRUE(ServiceEnv::eventually([&] { return !holder(lease).empty(); }));
  ControllerProcess& leader = holder(lease) == "fo-1" ? r1 : r2;
  ControllerProcess& survivor = holder(lease) == "fo-1" ? r2 : r1;

  auto pushAll = [&](const ControllerProcess& to) {
    for (int i = 0; i < kPools; ++i) {
      const std::string node = "fo-node-" + std::to_string(i);
      const HttpAnswer a =
          env_.http("PUT", to.poolUrl(driver, node), gpuPool(node, kDevices).dump());
      ASSERT_TRUE(a.code == 200 || a.code == 202) << a.body;
    }
  };
  pushAll(leader);
  // Kill the leader in the middle of publishing.
  ASSERT_TRUE(ServiceEnv::eventually([&] {
    client::ListOptions o;
    o.field_selector = "spec.driver=" + driver;
    auto list = env_.api().listResourceSlices(o);
    return list.ok() && list->items.size() >= 10;
  }));
  leader.process->signal(SIGKILL);
  leader.process->wait(seconds(10));
  std::set<std::string> complete_at_kill;
  for (int i = 0; i < kPools; ++i) {
    const std::string node = "fo-node-" + std::to_string(i);
    if (env_.poolComplete(driver, node, 3)) complete_at_kill.insert(node);
  }

  // The survivor takes over within the lease duration and a few seconds.
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      ServiceEnv::eventually([&] { return holder(lease) == survivor.identity; }, seconds(15)));
  const auto takeover = std::chrono::steady_clock::now() - killed_at;
  EXPECT_LT(takeover, seconds(4 + 6));
  // Pools published before the kill are still complete: adopted, not deleted.
  for (const std::string& node : complete_at_kill) {
    EXPECT_TRUE(env_.poolComplete(driver, node, 3)) << node;
  }

  // Drivers push again (their renewals get 404 from the new leader).
  pushAll(survivor);
  for (int i = 0; i < kPools; ++i) {
    const std::string node = "fo-node-" + std::to_string(i);
    EXPECT_TRUE(ServiceEnv::eventually([&] { return env_.poolComplete(driver, node, 3); }))
        << node << " is not complete";
    std::set<std::string> devices;
    size_t count = 0;
    for (const auto& s : env_.poolSlices(driver, node)) {
      for (const client::Device& d : client::decodeAll(s.spec.devices)) {
        devices.insert(d.name);
        ++count;
      }
    }
    EXPECT_EQ(devices.size(), static_cast<size_t>(kDevices)) << node;
    EXPECT_EQ(count, static_cast<size_t>(kDevices)) << node << " has duplicate devices";
  }
  expectCleanStop(survivor);
}

TEST_F(ServiceTest, LeasedPoolExpiresUnlessRenewed) {
  env_.ensureNode("node-b");
  ControllerProcess c = env_.startController("lease", {"--auth=none"});
  const std::string driver = "lease.example.com";
  ASSERT_TRUE(published(c, driver, "node-a", leased(gpuPool("node-a", 2), 3)));
  ASSERT_TRUE(published(c, driver, "node-b", leased(gpuPool("node-b", 2), 3)));
  // node-b is renewed every second for six seconds; node-a is not.
  for (int i = 0; i < 6; ++i) {
    std::this_thread::sleep_for(seconds(1));
    const HttpAnswer a = env_.http("POST", c.poolUrl(driver, "node-b", "/renew"));
    EXPECT_EQ(a.code, 200) << a.body;
  }
  EXPECT_TRUE(env_.poolSlices(driver, "node-a").empty()) << "an expired pool is still published";
  EXPECT_TRUE(env_.poolComplete(driver, "node-b", 1)) << "a renewed pool was withdrawn";
  EXPECT_EQ(env_.metric(c, "resourceslice_controller_pool_lease_expirations_total{driver=\"" +
                               driver + "\"}"),
            1);
  EXPECT_TRUE(ServiceEnv::eventually([&] { return env_.poolSlices(driver, "node-b").empty(); },
                                     seconds(10)));
  expectCleanStop(c);
}

TEST_F(ServiceTest, CleanupDeletesEveryManagedSliceAndNothingElse) {
  ControllerProcess c = env_.startController("cleanup-run", {"--auth=none"});
  ASSERT_TRUE(published(c, "cleanup.example.com", "node-a", gpuPool("node-a", 130)));
  c.process->signal(SIGTERM);
  ASSERT_EQ(c.process->wait(seconds(20)), 0);

  // A slice someone else manages.
  client::ResourceSlice foreign;
  foreign.metadata.generate_name = "foreign-";
  foreign.spec.driver = "cleanup.example.com";
  foreign.spec.pool = {"foreign", 1, 1};
  foreign.spec.all_nodes = true;
  StatusOr<client::ResourceSlice> created = env_.api().createResourceSlice(foreign);
  ASSERT_TRUE(created.ok()) << created.status().toString();

  Process cleanup(
      {(ClusterEnvironment::buildRoot() / "controller/resourceslice-controller").string(),
       "--kubeconfig=" + ClusterEnvironment::get().kubeconfig().string(), "--cleanup"},
      env_.logDir() / "cleanup.log");
  EXPECT_EQ(cleanup.wait(seconds(60)), 0) << cleanup.log();
  client::ListOptions managed;
  managed.label_selector = "app.kubernetes.io/managed-by=resourceslice-controller";
  auto left = env_.api().listResourceSlices(managed);
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->items.empty()) << left->items.size() << " managed slices left";
  EXPECT_TRUE(env_.api().getResourceSlice(created->metadata.name).ok())
      << "cleanup deleted a slice it does not manage";
  ASSERT_TRUE(env_.api().deleteResourceSlice(created->metadata.name, {}).ok());
}

// The chart's uninstall hook runs --cleanup while replicas of the old
// Deployment may still be stopping: with --leader-elect it deletes only once
// it holds their Lease, so the leader cannot re-create what it deletes.
TEST_F(ServiceTest, CleanupWithLeaderElectionWaitsForTheLeaseAndNothingComesBack) {
  const std::string lease = "cleanup-fence";
  const std::string driver = "fence.example.com";
  ControllerProcess c = env_.startController("cleanup-leader", leaderFlags("fence-1", lease));
  ASSERT_TRUE(ServiceEnv::eventually([&] { return holder(lease) == "fence-1"; }));
  // A pool shared by nodes: the leader re-creates a slice of it that someone
  // else deletes.
  Json pool = {{"nodeSelector",
                {{"nodeSelectorTerms",
                  {{{"matchExpressions",
                     {{{"key", "fabric"}, {"operator", "In"}, {"values", {"fabric-1"}}}}}}}}}},
               {"devices", gpuPool("fabric", 130)["devices"]}};
  ASSERT_TRUE(published(c, driver, "fabric", pool));
  ASSERT_TRUE(env_.poolComplete(driver, "fabric", 2));

  // The Lease flags as the controllers have them (the wait is bounded by
  // --cleanup-lease-timeout's default, 60 s).
  std::vector<std::string> args = leaderFlags("fence-cleanup", lease);
  args.insert(args.begin(),
              {(ClusterEnvironment::buildRoot() / "controller/resourceslice-controller").string(),
               "--kubeconfig=" + ClusterEnvironment::get().kubeconfig().string(), "--cleanup"});
  // A cleanup whose wait runs out fails, naming the Lease and its holder.
  std::vector<std::string> impatient_args = args;
  impatient_args.push_back("--cleanup-lease-timeout=2s");
  Process impatient(impatient_args, env_.logDir() / "cleanup-impatient.log");
  EXPECT_EQ(impatient.wait(seconds(20)), 1) << impatient.log();
  const std::string refused = impatient.log();
  EXPECT_NE(refused.find("the leader Lease default/" + lease + " is still held by"),
            std::string::npos)
      << refused;
  EXPECT_NE(refused.find("fence-1"), std::string::npos) << refused;
  EXPECT_TRUE(env_.poolComplete(driver, "fabric", 2)) << "deleted under a live leader";

  Process cleanup(args, env_.logDir() / "cleanup-fenced.log");
  // While the leader renews its Lease, the cleanup waits and deletes nothing.
  EXPECT_EQ(cleanup.wait(seconds(4)), std::nullopt) << "cleanup did not wait for the Lease\n"
                                                    << cleanup.log();
  EXPECT_TRUE(env_.poolComplete(driver, "fabric", 2)) << "deleted under a live leader";

  // The leader stops and releases the Lease; the cleanup takes it, deletes
  // every managed slice and releases it again.
  expectCleanStop(c);
  EXPECT_EQ(cleanup.wait(seconds(30)), 0) << cleanup.log();
  EXPECT_NE(cleanup.log().find("waiting for the leader Lease"), std::string::npos) << cleanup.log();
  EXPECT_TRUE(env_.poolSlices(driver, "fabric").empty())
      << env_.poolSlices(driver, "fabric").size() << " managed slices left";
  std::this_thread::sleep_for(seconds(2));
  EXPECT_TRUE(env_.poolSlices(driver, "fabric").empty()) << "a deleted slice came back";
  EXPECT_EQ(holder(lease), "");
}

TEST_F(ServiceTest, ThousandDevicePoolFollowsTheGenerationRules) {
  ControllerProcess c = env_.startController("large", {"--auth=none"});
  const std::string driver = "large.example.com";
  auto pool = [](int devices) {
    Json p = {{"nodeSelector",
               {{"nodeSelectorTerms",
                 {{{"matchExpressions",
                    {{{"key", "fabric"}, {"operator", "In"}, {"values", {"fabric-1"}}}}}}}}}},
              {"devices", Json::array()}};
    for (int i = 0; i < devices; ++i) {
      p["devices"].push_back(
          {{"name", "nic-" + std::to_string(i)}, {"attributes", {{"speed", {{"int", 400}}}}}});
    }
    return p;
  };
  auto writes = [&](const std::string& verb) {
    const double v = env_.metric(c, "resourceslice_controller_slice_writes_total{driver=\"" +
                                        driver + "\",result=\"success\",verb=\"" + verb + "\"}");
    return std::isnan(v) ? 0.0 : v;
  };
  auto generation = [&] {
    const auto slices = env_.poolSlices(driver, "fabric-1");
    return slices.empty() ? int64_t{-1} : slices[0].spec.pool.generation;
  };

  HttpAnswer a = env_.http("PUT", c.poolUrl(driver, "fabric-1", "?wait=60s"), pool(1000).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_TRUE(env_.poolComplete(driver, "fabric-1", 8));
  EXPECT_EQ(writes("create"), 8);
  const int64_t g1 = generation();

  // One device changes: one update, same generation.
  Json changed = pool(1000);
  changed["devices"][500]["attributes"]["speed"]["int"] = 800;
  a = env_.http("PUT", c.poolUrl(driver, "fabric-1", "?wait=60s"), changed.dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_EQ(writes("update"), 1);
  EXPECT_EQ(generation(), g1);
  EXPECT_TRUE(env_.poolComplete(driver, "fabric-1", 8));

  // Growing past the last slice's room adds a slice: bump, all rewritten.
  a = env_.http("PUT", c.poolUrl(driver, "fabric-1", "?wait=60s"), pool(1100).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_TRUE(env_.poolComplete(driver, "fabric-1", 9));
  EXPECT_EQ(generation(), g1 + 1);
  EXPECT_EQ(writes("create"), 9);
  EXPECT_EQ(writes("update"), 1 + 8);

  // Shrinking deletes the emptied slices and bumps again.
  a = env_.http("PUT", c.poolUrl(driver, "fabric-1", "?wait=60s"), pool(100).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  EXPECT_TRUE(env_.poolComplete(driver, "fabric-1", 1));
  EXPECT_EQ(generation(), g1 + 2);
  EXPECT_EQ(writes("delete"), 8);
  expectCleanStop(c);
}

// Every long-lived thread names itself (README "Threads"); an idle controller
// without leader election runs exactly these, no pull worker while it pulls
// from nothing, and of the endpoints' pool only what its one push needed.
TEST_F(ServiceTest, IdleThreadsAreNamedAndCounted) {
  ControllerProcess c = env_.startController("threads", {"--auth=none", "--leader-elect=false"});
  const std::string driver = "threads.example.com";
  ASSERT_TRUE(published(c, driver, "node-a", gpuPool("node-a", 4)));
  std::map<std::string, int> by_name;
  const std::filesystem::path tasks = "/proc/" + std::to_string(c.process->pid()) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(tasks)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    by_name[name]++;
  }
  int total = 0;
  for (const auto& [name, n] : by_name) {
    std::cout << "  " << n << " " << name << "\n";
    total += n;
  }
  std::cout << "threads at idle: " << total << "\n";
  EXPECT_EQ(by_name["reconcile"], 4) << "the idle workers; more start only for a burst";
  EXPECT_EQ(by_name["pull-fetch"], 0) << "pull workers start with the first source";
  // The endpoints' blocking work and the controller's housekeeping share one
  // pool whose threads start on demand: one push, and a round of
  // housekeeping every second, one thread.
  EXPECT_EQ(by_name["service-work"], 1) << "the endpoints' and housekeeping's pool";
  EXPECT_EQ(by_name["inventory-work"] + by_name["metrics-auth"] + by_name["housekeeping"], 0)
      << "no pool of their own";
  EXPECT_EQ(by_name["slice-writes"], 0) << "write helpers start with the first bump";
  EXPECT_EQ(by_name["queue-delays"], 0) << "the workers release delayed keys";
  EXPECT_LE(by_name["api-client"], 3) << "two I/O threads and Asio's resolver";
  for (const char* one : {"signals", "events", "i:resourceslice", "i:nodes", "http-inventory",
                          "http-metrics", "http-health"}) {
    EXPECT_EQ(by_name[one], 1) << one;
  }
  EXPECT_EQ(by_name["resourceslice-c"], 1) << "only the main thread goes unnamed";
  EXPECT_LE(total, 16);
  expectCleanStop(c);
}

TEST_F(ServiceTest, BadFlagsExitWithCode2NamingTheFlag) {
  Process p({(ClusterEnvironment::buildRoot() / "controller/resourceslice-controller").string(),
             "--workers=zero"},
            env_.logDir() / "badflag.log");
  EXPECT_EQ(p.wait(seconds(10)), 2);
  EXPECT_NE(p.log().find("--workers"), std::string::npos) << p.log();
  Process q({(ClusterEnvironment::buildRoot() / "controller/resourceslice-controller").string(),
             "--kubeconfig=/nonexistent/kubeconfig"},
            env_.logDir() / "badconfig.log");
  EXPECT_EQ(q.wait(seconds(10)), 2);
  EXPECT_NE(q.log().find("/nonexistent/kubeconfig"), std::string::npos) << q.log();
}

// A port already taken is no usage error: the part that cannot start is
// named, with its flag, and the exit code is 1.
TEST_F(ServiceTest, APortInUseExitsWithCode1NamingThePartAndTheFlag) {
  const int taken = freePort();
  const int holder = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(taken));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(holder, 1), 0);
  Process p({(ClusterEnvironment::buildRoot() / "controller/resourceslice-controller").string(),
             "--kubeconfig=" + kCluster->kubeconfig().string(), "--auth=none",
             "--leader-elect=false", "--metrics-bind-address=0",
             "--inventory-bind-address=127.0.0.1:" + std::to_string(freePort()),
             "--health-probe-bind-address=127.0.0.1:" + std::to_string(taken)},
            env_.logDir() / "port-in-use.log");
  EXPECT_EQ(p.wait(seconds(30)), 1);
  close(holder);
  EXPECT_NE(p.log().find("A part of the service failed"), std::string::npos) << p.log();
  EXPECT_NE(p.log().find("part=\"health probe server\""), std::string::npos) << p.log();
  EXPECT_NE(p.log().find("--health-probe-bind-address"), std::string::npos) << p.log();
}

// A kubeconfig for the API server that authenticates with `token`.
std::filesystem::path tokenKubeconfig(const std::filesystem::path& path, const std::string& token) {
  std::ofstream out(path);
  out << "apiVersion: v1\nkind: Config\n"
      << "clusters:\n- name: test\n  cluster:\n    server: " << kCluster->server()
      << "\n    certificate-authority: " << kCluster->caFile().string() << "\n"
      << "users:\n- name: test\n  user:\n    token: " << token << "\n"
      << "contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n"
      << "    namespace: default\ncurrent-context: test\n";
  return path;
}

// A part that cannot become ready at start (here for want of RBAC) is a
// failure once --start-timeout has passed: exit 1, the part and why named.
TEST_F(ServiceTest, APartNotReadyWithinTheStartTimeoutExitsWithCode1NamingIt) {
  env_.ensureServiceAccount("default", "rsc-no-rights");
  const std::filesystem::path kubeconfig = tokenKubeconfig(
      env_.logDir() / "no-rights.kubeconfig", env_.serviceAccountToken("default", "rsc-no-rights"));
  auto run = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        (ClusterEnvironment::buildRoot() / "controller/resourceslice-controller").string(),
        "--kubeconfig=" + kubeconfig.string(),
        "--auth=none",
        "--leader-elect=false",
        "--metrics-bind-address=0",
        "--inventory-bind-address=127.0.0.1:0",
        "--health-probe-bind-address=0",
        "--start-timeout=3s"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = std::make_unique<Process>(argv, env_.logDir() / (name + ".log"));
    EXPECT_EQ(p->wait(seconds(30)), 1) << p->log();
    return p;
  };
  // The informers cannot list ResourceSlices.
  auto informers = run("informers-forbidden", {});
  EXPECT_NE(informers->log().find("part=\"informers\""), std::string::npos) << informers->log();
  EXPECT_NE(informers->log().find("ResourceSlices not listed within 3 s (flag --start-timeout)"),
            std::string::npos)
      << informers->log();
  EXPECT_NE(informers->log().find("forbidden"), std::string::npos) << informers->log();
  EXPECT_NE(informers->log().find("\"Stopped after a failure\""), std::string::npos);
  // The inventory certificate's Secret cannot be read.
  auto certificate = run("certificate-forbidden", {"--inventory-tls-secret=rsc-no-rights-tls",
                                                   "--inventory-ca-configmap=rsc-no-rights-ca",
                                                   "--inventory-tls-names=localhost"});
  EXPECT_NE(certificate->log().find("part=\"inventory certificate\""), std::string::npos)
      << certificate->log();
  EXPECT_NE(certificate->log().find("first sync not done within --start-timeout"),
            std::string::npos)
      << certificate->log();
}

// The threads of process `pid`, by name.
std::map<std::string, int> threadsByName(int pid) {
  std::map<std::string, int> by_name;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    by_name[name]++;
  }
  return by_name;
}

// A bump's writes run on helpers created once and shared by every reconcile
// (--max-parallel-slice-writes - 1 of them): a second 16-slice bump starts no
// thread.
TEST_F(ServiceTest, BumpsRunOnWriteHelpersStartedOnce) {
  ControllerProcess c = env_.startController(
      "bump-threads", {"--auth=none", "--leader-elect=false", "--max-parallel-slice-writes=8"});
  const std::string driver = "bump-threads.example.com";
  // 2,048 devices: 16 slices of 128.
  ASSERT_TRUE(published(c, driver, "node-a", gpuPool("node-a", 2048, "A100")));
  ASSERT_TRUE(env_.poolComplete(driver, "node-a", 16));
  const std::map<std::string, int> first = threadsByName(c.process->pid());
  EXPECT_GE(first.count("slice-writes") ? first.at("slice-writes") : 0, 1);
  EXPECT_LE(first.count("slice-writes") ? first.at("slice-writes") : 0, 7);
  // Every device changes: the generation is bumped and every slice rewritten.
  for (const char* model : {"H100", "B200"}) {
    ASSERT_TRUE(published(c, driver, "node-a", gpuPool("node-a", 2048, model)));
    ASSERT_TRUE(env_.poolComplete(driver, "node-a", 16));
    EXPECT_EQ(threadsByName(c.process->pid()), first) << "after the bump to " << model;
  }
  expectCleanStop(c);
}

}  // namespace
}  // namespace rsc::testing
