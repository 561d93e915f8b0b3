// The Informer over RestKubeApi against a real kube-apiserver: it sees slices
// created before it started (listed in pages) and after, edits and deletes,
// and when the server ends its watches (a short timeoutSeconds) it resumes
// from the last resourceVersion without delivering anything twice.
#include "client/informer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "client/config.h"
#include "client/http_transport.h"
#include "client/rest_kube_api.h"
#include "test/integration/cluster_env.h"

namespace rsc::client {
namespace {

using rsc::testing::ClusterEnvironment;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// Installs the cluster for this binary (the project's pattern; the name is a
// constant's, which the naming check does not expect of a non-constexpr).
// NOLINTNEXTLINE(readability-identifier-naming)
const auto* const kCluster = ClusterEnvironment::install();

constexpr std::string_view kTestLabel = "rsc-test/case";
// Waits on the informer's thread; the server answers within milliseconds, so
// this only bounds a broken test.
constexpr auto kWait = std::chrono::seconds(60);

ResourceSlice newSlice(const std::string& test_case, const std::string& pool) {
  ResourceSlice slice;
  slice.metadata.generate_name = "rsc-it-informer-" + test_case + "-";
  slice.metadata.labels[std::string(kTestLabel)] = test_case;
  slice.spec.driver = "gpu.example.com";
  slice.spec.pool = ResourcePool{pool, 1, 1};
  slice.spec.all_nodes = true;
  Device device;
  device.name = "gpu-0";
  device.attributes["model"].string_value = "A100";
  slice.spec.devices.push_back(device);
  return slice;
}

// Handler calls as lines ("add <name>", "update <name>", "delete <name>"),
// and watch restarts by reason.
class Recorder {
 public:
  InformerHandlers handlers() {
    InformerHandlers h;
    h.on_add = [this](const ResourceSlice& s) { record("add " + s.metadata.name); };
    h.on_update = [this](const ResourceSlice&, const ResourceSlice& s) {
      record("update " + s.metadata.name);
    };
    h.on_delete = [this](const ResourceSlice& s) { record("delete " + s.metadata.name); };
    return h;
  }
  void restarted(std::string_view reason) {
    std::lock_guard lock(mu_);
    ++restarts_[std::string(reason)];
    cv_.notify_all();
  }
  bool waitFor(const std::string& line) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(
        lock, kWait, [&] { return std::find(lines_.begin(), lines_.end(), line) != lines_.end(); });
  }
  bool waitForRestarts(const std::string& reason, int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return restarts_[reason] >= n; });
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  std::map<std::string, int> restarts() {
    std::lock_guard lock(mu_);
    return restarts_;
  }

 private:
  void record(std::string line) {
    std::lock_guard lock(mu_);
    lines_.push_back(std::move(line));
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  std::map<std::string, int> restarts_;
};

class InformerIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    ConfigEnvironment no_environment;  // only the explicit kubeconfig counts
    auto config = loadConfig(ClusterEnvironment::get().kubeconfig().string(), no_environment);
    ASSERT_TRUE(config.ok()) << config.status().toString();
    auto transport = CpprestTransport::create(*config, RealClock::instance());
    ASSERT_TRUE(transport.ok()) << transport.status().toString();
    transport_ = std::move(transport).value();
    auto api = RestKubeApi::create(*transport_, RealClock::instance());
    ASSERT_TRUE(api.ok()) << api.status().toString();
    api_ = std::move(api).value();
  }

  void TearDown() override {
    if (informer_) {
      informer_->stop();
    }
  }

  InformerOptions optionsFor(const std::string& test_case) {
    InformerOptions options;
    options.label_selector = std::string(kTestLabel) + "=" + test_case;
    options.index = [](const ResourceSlice& s) { return s.spec.driver + "/" + s.spec.pool.name; };
    options.on_watch_restart = [this](std::string_view reason) { recorder_.restarted(reason); };
    return options;
  }

  void start(InformerOptions options) {
    auto informer =
        Informer::create(*api_, RealClock::instance(), std::move(options), recorder_.handlers());
    ASSERT_TRUE(informer.ok()) << informer.status().toString();
    informer_ = std::move(informer).value();
    informer_->start();
  }

  ResourceSlice create(const std::string& test_case, const std::string& pool) {
    auto created = api_->createResourceSlice(newSlice(test_case, pool));
    EXPECT_TRUE(created.ok()) << created.status().toString();
    return created.ok() ? *created : ResourceSlice{};
  }

  std::unique_ptr<CpprestTransport> transport_;
  std::unique_ptr<RestKubeApi> api_;
  Recorder recorder_;
  std::unique_ptr<Informer> informer_;
};

TEST_F(InformerIntegration, SeesSlicesBeforeAndAfterStartEditsAndDeletes) {
  const std::string test_case = "basic";
  // Three slices before the start, listed in pages of two.
  std::vector<ResourceSlice> before;
  before.reserve(3);
  for (int i = 0; i < 3; ++i) {
    before.push_back(create(test_case, "pool-" + std::to_string(i)));
  }
  InformerOptions options = optionsFor(test_case);
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
  edited.spec.devices[0].attributes["model"].string_value = "H100";
  auto updated = api_->updateResourceSlice(edited);
  ASSERT_TRUE(updated.ok()) << updated.status().toString();
  ASSERT_TRUE(recorder_.waitFor("update " + edited.metadata.name));
  const SlicePtr cached = informer_->store().get(edited.metadata.name);
  ASSERT_NE(cached, nullptr);
  EXPECT_EQ(cached->metadata.resource_version, updated->metadata.resource_version);
  EXPECT_EQ(cached->spec.devices.at(0).attributes.at("model").string_value, "H100");

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
  InformerOptions options = optionsFor(test_case);
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
