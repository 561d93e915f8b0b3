#include "controller/cleanup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controller/reconcile/reconciler.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller {
namespace {

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

}  // namespace
}  // namespace rsc::controller
