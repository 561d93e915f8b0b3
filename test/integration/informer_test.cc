// The Informer over RestKubeApi against a real kube-apiserver: it sees slices
// created before it started (listed in pages) and after, edits and deletes,
// and when the server ends its watches (a short timeoutSeconds) it resumes
// from the last resourceVersion without delivering anything twice.
#include "client/informer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "test/integration/cluster_env.h"
#include "test/integration/informer_fixture.h"

namespace rsc::client {
namespace {

using rsc::testing::ClusterEnvironment;
using rsc::testing::InformerIntegration;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// Installs the cluster for this binary (the project's pattern; the name is a
// constant's, which the naming check does not expect of a non-constexpr).
// NOLINTNEXTLINE(readability-identifier-naming)
const auto* const kCluster = ClusterEnvironment::install();

TEST_F(InformerIntegration, SeesSlicesBeforeAndAfterStartEditsAndDeletes) {
  const std::string test_case = "basic";
  // Three slices before the start, listed in pages of two.
  std::vector<ResourceSlice> before;
  before.reserve(3);
  for (int i = 0; i < 3; ++i) {
    before.push_back(create(test_case, "pool-" + std::to_string(i)));
  }
  InformerOptions<ResourceSlices> options = optionsFor(test_case);
  options.page_size = 2;
  start(std::move(options));
  for (const auto& slice : before) {
    ASSERT_TRUE(recorder_.waitFor("add " + slice.metadata.name));
  }
  // Handlers of the first list run before hasSynced() turns true.
  EXPECT_TRUE(informer_->waitForSync(std::stop_token()));
  EXPECT_EQ(informer_->store().size(), 3u);

  // Created after the start: comes through the watch.
  const ResourceSlice after = create(test_case, "pool-1");
  ASSERT_TRUE(recorder_.waitFor("add " + after.metadata.name));
  EXPECT_EQ(informer_->store().byIndex("gpu.example.com/pool-1").size(), 2u);

  // An edit.
  ResourceSlice edited = before[0];
  edited.spec.pool.generation = 2;
  edited.spec.devices[0].edit(
      [&](client::Device& d_) { d_.attributes["model"].string_value = "H100"; });
  auto updated = api_->updateResourceSlice(edited);
  ASSERT_TRUE(updated.ok()) << updated.status().toString();
  ASSERT_TRUE(recorder_.waitFor("update " + edited.metadata.name));
  const SlicePtr cached = informer_->store().get(edited.metadata.name);
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cached->metadata.resource_version, updated->metadata.resource_version);
  EXPECT_EQ(cached->spec.devices.at(0).device().attributes.at("model").string_value, "H100");

  // A delete.
  ASSERT_TRUE(api_->deleteResourceSlice(after.metadata.name,
                                        Preconditions{after.metadata.uid, std::nullopt})
                  .ok());
  ASSERT_TRUE(recorder_.waitFor("delete " + after.metadata.name));
  EXPECT_EQ(informer_->store().get(after.metadata.name), nullptr);
  EXPECT_EQ(informer_->store().size(), 3u);

  // The listed slices come in name order, then the watched changes in order.
  const auto lines = recorder_.lines();
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_THAT(
      std::vector<std::string>(lines.begin(), lines.begin() + 3),
      UnorderedElementsAre("add " + before[0].metadata.name, "add " + before[1].metadata.name,
                           "add " + before[2].metadata.name));
  EXPECT_THAT(std::vector<std::string>(lines.begin() + 3, lines.end()),
              ElementsAre("add " + after.metadata.name, "update " + edited.metadata.name,
                          "delete " + after.metadata.name));
  for (const auto& slice : before) {
    EXPECT_TRUE(api_->deleteResourceSlice(slice.metadata.name, {}).ok());
  }
}

TEST_F(InformerIntegration, WatchEndedByTheServerResumesWithoutDuplicates) {
  const std::string test_case = "resume";
  InformerOptions<ResourceSlices> options = optionsFor(test_case);
  // The server ends every watch after two seconds.
  options.min_watch_timeout = std::chrono::seconds(2);
  options.max_watch_timeout = std::chrono::seconds(2);
  start(std::move(options));

  const ResourceSlice first = create(test_case, "pool-a");
  ASSERT_TRUE(recorder_.waitFor("add " + first.metadata.name));
  ASSERT_TRUE(recorder_.waitForRestarts("closed", 1));

  const ResourceSlice second = create(test_case, "pool-a");
  ASSERT_TRUE(recorder_.waitFor("add " + second.metadata.name));
  const int closed_before = recorder_.restarts()["closed"];
  ASSERT_TRUE(recorder_.waitForRestarts("closed", closed_before + 1));

  ResourceSlice edited = second;
  edited.spec.pool.generation = 2;
  ASSERT_TRUE(api_->updateResourceSlice(edited).ok());
  ASSERT_TRUE(recorder_.waitFor("update " + second.metadata.name));

  EXPECT_THAT(recorder_.lines(),
              ElementsAre("add " + first.metadata.name, "add " + second.metadata.name,
                          "update " + second.metadata.name));
  const auto restarts = recorder_.restarts();
  EXPECT_EQ(restarts.count("gone"), 0u) << "resumed, never relisted";
  EXPECT_EQ(restarts.count("error"), 0u);
  EXPECT_EQ(informer_->store().size(), 2u);
  EXPECT_EQ(informer_->lastResourceVersion().empty(), false);

  informer_->stop();
  for (const auto& slice : {first, second}) {
    EXPECT_TRUE(api_->deleteResourceSlice(slice.metadata.name, {}).ok());
  }
}

}  // namespace
}  // namespace rsc::client
