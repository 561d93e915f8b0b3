// Leadership of two controller processes on the real API server. The leader
// is frozen (SIGSTOP) past its lease; the other replica takes over and
// publishes a newer version of a pool the frozen one had published, and a
// push queues on the frozen one. Resumed (SIGCONT), the old leader holds a
// stale copy of the pool and its informer sees the new leader's write as a
// foreign change to revert: it must write nothing, must not take the queued
// push as leader, and must exit with code 1 to campaign anew.
#include <gtest/gtest.h>
#include <signal.h>

#include <future>

#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using std::chrono::seconds;

constexpr char kDriver[] = "frozen.example.com";

Json nodePool(const std::string& node, int devices) {
  Json pool = {{"nodeName", node}, {"devices", Json::array()}};
  for (int i = 0; i < devices; ++i)
    pool["devices"].push_back({{"name", "dev-" + std::to_string(i)}});
  return pool;
}

std::string poolUrl(const ControllerProcess& c, const std::string& pool) {
  return c.inventoryUrl() + "/v1/drivers/" + kDriver + "/pools/" + pool + "?wait=20s";
}

// name -> resourceVersion of the pool's slices, and the number of devices.
std::pair<std::map<std::string, std::string>, size_t> snapshot(ServiceEnv& env,
                                                               const std::string& pool) {
  std::pair<std::map<std::string, std::string>, size_t> out;
  for (const client::ResourceSlice& s : env.poolSlices(kDriver, pool)) {
    out.first[s.metadata.name] = s.metadata.resource_version;
    out.second += s.spec.devices.size();
  }
  return out;
}

class LeadershipTest : public ::testing::Test {
 protected:
  std::string holder(const std::string& lease) {
    StatusOr<client::Lease> l = env_.api().getLease("default", lease);
    return l.ok() ? l->spec.holder_identity.value_or("") : "";
  }
  ControllerProcess replica(const std::string& id, const std::string& lease) {
    return env_.startController(
        id,
        {"--auth=none", "--leader-elect", "--leader-election-namespace=default",
         "--leader-election-id=" + lease, "--leader-elect-lease-duration=4s",
         "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=1s", "--identity=" + id});
  }

  ServiceEnv env_;
};

TEST_F(LeadershipTest, FrozenLeaderWritesNothingAfterItResumes) {
  env_.ensureNode("node-a");
  env_.ensureNode("node-b");
  const std::string lease = "le-frozen";
  ControllerProcess r1 = replica("fz-1", lease);
  ControllerProcess r2 = replica("fz-2", lease);
  ASSERT_TRUE(ServiceEnv::eventually([&] { return !holder(lease).empty(); }));
  ControllerProcess& old_leader = holder(lease) == "fz-1" ? r1 : r2;
  ControllerProcess& next_leader = holder(lease) == "fz-1" ? r2 : r1;

  // The leader publishes the first version of the pool.
  HttpAnswer a = env_.http("PUT", poolUrl(old_leader, "node-a"), nodePool("node-a", 2).dump());
  ASSERT_EQ(a.code, 200) << a.body;

  // Frozen past its lease: the other replica takes over.
  old_leader.process->signal(SIGSTOP);
  ASSERT_TRUE(
      ServiceEnv::eventually([&] { return holder(lease) == next_leader.identity; }, seconds(20)));
  // The driver pushes a newer version to the new leader, which publishes it.
  a = env_.http("PUT", poolUrl(next_leader, "node-a"), nodePool("node-a", 3).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  const auto published = snapshot(env_, "node-a");
  ASSERT_EQ(published.second, 3U);

  // A push of another pool waits in the frozen replica's socket.
  auto queued = std::async(std::launch::async, [&] {
    return env_.http("PUT", poolUrl(old_leader, "node-b"), nodePool("node-b", 1).dump());
  });
  ASSERT_EQ(queued.wait_for(seconds(1)), std::future_status::timeout);

  // Resumed: it must notice at once that it no longer leads.
  old_leader.process->signal(SIGCONT);
  EXPECT_EQ(old_leader.process->wait(seconds(30)), 1) << old_leader.process->log();
  const HttpAnswer answer = queued.get();
  const Json status = answer.json();
  const std::string answered_for = status.is_object() ? status.value("leader", "") : "";
  EXPECT_TRUE(answer.code == 503 || answered_for == next_leader.identity)
      << "the old leader took the push itself: " << answer.code << " " << answer.body;

  // Not one write from the old leader: the new leader's version stands as it
  // was written.
  EXPECT_EQ(snapshot(env_, "node-a"), published) << old_leader.process->log();
  EXPECT_EQ(holder(lease), next_leader.identity);

  next_leader.process->signal(SIGTERM);
  EXPECT_EQ(next_leader.process->wait(seconds(20)), 0) << next_leader.process->log();
}

}  // namespace
}  // namespace rsc::testing
