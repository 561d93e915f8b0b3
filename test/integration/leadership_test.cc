// Leadership of controller processes on the real API server. The leader is
// frozen (SIGSTOP) past its lease; the other replica takes over and
// publishes a newer version of a pool the frozen one had published, and a
// push queues on the frozen one. Resumed (SIGCONT), the old leader holds a
// stale copy of the pool and its informer sees the new leader's write as a
// foreign change to revert: it must write nothing, must not take the queued
// push as leader, and must exit with code 1 to campaign anew. And a follower
// forwards pushes to the leader over TLS, verified with --inventory-ca-file
// for --inventory-server-name.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <future>

#include "test/controller/http/test_http_client.h"
#include "test/integration/leader_flags.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

using std::chrono::seconds;

constexpr char kDriver[] = "frozen.example.com";

std::string poolUrl(const ControllerProcess& c, const std::string& pool) {
  return c.poolUrl(kDriver, pool, "?wait=20s");
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
  std::string holder(const std::string& lease) { return env_.leaseHolder(lease); }
  ControllerProcess replica(const std::string& id, const std::string& lease,
                            const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = leaderFlags(id, lease);
    args.insert(args.end(), extra.begin(), extra.end());
    return env_.startController(id, args);
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
  HttpAnswer a = env_.http("PUT", poolUrl(old_leader, "node-a"), gpuPool("node-a", 2).dump());
  ASSERT_EQ(a.code, 200) << a.body;

  // Frozen past its lease: the other replica takes over.
  old_leader.process->signal(SIGSTOP);
  ASSERT_TRUE(
      ServiceEnv::eventually([&] { return holder(lease) == next_leader.identity; }, seconds(20)));
  // The driver pushes a newer version to the new leader, which publishes it.
  a = env_.http("PUT", poolUrl(next_leader, "node-a"), gpuPool("node-a", 3).dump());
  ASSERT_EQ(a.code, 200) << a.body;
  const auto published = snapshot(env_, "node-a");
  ASSERT_EQ(published.second, 3U);

  // A push of another pool waits in the frozen replica's socket.
  auto queued = std::async(std::launch::async, [&] {
    return env_.http("PUT", poolUrl(old_leader, "node-b"), gpuPool("node-b", 1).dump());
  });
  ASSERT_EQ(queued.wait_for(seconds(1)), std::future_status::timeout);

  // Resumed: it must notice at once that it no longer leads.
  old_leader.process->signal(SIGCONT);
  EXPECT_EQ(old_leader.process->wait(seconds(30)), 1) << old_leader.process->log();
  const HttpAnswer answer = queued.get();
  const Json status = answer.json();
  const std::string answered_for = status.is_object() ? status.value("leader", "") : "";
  // Three answers are right: 503, the new leader's answer (forwarded), or
  // none at all, when the exiting process closes the connection before it
  // read the request (the driver retries). Wrong is an answer of its own.
  EXPECT_TRUE(answer.code == 0 || answer.code == 503 || answered_for == next_leader.identity)
      << "the old leader took the push itself: " << answer.code << " " << answer.body;

  // Not one write from the old leader: the new leader's version stands as it
  // was written.
  EXPECT_EQ(snapshot(env_, "node-a"), published) << old_leader.process->log();
  EXPECT_EQ(holder(lease), next_leader.identity);

  expectCleanStop(next_leader);
}

// A leader that stops releases the Lease, and the followers learn of it only
// at their next poll: a retry period later (2 s by default; 10 s here, so
// that the pushes below come well before it). A push meanwhile must not fail
// on the leader that went away: the follower reads the Lease at once, takes
// the released lease and serves the push, and another follower that still
// names the old leader forwards to the new one.
TEST_F(LeadershipTest, PushesRightAfterTheLeaderStoppedReachTheNextLeader) {
  env_.ensureNode("node-d");
  const std::string lease = "le-stale";
  const std::vector<std::string> slow_polls = {"--leader-elect-lease-duration=30s",
                                               "--leader-elect-renew-deadline=20s",
                                               "--leader-elect-retry-period=10s"};
  ControllerProcess r1 = replica("st-1", lease, slow_polls);
  ASSERT_TRUE(ServiceEnv::eventually([&] { return holder(lease) == r1.identity; }, seconds(20)));
  ControllerProcess r2 = replica("st-2", lease, slow_polls);
  ControllerProcess r3 = replica("st-3", lease, slow_polls);
  // Both followers read the Lease (they forward to r1).
  for (ControllerProcess* f : {&r2, &r3}) {
    ASSERT_TRUE(ServiceEnv::eventually([&] {
      const HttpAnswer a = env_.http("PUT", poolUrl(*f, "node-d"), gpuPool("node-d", 1).dump());
      return a.code == 200 && a.json().value("leader", "") == r1.identity;
    })) << f->identity;
  }

  // r1 stops and releases the Lease; r2 and r3 still name it as the leader.
  expectCleanStop(r1);
  const auto stopped = std::chrono::steady_clock::now();
  HttpAnswer a = env_.http("PUT", poolUrl(r2, "node-d"), gpuPool("node-d", 2).dump());
  EXPECT_EQ(a.code, 200) << a.body;
  EXPECT_EQ(a.json().value("leader", ""), r2.identity) << a.body;
  a = env_.http("PUT", poolUrl(r3, "node-d"), gpuPool("node-d", 3).dump());
  EXPECT_EQ(a.code, 200) << a.body;
  EXPECT_EQ(a.json().value("leader", ""), r2.identity) << a.body;
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, seconds(10))
      << "the pushes took as long as a poll: they did not test a stale follower";
  EXPECT_EQ(holder(lease), r2.identity);
  EXPECT_EQ(snapshot(env_, "node-d").second, 3U);
  expectCleanStop(r3);
  expectCleanStop(r2);
}

TEST_F(LeadershipTest, FollowerForwardsOverTlsCheckingTheCaFileAndTheServerName) {
  env_.ensureNode("node-c");
  // One certificate for every replica, for localhost and 127.0.0.1; it is
  // its own CA. The test, as a driver, trusts it too.
  controller::http::TempDir dir;
  const auto cert = controller::http::TestCertificate::make("replicas");
  cert.writeTo(dir.path() / "tls.crt", dir.path() / "tls.key");
  const std::string ca = (dir.path() / "ca.crt").string();
  std::ofstream(ca) << cert.cert_pem;
  const HttpTls trust_replicas{.ca_pem = cert.cert_pem};
  auto with = [&](const std::string& server_name) {
    return std::vector<std::string>{
        "--inventory-tls-cert-file=" + (dir.path() / "tls.crt").string(),
        "--inventory-tls-key-file=" + (dir.path() / "tls.key").string(),
        "--inventory-ca-file=" + ca, "--inventory-server-name=" + server_name};
  };
  auto httpsPool = [](const ControllerProcess& c) {
    return "https://127.0.0.1:" + std::to_string(c.inventory_port) + "/v1/drivers/" + kDriver +
           "/pools/node-c?wait=20s";
  };

  const std::string lease = "le-tls";
  ControllerProcess r1 = replica("tls-1", lease, with("localhost"));
  ControllerProcess r2 = replica("tls-2", lease, with("localhost"));
  ASSERT_TRUE(ServiceEnv::eventually([&] { return !holder(lease).empty(); }));
  const std::string leader_id = holder(lease);
  ControllerProcess& leader = leader_id == "tls-1" ? r1 : r2;
  ControllerProcess& follower = leader_id == "tls-1" ? r2 : r1;
  // The follower forwards to https://127.0.0.1:<port>, checking the leader's
  // certificate for "localhost" against the CA file.
  HttpAnswer a;
  ASSERT_TRUE(ServiceEnv::eventually([&] {
    a = env_.http("PUT", httpsPool(follower), gpuPool("node-c", 1).dump(), "", trust_replicas);
    return a.code == 200;
  })) << a.code
      << " " << a.body << "\n"
      << follower.process->log();
  EXPECT_EQ(a.json()["leader"], leader_id);

  // A replica that checks the leader for a name its certificate lacks does
  // not forward to it.
  ControllerProcess r3 = replica("tls-3", lease, with("resourceslice-controller.default.svc"));
  ASSERT_TRUE(ServiceEnv::eventually([&] {
    return r3.process->log().find("leader=\"" + leader_id + "\"") != std::string::npos;
  })) << r3.process->log();
  a = env_.http("PUT", httpsPool(r3), gpuPool("node-c", 2).dump(), "", trust_replicas);
  EXPECT_EQ(a.code, 503) << a.body;
  EXPECT_NE(a.body.find("leader " + leader_id), std::string::npos) << a.body;
  EXPECT_NE(r3.process->log().find("Not forwarding a push to the leader"), std::string::npos)
      << r3.process->log();
  EXPECT_EQ(snapshot(env_, "node-c").second, 1U);

  for (ControllerProcess* c : {&r3, &follower, &leader}) {
    expectCleanStop(*c);
  }
}

}  // namespace
}  // namespace rsc::testing
