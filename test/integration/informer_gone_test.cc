// The Informer against a real kube-apiserver that answers 410 Gone. This
// binary's cluster keeps no watch cache for ResourceSlices, so watches are
// served from etcd, and a resourceVersion older than etcd's compaction is
// refused as the API server does it in production (where its own compaction
// runs every five minutes). The informer's next watch is held back while
// slices change and etcd is compacted; when it resumes from its old
// resourceVersion, the server must answer 410, the informer must relist,
// deliver exactly the differences (deletes included) and watch again.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/informer.h"
#include "test/fakes/gate.h"
#include "test/integration/cluster_env.h"
#include "test/integration/informer_fixture.h"
#include "test/integration/service_env.h"

namespace rsc::client {
namespace {

using rsc::testing::ClusterEnvironment;
using rsc::testing::InformerIntegration;
using rsc::testing::Json;
using rsc::testing::kWait;
using rsc::testing::ServiceEnv;
using ::testing::Contains;
using ::testing::Pair;
using ::testing::UnorderedElementsAreArray;

// Installs the cluster for this binary with the ResourceSlice watch cache off:
// the cache would serve an old resourceVersion from its own history, however
// etcd was compacted. (The name is a constant's, which the naming check does
// not expect of a non-constexpr.)
// NOLINTNEXTLINE(readability-identifier-naming)
const auto* const kCluster =
    ClusterEnvironment::install({"--watch-cache-sizes=resourceslices.resource.k8s.io#0"});

// The real API with a gate in front of watches: while the gate is closed a
// watch waits (until opened or stopped), so the test decides when the
// informer's next watch starts. Records how each watch that reached the
// server ended. Thread-safe.
class WatchGate final : public KubeApi {
 public:
  explicit WatchGate(KubeApi& server) : server_(server) {}

  void close() { gate_.close(); }
  void open() { gate_.open(); }
  // Waits until a watch waits at the closed gate; returns the resourceVersion
  // it will resume from, or nullopt after kWait.
  std::optional<std::string> waitForHeldWatch() {
    if (!gate_.waitHeld(kWait)) {
      return std::nullopt;
    }
    std::lock_guard lock(mu_);
    return last_from_;
  }
  // (resourceVersion the watch started from, how it ended), in order.
  std::vector<std::pair<std::string, StatusCode>> endedWatches() {
    std::lock_guard lock(mu_);
    return ended_;
  }

  Status watchResourceSlices(const ListOptions& options, const WatchHandler<ResourceSlice>& handler,
                             std::stop_token stop) override {
    const std::string from = options.resource_version.value_or("");
    {
      std::lock_guard lock(mu_);
      last_from_ = from;
    }
    gate_.pass(stop);
    if (stop.stop_requested()) {
      return cancelled("watch ResourceSlices: stopped at the gate");
    }
    Status status = server_.watchResourceSlices(options, handler, stop);
    std::lock_guard lock(mu_);
    ended_.emplace_back(from, status.code());
    return status;
  }

  // The rest goes straight to the server.
  StatusOr<ResourceSlice> getResourceSlice(const std::string& name) override {
    return server_.getResourceSlice(name);
  }
  StatusOr<ResourceSliceList> listResourceSlices(const ListOptions& options) override {
    return server_.listResourceSlices(options);
  }
  StatusOr<ResourceSlice> createResourceSlice(const ResourceSlice& slice) override {
    return server_.createResourceSlice(slice);
  }
  StatusOr<ResourceSlice> dryRunCreateResourceSlice(const ResourceSlice& slice) override {
    return server_.dryRunCreateResourceSlice(slice);
  }
  StatusOr<ResourceSlice> updateResourceSlice(const ResourceSlice& slice) override {
    return server_.updateResourceSlice(slice);
  }
  Status deleteResourceSlice(const std::string& name, const Preconditions& preconditions) override {
    return server_.deleteResourceSlice(name, preconditions);
  }
  Status deleteResourceSlices(const ListOptions& options) override {
    return server_.deleteResourceSlices(options);
  }
  StatusOr<Lease> getLease(const std::string& namespace_, const std::string& name) override {
    return server_.getLease(namespace_, name);
  }
  StatusOr<Lease> createLease(const Lease& lease) override { return server_.createLease(lease); }
  StatusOr<Lease> updateLease(const Lease& lease) override { return server_.updateLease(lease); }
  StatusOr<Secret> getSecret(const std::string& namespace_, const std::string& name) override {
    return server_.getSecret(namespace_, name);
  }
  StatusOr<Secret> createSecret(const Secret& secret) override {
    return server_.createSecret(secret);
  }
  StatusOr<Secret> updateSecret(const Secret& secret) override {
    return server_.updateSecret(secret);
  }
  StatusOr<ConfigMap> getConfigMap(const std::string& namespace_,
                                   const std::string& name) override {
    return server_.getConfigMap(namespace_, name);
  }
  StatusOr<ConfigMap> createConfigMap(const ConfigMap& config_map) override {
    return server_.createConfigMap(config_map);
  }
  StatusOr<ConfigMap> updateConfigMap(const ConfigMap& config_map) override {
    return server_.updateConfigMap(config_map);
  }
  StatusOr<ServerVersion> getServerVersion() override { return server_.getServerVersion(); }
  StatusOr<Node> getNode(const std::string& name) override { return server_.getNode(name); }
  StatusOr<PartialObjectMetadataList> listNodeMetadata(const ListOptions& options) override {
    return server_.listNodeMetadata(options);
  }
  Status watchNodeMetadata(const ListOptions& options,
                           const WatchHandler<PartialObjectMetadata>& handler,
                           std::stop_token stop) override {
    return server_.watchNodeMetadata(options, handler, std::move(stop));
  }
  StatusOr<ServiceList> listServices(const ListOptions& options) override {
    return server_.listServices(options);
  }
  Status watchServices(const ListOptions& options, const WatchHandler<Service>& handler,
                       std::stop_token stop) override {
    return server_.watchServices(options, handler, std::move(stop));
  }
  StatusOr<EndpointSliceList> listEndpointSlices(const ListOptions& options) override {
    return server_.listEndpointSlices(options);
  }
  Status watchEndpointSlices(const ListOptions& options, const WatchHandler<EndpointSlice>& handler,
                             std::stop_token stop) override {
    return server_.watchEndpointSlices(options, handler, std::move(stop));
  }
  StatusOr<PodList> listPods(const ListOptions& options) override {
    return server_.listPods(options);
  }
  Status watchPods(const ListOptions& options, const WatchHandler<Pod>& handler,
                   std::stop_token stop) override {
    return server_.watchPods(options, handler, std::move(stop));
  }
  StatusOr<TokenReview> createTokenReview(const TokenReview& review) override {
    return server_.createTokenReview(review);
  }
  StatusOr<SubjectAccessReview> createSubjectAccessReview(
      const SubjectAccessReview& review) override {
    return server_.createSubjectAccessReview(review);
  }
  StatusOr<Event> createEvent(const Event& event) override { return server_.createEvent(event); }
  StatusOr<Event> patchEventSeries(const std::string& ns, const std::string& name,
                                   const EventSeries& series) override {
    return server_.patchEventSeries(ns, name, series);
  }

 private:
  KubeApi& server_;
  rsc::testing::Gate gate_;
  std::mutex mu_;
  // Where the last watch to reach the gate starts from (the informer watches
  // one at a time).
  std::string last_from_;
  std::vector<std::pair<std::string, StatusCode>> ended_;
};

// Compacts etcd's history up to its current revision, as the API server
// does periodically, and returns that revision (0 after a failure, which the
// test has reported). Physical: it returns once the old revisions are gone.
int64_t compactEtcd() {
  const std::string etcd = ClusterEnvironment::get().etcdServer();
  // Any read answers with the current revision; etcd's JSON gateway writes
  // 64-bit numbers as strings and keys in base64 ("AA==": a NUL byte).
  const auto range = ServiceEnv::http("POST", etcd + "/v3/kv/range", R"({"key":"AA=="})");
  EXPECT_EQ(range.code, 200) << range.body;
  const Json revision = range.json()["header"]["revision"];
  EXPECT_TRUE(revision.is_string()) << range.body;
  if (range.code != 200 || !revision.is_string()) {
    return 0;
  }
  const Json request = {{"revision", revision}, {"physical", true}};
  const auto compacted = ServiceEnv::http("POST", etcd + "/v3/kv/compaction", request.dump());
  EXPECT_EQ(compacted.code, 200) << compacted.body;
  return compacted.code == 200 ? std::stoll(revision.get<std::string>()) : 0;
}

// Name -> resourceVersion of the slices of `test_case`, as the server lists
// them now.
std::map<std::string, std::string> freshList(KubeApi& api, const std::string& test_case) {
  ListOptions options;
  options.label_selector = std::string(rsc::testing::kTestLabel) + "=" + test_case;
  const StatusOr<ResourceSliceList> list = api.listResourceSlices(options);
  EXPECT_TRUE(list.ok()) << list.status().toString();
  std::map<std::string, std::string> versions;
  for (const ResourceSlice& slice : list.ok() ? list->items : std::vector<ResourceSlice>{}) {
    versions[slice.metadata.name] = slice.metadata.resource_version;
  }
  return versions;
}

std::map<std::string, std::string> storeContent(const Informer<ResourceSlices>& informer) {
  std::map<std::string, std::string> versions;
  for (const SlicePtr& slice : informer.store().list()) {
    versions[slice->metadata.name] = slice->metadata.resource_version;
  }
  return versions;
}

class InformerGoneIntegration : public InformerIntegration {
 protected:
  // Made by the test; destroyed with the fixture, after TearDown has stopped
  // the informer that calls it.
  std::unique_ptr<WatchGate> gate_;
};

TEST_F(InformerGoneIntegration, WatchFromBeforeACompactionIsGoneAndARelistCatchesUp) {
  const std::string test_case = "gone";
  std::vector<ResourceSlice> slices;
  for (int i = 0; i < 4; ++i) {
    slices.push_back(create(test_case, "pool-" + std::to_string(i)));
  }
  gate_ = std::make_unique<WatchGate>(*api_);
  InformerOptions<ResourceSlices> options = optionsFor(test_case);
  // The server ends each watch after two seconds, so a closed gate soon
  // catches the next one.
  options.min_watch_timeout = std::chrono::seconds(2);
  options.max_watch_timeout = std::chrono::seconds(2);
  start(std::move(options), *gate_);
  ASSERT_TRUE(informer_->waitForSync(std::stop_token()));
  ASSERT_EQ(storeContent(*informer_), freshList(*api_, test_case));

  // Hold back the next watch; it will resume from what the informer saw last.
  gate_->close();
  const std::optional<std::string> resume_from = gate_->waitForHeldWatch();
  ASSERT_TRUE(resume_from.has_value()) << "no watch came to the gate";
  ASSERT_EQ(*resume_from, informer_->lastResourceVersion());
  const std::ptrdiff_t lines_before = std::ssize(recorder_.lines());

  // Changes the informer can only learn from a relist: two deletes, an edit,
  // two creates.
  std::vector<std::string> expected;
  for (const ResourceSlice& gone : {slices[0], slices[1]}) {
    ASSERT_TRUE(api_->deleteResourceSlice(gone.metadata.name, {}).ok());
    expected.push_back("delete " + gone.metadata.name);
  }
  ResourceSlice edited = slices[2];
  edited.spec.pool.generation = 2;
  ASSERT_TRUE(api_->updateResourceSlice(edited).ok());
  expected.push_back("update " + edited.metadata.name);
  for (int i = 0; i < 2; ++i) {
    expected.push_back("add " + create(test_case, "pool-new").metadata.name);
  }

  // Compact etcd past the held watch's resourceVersion, then let it go.
  const int64_t compacted = compactEtcd();
  ASSERT_GT(compacted, std::stoll(*resume_from));
  gate_->open();

  // The server answers 410 to that watch, and the informer relists.
  ASSERT_TRUE(recorder_.waitForRestarts("gone", 1));
  EXPECT_THAT(gate_->endedWatches(), Contains(Pair(*resume_from, StatusCode::kGone)));
  for (const std::string& line : expected) {
    ASSERT_TRUE(recorder_.waitFor(line)) << line;
  }
  // Exactly the differences, each once; slices[3], unchanged, not at all.
  const std::vector<std::string> lines = recorder_.lines();
  EXPECT_THAT(std::vector<std::string>(lines.begin() + lines_before, lines.end()),
              UnorderedElementsAreArray(expected));
  EXPECT_EQ(storeContent(*informer_), freshList(*api_, test_case));

  // And it watches again, from after the compaction.
  const ResourceSlice after = create(test_case, "pool-after");
  ASSERT_TRUE(recorder_.waitFor("add " + after.metadata.name));
  EXPECT_EQ(storeContent(*informer_), freshList(*api_, test_case));
  EXPECT_GE(std::stoll(informer_->lastResourceVersion()), compacted);
  const auto restarts = recorder_.restarts();
  EXPECT_EQ(restarts.at("gone"), 1);
  EXPECT_EQ(restarts.count("error"), 0u);

  informer_->stop();
  for (const auto& [name, version] : freshList(*api_, test_case)) {
    EXPECT_TRUE(api_->deleteResourceSlice(name, {}).ok());
  }
}

}  // namespace
}  // namespace rsc::client
