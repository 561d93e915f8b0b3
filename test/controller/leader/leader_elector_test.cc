#include "controller/leader/leader_elector.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller::leader {
namespace {

using std::chrono::seconds;

LeaderElectionOptions electionOptions(client::KubeApi& api, Clock& clock,
                                      const std::string& identity) {
  LeaderElectionOptions o;
  o.api = &api;
  o.clock = &clock;
  o.lease_namespace = "kube-system";
  o.lease_name = "resourceslice-controller";
  o.identity = identity;
  return o;
}

class LeaderElectorTest : public ::testing::Test {
 protected:
  LeaderElectionOptions options(const std::string& identity) {
    return electionOptions(api_, clock_, identity);
  }
  std::unique_ptr<LeaderElector> make(const std::string& identity) {
    auto e = LeaderElector::create(options(identity));
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
  // release() only gives up a lease that run() made us lead with: a leads,
  // and stops as soon as it has started leading.
  std::stop_source stop;
  LeaderElectionOptions o = options("a");
  o.on_started_leading = [&](std::stop_token) { stop.request_stop(); };
  auto a = std::move(*LeaderElector::create(o));
  auto b = make("b");
  a->run(stop.get_token());
  EXPECT_FALSE(b->tryAcquireOrRenew());
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

TEST_F(LeaderElectorTest, LeaderWhoseRenewalsSucceedKeepsLeadingOverManyRenewDeadlines) {
  LeaderElectionOptions o = options("a");
  std::atomic<int> started = 0;
  int stopped = 0;
  o.on_started_leading = [&](std::stop_token) { ++started; };
  o.on_stopped_leading = [&] { ++stopped; };
  auto e = std::move(*LeaderElector::create(o));
  // The lease does not exist, so the first acquisition is a create; every
  // update is a renewal, seen here on run()'s thread. The fake clock moves
  // only as run() sleeps.
  std::stop_source stop;
  int renewals = 0;
  int renewals_without_lease = 0;
  Clock::TimePoint first{};
  api_.prependReactor("update", "leases", [&](testing::FakeKubeApi::Request&) {
    if (!e->isLeader() || !e->holdsLease()) ++renewals_without_lease;
    if (++renewals == 1) first = clock_.now();
    if (clock_.now() - first >= 5 * o.renew_deadline) stop.request_stop();
    return okStatus();
  });
  e->run(stop.get_token());
  EXPECT_TRUE(stop.stop_requested())
      << "run() returned after " << renewals << " renewals, before five renew deadlines passed";
  EXPECT_GE(renewals, 25);
  EXPECT_EQ(renewals_without_lease, 0);
  EXPECT_EQ(started, 1);
  EXPECT_EQ(stopped, 1);
  // Asked to stop, not lost: the lease is still ours to release.
  EXPECT_TRUE(e->isLeader());
  EXPECT_EQ(lease().spec.holder_identity, "a");
  EXPECT_TRUE(e->release().ok());
  EXPECT_EQ(lease().spec.holder_identity, "");
}

TEST_F(LeaderElectorTest, LeaderWhoseRenewalsFailStopsLeadingAtTheRenewDeadline) {
  LeaderElectionOptions o = options("a");
  Clock::TimePoint acquired{};
  api_.prependReactor("create", "leases", [&](testing::FakeKubeApi::Request&) {
    acquired = clock_.now();
    return okStatus();
  });
  // From the first renewal on, the API server refuses every lease write. At
  // each attempt the fence must be open exactly while the deadline is ahead.
  LeaderElector* self = nullptr;
  std::vector<Clock::Duration> attempts;
  int fence_wrong = 0;
  api_.prependReactor("update", "leases", [&](testing::FakeKubeApi::Request&) {
    const Clock::Duration since = clock_.now() - acquired;
    attempts.push_back(since);
    if (self->holdsLease() != (since < o.renew_deadline)) ++fence_wrong;
    return unavailable("injected");
  });
  // What main() does: the work starts on its own thread and runs until
  // leadership ends; on_stopped_leading stops it and waits for it.
  std::mutex mu;
  std::condition_variable_any cv;
  bool working = false;
  o.on_started_leading = [&](std::stop_token leading) {
    std::unique_lock lock(mu);
    working = true;
    cv.notify_all();
    cv.wait(lock, leading, [] { return false; });
    working = false;
    cv.notify_all();
  };
  Clock::Duration stopped_after{};
  bool fence_open_at_stop = true;
  bool leading_requested_stop = false;
  o.on_stopped_leading = [&] {
    stopped_after = clock_.now() - acquired;
    fence_open_at_stop = self->holdsLease();
    std::unique_lock lock(mu);
    // The work's stop was requested before this callback: it ends now.
    leading_requested_stop = cv.wait_for(lock, std::chrono::seconds(30), [&] { return !working; });
  };
  auto e = std::move(*LeaderElector::create(o));
  self = e.get();
  e->run(std::stop_token());

  EXPECT_EQ(stopped_after, o.renew_deadline)
      << "a leader gives up exactly at the renew deadline, not before and not after";
  EXPECT_FALSE(fence_open_at_stop);
  EXPECT_TRUE(leading_requested_stop);
  EXPECT_FALSE(e->isLeader());
  EXPECT_FALSE(e->holdsLease());
  EXPECT_EQ(fence_wrong, 0);
  // One attempt per retry period, up to the deadline.
  ASSERT_FALSE(attempts.empty());
  EXPECT_EQ(attempts.front(), o.retry_period);
  EXPECT_LT(attempts.back(), o.renew_deadline);
  // Not lost for good on the server: nobody else took it, so release() is a
  // no-op and the lease simply runs out.
  EXPECT_TRUE(e->release().ok());
}

TEST_F(LeaderElectorTest, StartedLeadingRunsOnItsOwnThreadWhileRenewalsGoOn) {
  LeaderElectionOptions o = options("a");
  std::stop_source stop;
  int renewals = 0;
  api_.prependReactor("update", "leases", [&](testing::FakeKubeApi::Request&) {
    // Enough renewals to cover three renew deadlines, while
    // on_started_leading still blocks.
    if (++renewals == 20) stop.request_stop();
    return okStatus();
  });
  std::atomic<bool> released_by_stop = false;
  o.on_started_leading = [&](std::stop_token leading) {
    // Blocks like a wait for the informer cache that never syncs.
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait(lock, leading, [] { return false; });
    released_by_stop = leading.stop_requested();
  };
  auto e = std::move(*LeaderElector::create(o));
  e->run(stop.get_token());
  EXPECT_EQ(renewals, 20);
  EXPECT_TRUE(released_by_stop);
}

// A follower whose leader went away (and released the Lease) learns of it at
// its next poll, up to a retry period later; pollNow() reads the Lease at once
// and returns when it was read: here the follower takes the released lease
// without the clock moving.
TEST(LeaderElectorPollNow, ReadsTheLeaseAtOnceAndReturnsWhenItWasRead) {
  testing::FakeClock clock(testing::FakeClock::Sleeps::kBlock);
  testing::FakeKubeApi api(clock);
  auto options = [&](const std::string& identity) {
    LeaderElectionOptions o = electionOptions(api, clock, identity);
    o.holder_annotations["url"] = "https://" + identity;
    return o;
  };
  auto a = std::move(*LeaderElector::create(options("a")));
  ASSERT_TRUE(a->tryHold());
  std::atomic<bool> b_started = false;
  LeaderElectionOptions bo = options("b");
  bo.on_started_leading = [&](std::stop_token) { b_started = true; };
  auto b = std::move(*LeaderElector::create(bo));
  EXPECT_EQ(b->leaseAnnotation("url"), "") << "before b's first poll";
  b->pollNow(clock.now() + seconds(2));  // b is not campaigning: at once
  std::stop_source stop;
  std::thread campaign([&] { b->run(stop.get_token()); });
  // b polled once (a holds the lease) and waits for its next poll.
  ASSERT_TRUE(clock.waitForSleepers(1));
  EXPECT_EQ(b->leader(), "a");
  EXPECT_EQ(b->leaseAnnotation("url"), "https://a");

  ASSERT_TRUE(a->release().ok());
  const Clock::TimePoint before = clock.now();
  std::thread([&] { b->pollNow(clock.now() + seconds(2)); }).join();
  EXPECT_EQ(clock.now(), before) << "pollNow() waited for the clock";
  EXPECT_EQ(b->leader(), "b");
  EXPECT_EQ(b->leaseAnnotation("url"), "https://b");
  EXPECT_TRUE(b->holdsLease()) << "leading as soon as pollNow() returns";
  EXPECT_EQ(api.lease("kube-system", "resourceslice-controller")->spec.holder_identity, "b");

  // A leader's pollNow() returns at once.
  b->pollNow(clock.now() + seconds(2));
  clock.stopBlocking();
  stop.request_stop();
  campaign.join();
  EXPECT_TRUE(b_started);
}

// pollNow() gives up at its deadline when no poll answers it in time (the
// API server is slow): the clock, not the Lease read, bounds the caller.
TEST(LeaderElectorPollNow, GivesUpAtItsDeadline) {
  testing::FakeClock clock(testing::FakeClock::Sleeps::kBlock);
  testing::FakeKubeApi api(clock);
  ASSERT_TRUE((*LeaderElector::create(electionOptions(api, clock, "a")))->tryAcquireOrRenew());
  auto b = std::move(*LeaderElector::create(electionOptions(api, clock, "b")));
  // b's second read of the Lease hangs until released.
  std::atomic<int> gets = 0;
  std::mutex mu;
  std::condition_variable cv;
  bool release_get = false;
  api.prependReactor("get", "leases", [&](testing::FakeKubeApi::Request&) {
    if (++gets == 2) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return release_get; });
    }
    return okStatus();
  });
  std::stop_source stop;
  std::thread campaign([&] { b->run(stop.get_token()); });
  ASSERT_TRUE(clock.waitForSleepers(1));
  std::thread asker([&] { b->pollNow(clock.now() + seconds(2)); });
  // b's read hangs; then the asker is the one sleeper, until its deadline.
  for (int i = 0; i < 10'000 && gets < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(gets, 2);
  ASSERT_TRUE(clock.waitForSleepers(1));
  clock.advance(seconds(2));
  asker.join();
  EXPECT_EQ(gets, 2);
  {
    std::lock_guard lock(mu);
    release_get = true;
  }
  cv.notify_all();
  clock.stopBlocking();
  stop.request_stop();
  campaign.join();
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
}  // namespace rsc::controller::leader
