#include "controller/leader/leader_elector.h"

#include <gtest/gtest.h>

#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller {
namespace {

using std::chrono::seconds;

class LeaderElectorTest : public ::testing::Test {
 protected:
  std::unique_ptr<LeaderElector> make(const std::string& identity) {
    LeaderElectionOptions o;
    o.api = &api_;
    o.clock = &clock_;
    o.lease_namespace = "kube-system";
    o.lease_name = "resourceslice-controller";
    o.identity = identity;
    auto e = LeaderElector::create(o);
    EXPECT_TRUE(e.ok()) << e.status().toString();
    return std::move(*e);
  }
  client::Lease lease() { return *api_.lease("kube-system", "resourceslice-controller"); }

  testing::FakeClock clock_;
  testing::FakeKubeApi api_{clock_};
};

TEST_F(LeaderElectorTest, FirstCandidateCreatesTheLeaseAndOthersWait) {
  auto a = make("a");
  auto b = make("b");
  EXPECT_TRUE(a->tryAcquireOrRenew());
  EXPECT_FALSE(b->tryAcquireOrRenew());
  EXPECT_EQ(b->leader(), "a");
  const client::Lease l = lease();
  EXPECT_EQ(l.spec.holder_identity, "a");
  EXPECT_EQ(l.spec.lease_duration_seconds, 15);
  EXPECT_EQ(l.spec.lease_transitions, 0);
}

TEST_F(LeaderElectorTest, RenewingLeaderKeepsTheLease) {
  auto a = make("a");
  auto b = make("b");
  ASSERT_TRUE(a->tryAcquireOrRenew());
  for (int i = 0; i < 20; ++i) {
    clock_.advance(seconds(2));
    ASSERT_TRUE(a->tryAcquireOrRenew());
    EXPECT_FALSE(b->tryAcquireOrRenew()) << "after " << 2 * (i + 1) << " s";
  }
}

TEST_F(LeaderElectorTest, TakeoverWaitsForTheLeaseDurationFromLocalObservation) {
  auto a = make("a");
  auto b = make("b");
  ASSERT_TRUE(a->tryAcquireOrRenew());
  // a stops renewing (it died). b first sees the record now...
  EXPECT_FALSE(b->tryAcquireOrRenew());
  clock_.advance(seconds(14));
  EXPECT_FALSE(b->tryAcquireOrRenew()) << "the lease is still valid as b observed it";
  clock_.advance(seconds(2));
  EXPECT_TRUE(b->tryAcquireOrRenew());
  const client::Lease l = lease();
  EXPECT_EQ(l.spec.holder_identity, "b");
  EXPECT_EQ(l.spec.lease_transitions, 1);
}

TEST_F(LeaderElectorTest, ReleaseLetsTheNextCandidateInAtOnce) {
  auto a = make("a");
  auto b = make("b");
  ASSERT_TRUE(a->tryAcquireOrRenew());
  EXPECT_FALSE(b->tryAcquireOrRenew());
  // release() only gives up a lease that run() made us lead with; emulate
  // by running a's loop until it leads, then stopping it.
  std::stop_source stop;
  std::thread runner([&] { a->run(stop.get_token()); });
  while (!a->isLeader()) std::this_thread::yield();
  stop.request_stop();
  runner.join();
  ASSERT_TRUE(a->release().ok());
  EXPECT_EQ(lease().spec.holder_identity, "");
  EXPECT_EQ(lease().spec.lease_duration_seconds, 1);
  clock_.advance(seconds(2));
  EXPECT_TRUE(b->tryAcquireOrRenew());
}

TEST_F(LeaderElectorTest, LosingTheUpdateRaceIsNotLeading) {
  auto a = make("a");
  auto b = make("b");
  ASSERT_TRUE(a->tryAcquireOrRenew());
  EXPECT_FALSE(b->tryAcquireOrRenew());
  clock_.advance(seconds(16));
  api_.prependReactor("update", "leases", [](testing::FakeKubeApi::Request&) {
    return conflict("the object has been modified");
  });
  EXPECT_FALSE(b->tryAcquireOrRenew());
  EXPECT_EQ(lease().spec.holder_identity, "a");
}

TEST_F(LeaderElectorTest, RunStopsLeadingWhenRenewalsFail) {
  int started = 0;
  int stopped = 0;
  LeaderElectionOptions o;
  o.api = &api_;
  o.clock = &clock_;
  o.lease_namespace = "kube-system";
  o.lease_name = "resourceslice-controller";
  o.identity = "a";
  o.on_started_leading = [&] {
    ++started;
    // From now on the API server refuses every lease write.
    api_.prependReactor("update", "leases",
                        [](testing::FakeKubeApi::Request&) { return unavailable("injected"); });
  };
  o.on_stopped_leading = [&] { ++stopped; };
  auto e = std::move(*LeaderElector::create(o));
  // The fake clock advances as run() sleeps, so this returns once the renew
  // deadline has passed without a renewal.
  e->run(std::stop_token());
  EXPECT_EQ(started, 1);
  EXPECT_EQ(stopped, 1);
  EXPECT_FALSE(e->isLeader());
}

TEST_F(LeaderElectorTest, RejectsTimingsClientGoWouldReject) {
  LeaderElectionOptions o;
  o.api = &api_;
  o.clock = &clock_;
  o.lease_namespace = "ns";
  o.lease_name = "l";
  o.identity = "a";
  o.renew_deadline = seconds(20);
  EXPECT_FALSE(LeaderElector::create(o).ok());
  o.renew_deadline = seconds(2);
  EXPECT_FALSE(LeaderElector::create(o).ok());
  o.renew_deadline = seconds(10);
  EXPECT_TRUE(LeaderElector::create(o).ok());
  o.identity = "";
  EXPECT_FALSE(LeaderElector::create(o).ok());
}

TEST(LeaderIdentity, IsUniquePerCall) {
  const std::string a = makeLeaderIdentity("pod-1");
  EXPECT_EQ(a.substr(0, 6), "pod-1_");
  EXPECT_NE(a, makeLeaderIdentity("pod-1"));
}

}  // namespace
}  // namespace rsc::controller
