#include "controller/cleanup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "controller/leader/leader_elector.h"
#include "controller/reconcile/reconciler.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller {
namespace {

using std::chrono::seconds;
using ::testing::ElementsAre;
using testing::FakeKubeApi;
using ::testing::HasSubstr;

class CleanupTest : public ::testing::Test {
 protected:
  void add(const std::string& name, bool managed) {
    client::ResourceSlice slice;
    slice.metadata.name = name;
    if (managed) slice.metadata.labels[reconcile::kManagedByLabel] = reconcile::kManagedByValue;
    slice.spec.driver = "gpu.example.com";
    slice.spec.pool.name = name;
    slice.spec.pool.generation = 1;
    slice.spec.pool.resource_slice_count = 1;
    slice.spec.all_nodes = true;
    ASSERT_TRUE(api_.addResourceSlice(slice).ok());
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const client::ResourceSlice& slice : api_.resourceSlices()) {
      out.push_back(slice.metadata.name);
    }
    return out;
  }

  testing::FakeClock clock_;
  FakeKubeApi api_{clock_};
};

TEST_F(CleanupTest, DeletesManagedSlicesOnly) {
  add("managed-a", true);
  add("managed-b", true);
  add("foreign", false);

  ASSERT_TRUE(deleteManagedSlices(api_).ok());

  EXPECT_THAT(names(), ElementsAre("foreign"));
  EXPECT_EQ(api_.countActions("deletecollection", "resourceslices"), 1U);
  EXPECT_EQ(api_.countActions("delete", "resourceslices"), 0U);
}

TEST_F(CleanupTest, DeletesOneByOneWhatTheCollectionDeleteLeft) {
  add("managed-a", true);
  add("managed-b", true);
  // The collection delete misses every slice (as a server would that created
  // them meanwhile); an already deleted one is no error.
  api_.prependReactor("deletecollection", "resourceslices", [](FakeKubeApi::Request& request) {
    request.options.label_selector = "nothing=matches";
    return okStatus();
  });
  api_.prependReactor("delete", "resourceslices", [this](FakeKubeApi::Request& request) {
    if (request.name != "managed-a") return okStatus();
    EXPECT_TRUE(api_.removeResourceSlice("managed-a").ok());
    return Status(StatusCode::kNotFound, "resourceslices \"managed-a\" not found");
  });

  ASSERT_TRUE(deleteManagedSlices(api_).ok());

  EXPECT_THAT(names(), ElementsAre());
  EXPECT_EQ(api_.countActions("delete", "resourceslices"), 2U);
}

TEST_F(CleanupTest, FailsWithTheFirstErrorAndItsContext) {
  add("managed-a", true);
  api_.prependReactor("deletecollection", "resourceslices", [](FakeKubeApi::Request&) {
    return Status(StatusCode::kPermissionDenied, "forbidden");
  });
  Status collection = deleteManagedSlices(api_);
  EXPECT_EQ(collection.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(collection.message(), HasSubstr("deleting the managed ResourceSlices"));

  api_.clearReactors();
  api_.prependReactor("deletecollection", "resourceslices", [](FakeKubeApi::Request& request) {
    request.options.label_selector = "nothing=matches";
    return okStatus();
  });
  api_.prependReactor("delete", "resourceslices", [](FakeKubeApi::Request&) {
    return Status(StatusCode::kUnavailable, "etcd is down");
  });
  Status one = deleteManagedSlices(api_);
  EXPECT_EQ(one.code(), StatusCode::kUnavailable);
  EXPECT_THAT(one.message(), HasSubstr("deleting ResourceSlice managed-a"));
  EXPECT_THAT(names(), ElementsAre("managed-a"));
}

// --cleanup --leader-elect: the slices are deleted under the controllers'
// Lease. "old" is a replica of the controller that is stopping.
class FencedCleanupTest : public CleanupTest {
 protected:
  FencedCleanupOptions options() {
    FencedCleanupOptions o;
    o.election.api = &api_;
    o.election.clock = &clock_;
    o.election.lease_namespace = "kube-system";
    o.election.lease_name = "resourceslice-controller";
    o.election.identity = "cleanup";
    return o;
  }
  void SetUp() override {
    leader::LeaderElectionOptions old = options().election;
    old.identity = "old";
    old_ = std::move(*leader::LeaderElector::create(old));
    ASSERT_TRUE(old_->tryHold());
    add("managed-a", true);
    add("managed-b", true);
    add("foreign", false);
  }
  client::Lease lease() { return *api_.lease("kube-system", "resourceslice-controller"); }
  // Every time the cleanup reads the Lease, the old replica has renewed it
  // just before, until its `renewals` are spent; then `last` happens to it.
  void oldRenews(int renewals, std::function<void()> last = nullptr) {
    api_.prependReactor("get", "leases", [this, renewals, last](FakeKubeApi::Request&) {
      if (reads_++ < renewals) {
        EXPECT_TRUE(old_->tryHold());
      } else if (reads_ == renewals + 1 && last) {
        last();
      }
      return okStatus();
    });
  }

  std::unique_ptr<leader::LeaderElector> old_;
  int reads_ = 0;
};

TEST_F(FencedCleanupTest, WaitsWhileTheLeaseIsHeldAndDeletesOnceItIsReleased) {
  bool released = false;
  oldRenews(5, [&] {
    ASSERT_TRUE(old_->release().ok());
    released = true;
  });
  api_.prependReactor("deletecollection", "resourceslices", [&](FakeKubeApi::Request&) {
    EXPECT_TRUE(released) << "deleted while the old replica held the Lease";
    return okStatus();
  });
  const Clock::TimePoint start = clock_.now();

  ASSERT_TRUE(deleteManagedSlicesFenced(api_, options()).ok());

  EXPECT_TRUE(released);
  EXPECT_THAT(names(), ElementsAre("foreign"));
  // One attempt per retry period (2 s): five while "old" renewed, then it
  // released, and the next attempt took the Lease.
  EXPECT_EQ(clock_.now() - start, seconds(10));
  for (Clock::Duration d : clock_.sleeps()) EXPECT_EQ(d, seconds(2));
  // Released again: a new controller takes over at once.
  EXPECT_EQ(lease().spec.holder_identity, "");
  EXPECT_EQ(lease().spec.lease_duration_seconds, 1);
  EXPECT_EQ(lease().spec.lease_transitions, 1);
}

TEST_F(FencedCleanupTest, ProceedsOnceAKilledLeadersLeaseHasExpired) {
  // "old" was killed: it neither renews nor releases.
  const Clock::TimePoint start = clock_.now();

  ASSERT_TRUE(deleteManagedSlicesFenced(api_, options()).ok());

  EXPECT_THAT(names(), ElementsAre("foreign"));
  // The lease duration (15 s) from when the cleanup first saw the record,
  // rounded up to the next attempt.
  EXPECT_EQ(clock_.now() - start, seconds(16));
  EXPECT_EQ(lease().spec.holder_identity, "");
}

TEST_F(FencedCleanupTest, TimesOutNamingTheLeaseAndItsHolder) {
  oldRenews(1000);
  FencedCleanupOptions o = options();
  o.lease_timeout = seconds(9);
  const Clock::TimePoint start = clock_.now();

  Status s = deleteManagedSlicesFenced(api_, o);

  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("kube-system/resourceslice-controller"));
  EXPECT_THAT(s.message(), HasSubstr("held by \"old\""));
  EXPECT_THAT(s.message(), HasSubstr("after 9s (--cleanup-lease-timeout)"));
  // The last wait is cut to the timeout, and nothing was deleted.
  EXPECT_EQ(clock_.now() - start, seconds(9));
  EXPECT_THAT(names(), ElementsAre("foreign", "managed-a", "managed-b"));
  EXPECT_EQ(api_.countActions("deletecollection", "resourceslices"), 0U);
  EXPECT_EQ(lease().spec.holder_identity, "old");
}

TEST_F(FencedCleanupTest, ASignalEndsTheWaitAndNothingIsDeleted) {
  std::stop_source stop;
  oldRenews(2, [&] { stop.request_stop(); });
  FencedCleanupOptions o = options();
  o.stop = stop.get_token();

  Status s = deleteManagedSlicesFenced(api_, o);

  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_THAT(s.message(), HasSubstr("stopped while waiting for the leader Lease"));
  EXPECT_EQ(api_.countActions("deletecollection", "resourceslices"), 0U);
  EXPECT_EQ(lease().spec.holder_identity, "old");
}

TEST_F(FencedCleanupTest, StopsDeletingWhenTheLeaseIsLost) {
  ASSERT_TRUE(old_->release().ok());
  // The collection delete misses the slices and takes past the renew
  // deadline; the renewal before the next delete fails.
  api_.prependReactor("deletecollection", "resourceslices", [this](FakeKubeApi::Request& request) {
    request.options.label_selector = "nothing=matches";
    clock_.advance(seconds(11));
    api_.prependReactor("update", "leases", [](FakeKubeApi::Request&) {
      return conflict("the object has been modified");
    });
    return okStatus();
  });

  Status s = deleteManagedSlicesFenced(api_, options());

  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("leader Lease kube-system/resourceslice-controller was not renewed"));
  EXPECT_EQ(api_.countActions("delete", "resourceslices"), 0U);
  EXPECT_THAT(names(), ElementsAre("foreign", "managed-a", "managed-b"));
}

TEST_F(FencedCleanupTest, RenewsTheLeaseWhileDeletingForLong) {
  ASSERT_TRUE(old_->release().ok());
  // Each delete takes 3 s: the Lease is renewed before every next one.
  api_.prependReactor("deletecollection", "resourceslices", [this](FakeKubeApi::Request& request) {
    request.options.label_selector = "nothing=matches";
    clock_.advance(seconds(3));
    return okStatus();
  });
  api_.prependReactor("delete", "resourceslices", [this](FakeKubeApi::Request&) {
    clock_.advance(seconds(3));
    return okStatus();
  });
  const size_t updates_before = api_.countActions("update", "leases");

  ASSERT_TRUE(deleteManagedSlicesFenced(api_, options()).ok());

  EXPECT_THAT(names(), ElementsAre("foreign"));
  // Acquired, renewed before each of the two single deletes, released.
  EXPECT_EQ(api_.countActions("update", "leases") - updates_before, 4U);
}

}  // namespace
}  // namespace rsc::controller
