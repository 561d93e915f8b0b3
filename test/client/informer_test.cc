#include "client/informer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "client/store.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"
#include "test/fakes/gate.h"

namespace rsc::client {
namespace {

using rsc::testing::FakeClock;
using rsc::testing::FakeKubeApi;
using rsc::testing::Gate;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using namespace std::chrono_literals;

// A safety net for waits on other threads, never the synchronisation itself.
constexpr auto kSafetyTimeout = std::chrono::seconds(10);

ResourceSlice makeSlice(const std::string& name, const std::string& pool = "pool-a",
                        const std::string& rv = "") {
  ResourceSlice slice;
  slice.metadata.name = name;
  slice.metadata.resource_version = rv;
  slice.metadata.labels["app.kubernetes.io/managed-by"] = "resourceslice-controller";
  slice.spec.driver = "gpu.example.com";
  slice.spec.pool = ResourcePool{pool, 1, 1};
  slice.spec.all_nodes = true;
  return slice;
}

std::string poolKey(const ResourceSlice& slice) {
  return slice.spec.driver + "/" + slice.spec.pool.name;
}

std::vector<std::string> namesOf(const std::vector<SlicePtr>& slices) {
  std::vector<std::string> names;
  names.reserve(slices.size());
  for (const auto& slice : slices) {
    names.push_back(slice->metadata.name);
  }
  return names;
}

// ---- ResourceSliceStore -----------------------------------------------------

TEST(ResourceSliceStore, IndexFollowsTheVisibleState) {
  ResourceSliceStore store(poolKey);
  store.applyUpsert(makeSlice("a", "p1", "10"));
  store.applyUpsert(makeSlice("b", "p1", "11"));
  store.applyUpsert(makeSlice("c", "p2", "12"));
  EXPECT_THAT(namesOf(store.byIndex("gpu.example.com/p1")), ElementsAre("a", "b"));
  EXPECT_THAT(namesOf(store.byIndex("gpu.example.com/p2")), ElementsAre("c"));

  store.applyUpsert(makeSlice("b", "p2", "13"));  // moves to another pool
  EXPECT_THAT(namesOf(store.byIndex("gpu.example.com/p1")), ElementsAre("a"));
  EXPECT_THAT(namesOf(store.byIndex("gpu.example.com/p2")), ElementsAre("b", "c"));

  store.applyDelete(makeSlice("a", "p1", "14"));
  EXPECT_THAT(store.byIndex("gpu.example.com/p1"), IsEmpty());
  EXPECT_EQ(store.size(), 2u);
  EXPECT_THAT(namesOf(store.list()), ElementsAre("b", "c"));
}

TEST(ResourceSliceStore, WithoutAnIndexByIndexIsEmpty) {
  ResourceSliceStore store;
  store.applyUpsert(makeSlice("a", "p1", "10"));
  EXPECT_THAT(store.byIndex(""), IsEmpty());
  EXPECT_EQ(store.get("a")->metadata.resource_version, "10");
}

TEST(ResourceSliceStore, AssumedWriteIsVisibleUntilTheWatchCatchesUp) {
  ResourceSliceStore store(poolKey);
  store.applyUpsert(makeSlice("a", "p1", "10"));
  store.assumeWritten(makeSlice("a", "p2", "12"));
  EXPECT_EQ(store.get("a")->metadata.resource_version, "12");
  EXPECT_THAT(namesOf(store.byIndex("gpu.example.com/p2")), ElementsAre("a"));
  EXPECT_THAT(store.byIndex("gpu.example.com/p1"), IsEmpty());

  store.applyUpsert(makeSlice("a", "p1", "11"));  // an older event: ours is newer
  EXPECT_EQ(store.get("a")->metadata.resource_version, "12");
  EXPECT_EQ(store.pendingAssumptions(), 1u);

  store.applyUpsert(makeSlice("a", "p2", "12"));  // the watch delivers our write
  EXPECT_EQ(store.pendingAssumptions(), 0u);
  EXPECT_EQ(store.get("a")->metadata.resource_version, "12");
}

TEST(ResourceSliceStore, NewerWatchedVersionSupersedesAnAssumedWrite) {
  ResourceSliceStore store;
  store.assumeWritten(makeSlice("a", "p1", "12"));
  EXPECT_EQ(store.size(), 1u);
  store.applyUpsert(makeSlice("a", "p9", "15"));
  EXPECT_EQ(store.get("a")->spec.pool.name, "p9");
  EXPECT_EQ(store.pendingAssumptions(), 0u);
}

TEST(ResourceSliceStore, AssumingAnOlderWriteThanTheWatchIsIgnored) {
  ResourceSliceStore store;
  store.applyUpsert(makeSlice("a", "p1", "20"));
  store.assumeWritten(makeSlice("a", "old", "15"));
  EXPECT_EQ(store.get("a")->spec.pool.name, "p1");
  EXPECT_EQ(store.pendingAssumptions(), 0u);
  // Writes that return out of order keep the newest.
  store.assumeWritten(makeSlice("a", "newest", "30"));
  store.assumeWritten(makeSlice("a", "newer", "25"));
  EXPECT_EQ(store.get("a")->spec.pool.name, "newest");
}

TEST(ResourceSliceStore, DeletionAfterOurWriteWins) {
  ResourceSliceStore store;
  // Our create (version 12), and someone else deletes it right after.
  store.assumeWritten(makeSlice("x", "p1", "12"));
  store.applyUpsert(makeSlice("x", "p1", "12"));
  store.applyDelete(makeSlice("x", "p1", "13"));
  EXPECT_EQ(store.get("x"), nullptr);
  EXPECT_EQ(store.pendingAssumptions(), 0u);

  // Same when the watch is slow: the DELETED arrives with no ADDED before it.
  store.applyUpsert(makeSlice("y", "p1", "20"));
  store.assumeWritten(makeSlice("y", "p2", "21"));
  store.applyDelete(makeSlice("y", "p2", "22"));
  EXPECT_EQ(store.get("y"), nullptr);

  // A DELETED event whose last state equals our write's version also wins.
  store.assumeWritten(makeSlice("z", "p1", "30"));
  store.applyDelete(makeSlice("z", "p1", "30"));
  EXPECT_EQ(store.get("z"), nullptr);
  EXPECT_EQ(store.size(), 0u);
}

TEST(ResourceSliceStore, WriteNewerThanADeletionStays) {
  ResourceSliceStore store;
  store.applyUpsert(makeSlice("a", "p1", "10"));
  store.assumeWritten(makeSlice("a", "p2", "15"));  // recreated after the deletion
  store.applyDelete(makeSlice("a", "p1", "11"));
  EXPECT_EQ(store.get("a")->spec.pool.name, "p2");
}

TEST(ResourceSliceStore, AssumedDeletionHidesUntilConfirmed) {
  ResourceSliceStore store(poolKey);
  store.applyUpsert(makeSlice("a", "p1", "10"));
  store.assumeDeleted("a");
  EXPECT_EQ(store.get("a"), nullptr);
  EXPECT_THAT(store.byIndex("gpu.example.com/p1"), IsEmpty());
  store.applyUpsert(makeSlice("a", "p1", "10"));  // a replay of the deleted state
  EXPECT_EQ(store.get("a"), nullptr);
  store.applyDelete(makeSlice("a", "p1", "11"));
  EXPECT_EQ(store.pendingAssumptions(), 0u);
  EXPECT_EQ(store.get("a"), nullptr);
  // A new object of the same name shows again.
  store.applyUpsert(makeSlice("a", "p3", "40"));
  EXPECT_EQ(store.get("a")->spec.pool.name, "p3");
}

TEST(ResourceSliceStore, AssumedDeletionOfOurOwnUnseenCreate) {
  ResourceSliceStore store;
  store.assumeWritten(makeSlice("a", "p1", "10"));
  store.assumeDeleted("a");
  EXPECT_EQ(store.get("a"), nullptr);
  store.applyUpsert(makeSlice("a", "p1", "10"));  // the create arrives late
  EXPECT_EQ(store.get("a"), nullptr);
  store.applyDelete(makeSlice("a", "p1", "11"));
  EXPECT_EQ(store.pendingAssumptions(), 0u);
}

TEST(ResourceSliceStore, AssumedDeletionOfAnUnknownNameDoesNothing) {
  ResourceSliceStore store;
  store.assumeDeleted("ghost");
  EXPECT_EQ(store.pendingAssumptions(), 0u);
  EXPECT_EQ(store.size(), 0u);
}

TEST(ResourceSliceStore, UncomparableVersionsTrustTheWatch) {
  ResourceSliceStore store;
  store.applyUpsert(makeSlice("a", "p1", "opaque-1"));
  store.assumeWritten(makeSlice("a", "p2", "opaque-2"));
  EXPECT_EQ(store.get("a")->spec.pool.name, "p2");
  store.applyUpsert(makeSlice("a", "p3", "opaque-0"));
  EXPECT_EQ(store.get("a")->spec.pool.name, "p3");
  EXPECT_EQ(store.pendingAssumptions(), 0u);
}

TEST(ResourceSliceStore, ReplaceReturnsOnlyTheDifferences) {
  ResourceSliceStore store;
  store.replace({makeSlice("a", "p", "1"), makeSlice("b", "p", "2"), makeSlice("c", "p", "3")},
                "3");
  const auto changes = store.replace(
      {makeSlice("b", "p", "7"), makeSlice("c", "p", "3"), makeSlice("d", "p", "8")}, "9");
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].old->metadata.name, "a");
  EXPECT_EQ(changes[0].now, nullptr);
  EXPECT_EQ(changes[1].old->metadata.resource_version, "2");
  EXPECT_EQ(changes[1].now->metadata.resource_version, "7");
  EXPECT_EQ(changes[2].old, nullptr);
  EXPECT_EQ(changes[2].now->metadata.name, "d");
  EXPECT_THAT(namesOf(store.list()), ElementsAre("b", "c", "d"));
}

TEST(ResourceSliceStore, ReplaceSettlesAssumptionsByTheListVersion) {
  ResourceSliceStore store;
  store.assumeWritten(makeSlice("before", "p", "5"));  // written, then deleted before the list
  store.assumeWritten(makeSlice("after", "p", "12"));  // written after the list was taken
  store.applyUpsert(makeSlice("gone", "p", "3"));
  store.assumeDeleted("gone");
  const auto changes = store.replace({}, "10");
  EXPECT_EQ(store.get("before"), nullptr);
  EXPECT_NE(store.get("after"), nullptr);
  EXPECT_EQ(store.get("gone"), nullptr);
  EXPECT_EQ(store.pendingAssumptions(), 1u);
  ASSERT_EQ(changes.size(), 1u);  // only the watched slice went away
  EXPECT_EQ(changes[0].old->metadata.name, "gone");
}

// ---- Informer ---------------------------------------------------------------

// Records handler calls as lines ("add a", "update a 1001->1003", "delete a")
// and lets the test wait for them.
class Recorder {
 public:
  InformerHandlers<ResourceSlices> handlers() {
    InformerHandlers<ResourceSlices> h;
    h.on_add = [this](const ResourceSlice& s) { record("add " + s.metadata.name); };
    h.on_update = [this](const ResourceSlice& old, const ResourceSlice& now) {
      record("update " + now.metadata.name + " " + old.metadata.resource_version + "->" +
             now.metadata.resource_version);
    };
    h.on_delete = [this](const ResourceSlice& s) { record("delete " + s.metadata.name); };
    return h;
  }
  void record(std::string line) {
    std::lock_guard lock(mu_);
    lines_.push_back(std::move(line));
    cv_.notify_all();
  }
  // Waits until `line` was recorded.
  bool waitFor(const std::string& line) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kSafetyTimeout, [&] {
      return std::find(lines_.begin(), lines_.end(), line) != lines_.end();
    });
  }
  bool waitForCount(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kSafetyTimeout, [&] { return lines_.size() >= n; });
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  // Lines recorded after the first `skip`.
  std::vector<std::string> linesAfter(size_t skip) {
    std::lock_guard lock(mu_);
    return {lines_.begin() + static_cast<std::ptrdiff_t>(std::min(skip, lines_.size())),
            lines_.end()};
  }
  void clear() {
    std::lock_guard lock(mu_);
    lines_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

// Holds the informer's next watch calls of `resource` while `gate` is closed,
// like a network partition, so that a test can change the server meanwhile.
void gateWatches(FakeKubeApi& api, Gate& gate, const std::string& resource) {
  api.prependReactor("watch", resource, [&gate](FakeKubeApi::Request&) {
    gate.pass(kSafetyTimeout);
    return okStatus();
  });
}

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override { gateWatches(api_, gate_, "resourceslices"); }

  void TearDown() override {
    gate_.open();
    if (informer_) {
      informer_->stop();
    }
  }

  InformerOptions<ResourceSlices> defaultOptions() {
    InformerOptions<ResourceSlices> options;
    options.label_selector = "app.kubernetes.io/managed-by=resourceslice-controller";
    options.index = poolKey;
    options.seed = 7;
    options.on_watch_restart = [this](WatchRestart reason) {
      std::lock_guard lock(mu_);
      restarts_.emplace_back(watchRestartName(reason));
    };
    return options;
  }

  void start(InformerOptions<ResourceSlices> options) {
    auto created =
        Informer<ResourceSlices>::create(api_, clock_, std::move(options), recorder_.handlers());
    ASSERT_TRUE(created.ok()) << created.status().toString();
    informer_ = std::move(created).value();
    informer_->start();
  }
  // Starts with the default options and waits for the first list and watch.
  void startSynced() {
    start(defaultOptions());
    std::stop_source never;
    ASSERT_TRUE(informer_->waitForSync(never.get_token()));
    ASSERT_TRUE(api_.waitForActiveWatches(1));
  }

  ResourceSlice seed(const std::string& name, const std::string& pool = "pool-a") {
    auto created = api_.addResourceSlice(makeSlice(name, pool));
    EXPECT_TRUE(created.ok()) << created.status().toString();
    return created.ok() ? *created : ResourceSlice{};
  }

  std::vector<FakeKubeApi::Action> watchActions() {
    std::vector<FakeKubeApi::Action> watches;
    for (const auto& action : api_.actions()) {
      if (action.verb == "watch") {
        watches.push_back(action);
      }
    }
    return watches;
  }

  std::vector<std::string> restarts() {
    std::lock_guard lock(mu_);
    return restarts_;
  }

  // Records when each `verb` call on ResourceSlices comes (attempts_), and
  // fails the next `failures` of them as unavailable.
  void failFirst(const std::string& verb, int failures) {
    failures_left_ = failures;
    api_.prependReactor(verb, "resourceslices", [this](FakeKubeApi::Request&) {
      attempts_.push_back(clock_.now());
      if (failures_left_-- > 0) {
        return Status(StatusCode::kUnavailable, "injected: unavailable");
      }
      return okStatus();
    });
  }
  // The waits between consecutive attempts.
  std::vector<Clock::Duration> waits() const {
    std::vector<Clock::Duration> waits;
    for (size_t i = 1; i < attempts_.size(); ++i) {
      waits.push_back(attempts_[i] - attempts_[i - 1]);
    }
    return waits;
  }

  FakeClock clock_;
  FakeKubeApi api_{clock_};
  Recorder recorder_;
  Gate gate_;
  std::mutex mu_;
  std::vector<std::string> restarts_;
  std::unique_ptr<Informer<ResourceSlices>> informer_;
  // Written on the informer's thread; read once it is done (synced, or watching).
  std::vector<Clock::TimePoint> attempts_;
  int failures_left_ = 0;
};

TEST_F(InformerTest, ListsThenWatchesFromTheListVersion) {
  seed("a");
  seed("b", "pool-b");
  const std::string listed_at = api_.resourceVersion();
  startSynced();
  EXPECT_TRUE(informer_->hasSynced());
  EXPECT_THAT(recorder_.lines(), ElementsAre("add a", "add b"));
  EXPECT_THAT(namesOf(informer_->store().byIndex("gpu.example.com/pool-b")), ElementsAre("b"));

  const auto watches = watchActions();
  ASSERT_EQ(watches.size(), 1u);
  const ListOptions& watch = watches[0].options;
  EXPECT_EQ(watch.resource_version, listed_at);
  EXPECT_TRUE(watch.allow_watch_bookmarks);
  EXPECT_EQ(watch.label_selector, "app.kubernetes.io/managed-by=resourceslice-controller");
  ASSERT_TRUE(watch.timeout_seconds.has_value());
  EXPECT_GE(*watch.timeout_seconds, 300);
  EXPECT_LE(*watch.timeout_seconds, 600);
}

TEST_F(InformerTest, DeliversAddsUpdatesAndDeletesFromTheWatch) {
  startSynced();
  const ResourceSlice a = seed("a");
  ASSERT_TRUE(recorder_.waitFor("add a"));
  const auto edited =
      api_.editResourceSlice("a", [](ResourceSlice& s) { s.spec.pool.generation = 2; });
  ASSERT_TRUE(edited.ok());
  const std::string update =
      "update a " + a.metadata.resource_version + "->" + edited->metadata.resource_version;
  ASSERT_TRUE(recorder_.waitFor(update));
  EXPECT_EQ(informer_->store().get("a")->spec.pool.generation, 2);
  ASSERT_TRUE(api_.removeResourceSlice("a").ok());
  ASSERT_TRUE(recorder_.waitFor("delete a"));
  EXPECT_EQ(informer_->store().get("a"), nullptr);
  EXPECT_THAT(recorder_.lines(), ElementsAre("add a", update, "delete a"));
  EXPECT_EQ(informer_->lastResourceVersion(), api_.resourceVersion());
}

TEST_F(InformerTest, IgnoresSlicesOutsideTheSelector) {
  startSynced();
  ResourceSlice foreign = makeSlice("foreign");
  foreign.metadata.labels.clear();
  ASSERT_TRUE(api_.addResourceSlice(foreign).ok());
  seed("fence");
  ASSERT_TRUE(recorder_.waitFor("add fence"));
  EXPECT_THAT(recorder_.lines(), ElementsAre("add fence"));
  EXPECT_EQ(informer_->store().get("foreign"), nullptr);
}

TEST_F(InformerTest, ListsInPages) {
  for (int i = 0; i < 5; ++i) {
    seed("s" + std::to_string(i));
  }
  InformerOptions<ResourceSlices> options = defaultOptions();
  options.page_size = 2;
  start(std::move(options));
  std::stop_source never;
  ASSERT_TRUE(informer_->waitForSync(never.get_token()));
  EXPECT_EQ(informer_->store().size(), 5u);
  EXPECT_EQ(api_.countActions("list", "resourceslices"), 3u);
  EXPECT_EQ(recorder_.lines().size(), 5u);
}

TEST_F(InformerTest, ExpiredContinueTokenRestartsTheListFromScratch) {
  for (int i = 0; i < 5; ++i) {
    seed("s" + std::to_string(i));
  }
  bool compacted = false;
  api_.prependReactor("list", "resourceslices", [&](FakeKubeApi::Request& request) {
    if (!request.options.continue_token.empty() && !compacted) {
      compacted = true;
      api_.compact();  // the continue token expires under the informer
    }
    return okStatus();
  });
  InformerOptions<ResourceSlices> options = defaultOptions();
  options.page_size = 2;
  start(std::move(options));
  std::stop_source never;
  ASSERT_TRUE(informer_->waitForSync(never.get_token()));
  std::vector<std::string> tokens;
  for (const auto& action : api_.actions()) {
    if (action.verb == "list") {
      tokens.emplace_back(action.options.continue_token.empty() ? "first" : "next");
    }
  }
  EXPECT_THAT(tokens, ElementsAre("first", "next", "first", "next", "next"));
  EXPECT_EQ(informer_->store().size(), 5u);
  EXPECT_EQ(recorder_.lines().size(), 5u) << "each slice is added once";
  EXPECT_TRUE(clock_.sleeps().empty()) << "no backoff for an expired token";
}

TEST_F(InformerTest, ResumesFromTheLastVersionWithoutDuplicates) {
  seed("a");
  startSynced();
  const ResourceSlice b = seed("b");
  ASSERT_TRUE(recorder_.waitFor("add b"));

  // The connection drops; while the informer is away, c is created.
  gate_.close();
  api_.resetWatches();
  ASSERT_TRUE(gate_.waitArrived(2));
  seed("c");
  gate_.open();
  ASSERT_TRUE(recorder_.waitFor("add c"));
  seed("fence");
  ASSERT_TRUE(recorder_.waitFor("add fence"));

  EXPECT_THAT(recorder_.lines(), ElementsAre("add a", "add b", "add c", "add fence"));
  const auto watches = watchActions();
  ASSERT_EQ(watches.size(), 2u);
  EXPECT_EQ(watches[1].options.resource_version, b.metadata.resource_version);
  EXPECT_EQ(api_.countActions("list", "resourceslices"), 1u) << "no relist";
  EXPECT_THAT(restarts(), ElementsAre("closed"));
}

TEST_F(InformerTest, RelistAfterGoneDeliversOnlyTheDifferences) {
  seed("a");
  const ResourceSlice b = seed("b");
  seed("c");
  startSynced();
  recorder_.clear();

  // Away long enough for the history to be compacted.
  gate_.close();
  api_.resetWatches();
  ASSERT_TRUE(gate_.waitArrived(2));
  ASSERT_TRUE(api_.removeResourceSlice("a").ok());
  const auto edited =
      api_.editResourceSlice("b", [](ResourceSlice& s) { s.spec.pool.generation = 9; });
  ASSERT_TRUE(edited.ok());
  seed("d");
  api_.compact();
  gate_.open();

  ASSERT_TRUE(recorder_.waitForCount(3));
  seed("fence");
  ASSERT_TRUE(recorder_.waitFor("add fence"));
  EXPECT_THAT(recorder_.lines(), ElementsAre("delete a",
                                             "update b " + b.metadata.resource_version + "->" +
                                                 edited->metadata.resource_version,
                                             "add d", "add fence"));
  EXPECT_EQ(api_.countActions("list", "resourceslices"), 2u);
  EXPECT_THAT(restarts(), ElementsAre("closed", "gone"));
  EXPECT_THAT(namesOf(informer_->store().list()), ElementsAre("b", "c", "d", "fence"));
}

TEST_F(InformerTest, ErrorEventGoneInsideTheStreamRelists) {
  seed("a");
  startSynced();
  api_.sendWatchError(Status(StatusCode::kGone, "too old resource version", {}, "Expired"));
  ASSERT_TRUE(api_.waitForWatchesStarted(2));
  ASSERT_TRUE(api_.waitForActiveWatches(1));
  EXPECT_EQ(api_.countActions("list", "resourceslices"), 2u);
  EXPECT_THAT(restarts(), ElementsAre("gone"));
  EXPECT_THAT(recorder_.lines(), ElementsAre("add a")) << "nothing changed, nothing delivered";
}

TEST_F(InformerTest, BookmarkAdvancesTheResumeVersion) {
  startSynced();
  const std::string listed = informer_->lastResourceVersion();
  // A write the informer does not see (outside its selector) moves the
  // server's version; only the bookmark tells the informer.
  ResourceSlice foreign = makeSlice("foreign");
  foreign.metadata.labels.clear();
  ASSERT_TRUE(api_.addResourceSlice(foreign).ok());
  const std::string bookmarked = api_.resourceVersion();
  ASSERT_NE(bookmarked, listed);
  api_.sendBookmark();
  // The error comes after the bookmark in the stream: the next watch shows
  // where the informer resumes.
  api_.sendWatchError(Status(StatusCode::kUnavailable, "connection reset"));
  ASSERT_TRUE(api_.waitForWatchesStarted(2));
  const auto watches = watchActions();
  ASSERT_EQ(watches.size(), 2u);
  EXPECT_EQ(watches[1].options.resource_version, bookmarked);
  EXPECT_EQ(informer_->lastResourceVersion(), bookmarked);
  EXPECT_EQ(api_.countActions("list", "resourceslices"), 1u);
  EXPECT_THAT(recorder_.lines(), IsEmpty());
}

TEST_F(InformerTest, BacksOffOnListErrorsWithTheClock) {
  failFirst("list", 4);
  InformerOptions<ResourceSlices> options = defaultOptions();
  options.backoff_jitter = 0;
  options.max_backoff = 2s;
  start(std::move(options));
  std::stop_source never;
  ASSERT_TRUE(informer_->waitForSync(never.get_token()));
  EXPECT_THAT(waits(), ElementsAre(Clock::Duration(800ms), Clock::Duration(1600ms),
                                   Clock::Duration(2s), Clock::Duration(2s)));
}

TEST_F(InformerTest, BackoffJitterStretchesWithinBounds) {
  failFirst("list", 3);
  start(defaultOptions());  // jitter 0.2
  std::stop_source never;
  ASSERT_TRUE(informer_->waitForSync(never.get_token()));
  const std::vector<Clock::Duration> bases = {800ms, 1600ms, 3200ms};
  const std::vector<Clock::Duration> waited = waits();
  ASSERT_EQ(waited.size(), bases.size());
  for (size_t i = 0; i < bases.size(); ++i) {
    EXPECT_GE(waited[i], bases[i]);
    EXPECT_LT(waited[i], bases[i] * 1.2 + 1ms);
  }
}

TEST_F(InformerTest, WatchErrorsBackOffAndResumeWithoutARelist) {
  seed("a");
  failFirst("watch", 2);
  InformerOptions<ResourceSlices> options = defaultOptions();
  options.backoff_jitter = 0;
  start(std::move(options));
  ASSERT_TRUE(api_.waitForActiveWatches(1));
  EXPECT_THAT(waits(), ElementsAre(Clock::Duration(800ms), Clock::Duration(1600ms)));
  EXPECT_EQ(api_.countActions("list", "resourceslices"), 1u);
  EXPECT_THAT(restarts(), ElementsAre("error", "error"));
  // Every backoff sleep went through the clock.
  Clock::Duration slept{};
  for (const auto d : clock_.sleeps()) {
    slept += d;
  }
  EXPECT_EQ(slept, Clock::Duration(2400ms));
}

TEST_F(InformerTest, HealthyWatchResetsTheBackoff) {
  startSynced();
  failFirst("watch", 1);
  // First outage: one failure, 800 ms.
  seed("a");
  ASSERT_TRUE(recorder_.waitFor("add a"));
  api_.resetWatches();
  ASSERT_TRUE(api_.waitForWatchesStarted(2));
  seed("b");
  ASSERT_TRUE(recorder_.waitFor("add b"));  // the watch is healthy again
  // Second outage: again 800 ms, not 1600 ms.
  failures_left_ = 1;
  api_.resetWatches();
  ASSERT_TRUE(api_.waitForWatchesStarted(3));
  ASSERT_EQ(attempts_.size(), 4u);
  for (const auto& [first, retry] :
       {std::pair{attempts_[0], attempts_[1]}, std::pair{attempts_[2], attempts_[3]}}) {
    EXPECT_GE(retry - first, Clock::Duration(800ms));
    EXPECT_LT(retry - first, Clock::Duration(1000ms));
  }
}

TEST_F(InformerTest, AssumedWriteIsVisibleAtOnceAndSupersededByTheWatch) {
  startSynced();
  gate_.close();
  api_.resetWatches();
  ASSERT_TRUE(gate_.waitArrived(2));

  // Our own create: the watch has not seen it yet.
  ResourceSlice desired = makeSlice("");
  desired.metadata.generate_name = "00000-gpu.example.com-pool-a-";
  const auto created = api_.createResourceSlice(desired);
  ASSERT_TRUE(created.ok());
  informer_->store().assumeWritten(*created);
  EXPECT_EQ(informer_->store().get(created->metadata.name)->metadata.resource_version,
            created->metadata.resource_version);
  EXPECT_THAT(namesOf(informer_->store().byIndex("gpu.example.com/pool-a")),
              ElementsAre(created->metadata.name));
  EXPECT_EQ(informer_->store().pendingAssumptions(), 1u);

  gate_.open();
  ASSERT_TRUE(recorder_.waitFor("add " + created->metadata.name));
  EXPECT_EQ(informer_->store().pendingAssumptions(), 0u);
  EXPECT_EQ(*informer_->store().get(created->metadata.name), *created);
}

// The watch is told what the store holds, our assumed writes included, so
// that it need not read the spec of an event in a state held already.
TEST_F(InformerTest, WatchIsGivenTheHeldSlices) {
  const ResourceSlice listed = seed("a");
  startSynced();
  const auto watches = watchActions();
  ASSERT_EQ(watches.size(), 1u);
  const HeldSlice& held = watches[0].options.held_slice;
  ASSERT_TRUE(held);
  ASSERT_NE(held("a"), nullptr);
  EXPECT_EQ(*held("a"), listed);
  EXPECT_EQ(held("b"), nullptr);

  ResourceSlice desired = makeSlice("");
  desired.metadata.generate_name = "00000-gpu.example.com-pool-a-";
  const auto created = api_.createResourceSlice(desired);
  ASSERT_TRUE(created.ok());
  informer_->store().assumeWritten(*created);
  ASSERT_NE(held(created->metadata.name), nullptr);
  EXPECT_EQ(*held(created->metadata.name), *created);
}

TEST_F(InformerTest, DeletionByOthersRightAfterOurWriteWins) {
  startSynced();
  gate_.close();
  api_.resetWatches();
  ASSERT_TRUE(gate_.waitArrived(2));

  const auto created = api_.createResourceSlice(makeSlice("x"));
  ASSERT_TRUE(created.ok());
  informer_->store().assumeWritten(*created);
  ASSERT_TRUE(api_.removeResourceSlice("x").ok());  // someone else
  EXPECT_NE(informer_->store().get("x"), nullptr) << "not seen yet";

  gate_.open();
  ASSERT_TRUE(recorder_.waitFor("delete x"));
  EXPECT_EQ(informer_->store().get("x"), nullptr);
  EXPECT_EQ(informer_->store().pendingAssumptions(), 0u);
  EXPECT_THAT(recorder_.lines(), ElementsAre("add x", "delete x"));
}

TEST_F(InformerTest, AssumedDeletionHidesTheSliceUntilTheWatchConfirms) {
  const ResourceSlice a = seed("a");
  startSynced();
  gate_.close();
  api_.resetWatches();
  ASSERT_TRUE(gate_.waitArrived(2));
  ASSERT_TRUE(
      api_.deleteResourceSlice("a", Preconditions{a.metadata.uid, a.metadata.resource_version})
          .ok());
  informer_->store().assumeDeleted("a");
  EXPECT_EQ(informer_->store().get("a"), nullptr);
  EXPECT_THAT(informer_->store().byIndex("gpu.example.com/pool-a"), IsEmpty());
  gate_.open();
  ASSERT_TRUE(recorder_.waitFor("delete a"));
  EXPECT_EQ(informer_->store().pendingAssumptions(), 0u);
}

TEST_F(InformerTest, WaitForSyncReturnsFalseWhenStopped) {
  api_.prependReactor("list", "resourceslices", [](FakeKubeApi::Request&) {
    return Status(StatusCode::kPermissionDenied, "forbidden");
  });
  Informer<ResourceSlices> informer(api_, clock_, defaultOptions(), {});
  std::stop_source stop;
  stop.request_stop();
  EXPECT_FALSE(informer.waitForSync(stop.get_token()));
  EXPECT_FALSE(informer.hasSynced());
  EXPECT_EQ(informer.lastResourceVersion(), "");
}

TEST_F(InformerTest, StopEndsABlockedWatchAndTheLoop) {
  startSynced();
  informer_->stop();
  EXPECT_EQ(api_.activeWatches(), 0u);
  EXPECT_THAT(restarts(), IsEmpty()) << "stopping is not a restart";
}

// ---- Informer<NodeMetadata>: the same machinery over Node metadata ----------

// Keeps a Node's name, UID and resourceVersion, as the controller's Node
// cache does.
void keepIdentity(PartialObjectMetadata& node) {
  ObjectMeta kept;
  kept.name = node.metadata.name;
  kept.uid = node.metadata.uid;
  kept.resource_version = node.metadata.resource_version;
  node.metadata = kept;
}

class NodeInformerTest : public ::testing::Test {
 protected:
  void SetUp() override { gateWatches(api_, gate_, "nodes"); }
  void TearDown() override {
    gate_.open();
    if (informer_) {
      informer_->stop();
    }
  }

  // Starts with `transform` and waits for the first list and watch.
  void startSynced() {
    InformerOptions<NodeMetadata> options;
    options.seed = 7;
    options.transform = keepIdentity;
    options.on_watch_restart = [this](WatchRestart reason) {
      recorder_.record("restart " + std::string(watchRestartName(reason)));
    };
    InformerHandlers<NodeMetadata> h;
    h.on_add = [this](const PartialObjectMetadata& n) {
      recorder_.record("add " + n.metadata.name + " " + n.metadata.uid);
    };
    h.on_update = [this](const PartialObjectMetadata& old, const PartialObjectMetadata& now) {
      recorder_.record("update " + now.metadata.name + " " + old.metadata.uid + "->" +
                       now.metadata.uid);
    };
    h.on_delete = [this](const PartialObjectMetadata& n) {
      recorder_.record("delete " + n.metadata.name + " " + n.metadata.uid);
    };
    auto created = Informer<NodeMetadata>::create(api_, clock_, std::move(options), h);
    ASSERT_TRUE(created.ok()) << created.status().toString();
    informer_ = std::move(created).value();
    informer_->start();
    std::stop_source never;
    ASSERT_TRUE(informer_->waitForSync(never.get_token()));
    ASSERT_TRUE(api_.waitForActiveWatches(1, "nodes"));
  }

  Node labelled(const std::string& name) {
    Node node = api_.addNode(name);
    auto edited = api_.editNode(name, [](Node& n) { n.metadata.labels["zone"] = "a"; });
    EXPECT_TRUE(edited.ok()) << edited.status().toString();
    return edited.ok() ? *edited : node;
  }

  FakeClock clock_;
  FakeKubeApi api_{clock_};
  Recorder recorder_;
  Gate gate_;
  std::unique_ptr<Informer<NodeMetadata>> informer_;
};

TEST_F(NodeInformerTest, ListsAndWatchesNodeMetadataKeepingWhatTheTransformKeeps) {
  const Node a = labelled("node-a");
  startSynced();
  const Node b = api_.addNode("node-b");
  ASSERT_TRUE(recorder_.waitFor("add node-b " + b.metadata.uid));
  api_.removeNode("node-a");
  ASSERT_TRUE(recorder_.waitFor("delete node-a " + a.metadata.uid));
  EXPECT_THAT(recorder_.lines(),
              ElementsAre("add node-a " + a.metadata.uid, "add node-b " + b.metadata.uid,
                          "delete node-a " + a.metadata.uid));

  // The store holds the transformed metadata only.
  const auto stored = informer_->store().get("node-b");
  ASSERT_NE(stored, nullptr);
  EXPECT_EQ(stored->metadata.uid, b.metadata.uid);
  EXPECT_EQ(stored->metadata.resource_version, b.metadata.resource_version);
  EXPECT_TRUE(stored->metadata.creation_timestamp.empty());
  EXPECT_EQ(informer_->store().get("node-a"), nullptr);
  EXPECT_EQ(api_.countActions("list", "nodes"), 1u);
  EXPECT_EQ(api_.countActions("list", "resourceslices"), 0u);
  EXPECT_EQ(api_.countActions("watch", "nodes"), 1u);
  EXPECT_EQ(informer_->lastResourceVersion(), api_.resourceVersion());
}

TEST_F(NodeInformerTest, TransformIsAppliedToListedNodesToo) {
  labelled("node-a");
  startSynced();
  const auto stored = informer_->store().get("node-a");
  ASSERT_NE(stored, nullptr);
  EXPECT_TRUE(stored->metadata.labels.empty());
  EXPECT_TRUE(stored->metadata.creation_timestamp.empty());
}

TEST_F(NodeInformerTest, ANodeReCreatedWhileAwayIsAnUpdateOfItsUidAfterTheRelist) {
  const Node first = api_.addNode("node-a");
  startSynced();
  recorder_.clear();

  // Away while node-a is deleted and created again, and the history is
  // compacted: the informer's resume answers 410 and it relists.
  gate_.close();
  api_.resetWatches();
  ASSERT_TRUE(gate_.waitArrived(2));
  api_.removeNode("node-a");
  const Node second = api_.addNode("node-a");
  api_.compact();
  gate_.open();

  ASSERT_TRUE(
      recorder_.waitFor("update node-a " + first.metadata.uid + "->" + second.metadata.uid));
  EXPECT_THAT(recorder_.lines(),
              ElementsAre("restart closed", "restart gone",
                          "update node-a " + first.metadata.uid + "->" + second.metadata.uid));
  EXPECT_EQ(informer_->store().get("node-a")->metadata.uid, second.metadata.uid);
  EXPECT_EQ(api_.countActions("list", "nodes"), 2u);
}

TEST(InformerOptions, InvalidOptionsAreRejected) {
  FakeClock clock;
  FakeKubeApi api(clock);
  InformerOptions<ResourceSlices> bad_timeouts;
  bad_timeouts.min_watch_timeout = 600s;
  bad_timeouts.max_watch_timeout = 300s;
  EXPECT_EQ(Informer<ResourceSlices>::create(api, clock, bad_timeouts, {}).status().code(),
            StatusCode::kInvalidArgument);
  InformerOptions<ResourceSlices> bad_backoff;
  bad_backoff.initial_backoff = Clock::Duration::zero();
  EXPECT_EQ(Informer<ResourceSlices>::create(api, clock, bad_backoff, {}).status().code(),
            StatusCode::kInvalidArgument);
  InformerOptions<ResourceSlices> bad_page;
  bad_page.page_size = -1;
  EXPECT_EQ(Informer<ResourceSlices>::create(api, clock, bad_page, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      Informer<ResourceSlices>::create(api, clock, InformerOptions<ResourceSlices>{}, {}).ok());
}

}  // namespace
}  // namespace rsc::client
