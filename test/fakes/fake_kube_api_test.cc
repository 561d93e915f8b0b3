#include "test/fakes/fake_kube_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "test/fakes/blocked_threads.h"
#include "test/fakes/fake_clock.h"

namespace rsc::testing {
namespace {

using client::ListOptions;
using client::ResourceSlice;
using client::WatchEvent;
using client::WatchEventType;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

constexpr auto kSafetyTimeout = std::chrono::seconds(10);

ResourceSlice makeSlice(const std::string& name, const std::string& driver = "gpu.example.com",
                        const std::optional<std::string>& node = "node-a") {
  ResourceSlice slice;
  slice.metadata.name = name;
  slice.spec.driver = driver;
  slice.spec.pool.name = node.value_or("shared");
  slice.spec.pool.generation = 1;
  slice.spec.pool.resource_slice_count = 1;
  slice.spec.node_name = node;
  if (!node) {
    slice.spec.all_nodes = true;
  }
  return slice;
}

std::vector<std::string> names(const std::vector<ResourceSlice>& slices) {
  std::vector<std::string> result;
  result.reserve(slices.size());
  for (const auto& slice : slices) {
    result.push_back(slice.metadata.name);
  }
  return result;
}

// Builds ListOptions: Opts().from("1005").fields("spec.driver=x").
struct Opts {
  Opts& from(std::string rv) {
    options.resource_version = std::move(rv);
    return *this;
  }
  Opts& labels(std::string selector) {
    options.label_selector = std::move(selector);
    return *this;
  }
  Opts& fields(std::string selector) {
    options.field_selector = std::move(selector);
    return *this;
  }
  Opts& limit(int64_t n) {
    options.limit = n;
    return *this;
  }
  Opts& continueFrom(std::string token) {
    options.continue_token = std::move(token);
    return *this;
  }
  Opts& bookmarks() {
    options.allow_watch_bookmarks = true;
    return *this;
  }
  operator ListOptions() const { return options; }  // NOLINT(google-explicit-constructor)
  ListOptions options;
};

// Runs one watch on its own thread and keeps what it delivers.
class WatchRecorder {
 public:
  WatchRecorder(FakeKubeApi& api, const ListOptions& options)
      : thread_([this, &api, options](const std::stop_token& stop) {
          const Status status = api.watchResourceSlices(
              options,
              [this](const WatchEvent<ResourceSlice>& event) {
                std::lock_guard lock(mu_);
                events_.push_back(event);
                cv_.notify_all();
                return true;
              },
              stop);
          std::lock_guard lock(mu_);
          result_ = status;
          cv_.notify_all();
        }) {}

  bool waitForEvents(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kSafetyTimeout, [&] { return events_.size() >= n; });
  }
  // Returns the watch's result once it ended (nullopt on timeout).
  std::optional<Status> waitForEnd() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, kSafetyTimeout, [&] { return result_.has_value(); });
    return result_;
  }
  std::vector<WatchEvent<ResourceSlice>> events() {
    std::lock_guard lock(mu_);
    return events_;
  }
  // "ADDED a", "DELETED b", "BOOKMARK 1005", "ERROR Gone".
  std::vector<std::string> summary() {
    std::vector<std::string> lines;
    for (const auto& event : events()) {
      switch (event.type) {
        case WatchEventType::kAdded:
          lines.push_back("ADDED " + event.object.metadata.name);
          break;
        case WatchEventType::kModified:
          lines.push_back("MODIFIED " + event.object.metadata.name);
          break;
        case WatchEventType::kDeleted:
          lines.push_back("DELETED " + event.object.metadata.name);
          break;
        case WatchEventType::kBookmark:
          lines.push_back("BOOKMARK " + event.object.metadata.resource_version);
          break;
        case WatchEventType::kError:
          lines.push_back("ERROR " + std::string(statusCodeName(event.error.code())));
          break;
      }
    }
    return lines;
  }
  void stop() { thread_.request_stop(); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<WatchEvent<ResourceSlice>> events_;
  std::optional<Status> result_;
  std::jthread thread_;  // last: joined before the members above go away
};

class FakeKubeApiTest : public ::testing::Test {
 protected:
  ResourceSlice create(const ResourceSlice& slice) {
    auto created = api_.createResourceSlice(slice);
    EXPECT_TRUE(created.ok()) << created.status().toString();
    return created.ok() ? *created : ResourceSlice{};
  }

  FakeClock clock_;
  FakeKubeApi api_{clock_};
};

// ---- writes -----------------------------------------------------------------

TEST_F(FakeKubeApiTest, CreateAssignsServerFields) {
  const ResourceSlice created = create(makeSlice("a"));
  EXPECT_EQ(created.metadata.name, "a");
  EXPECT_THAT(created.metadata.uid, MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                                                 "[0-9a-f]{12}"));
  EXPECT_EQ(created.metadata.generation, 1);
  EXPECT_EQ(created.metadata.creation_timestamp, "2026-01-01T00:00:00Z");
  EXPECT_EQ(created.metadata.resource_version, api_.resourceVersion());
  EXPECT_EQ(api_.resourceSlice("a"), created);
}

TEST_F(FakeKubeApiTest, ResourceVersionsIncreaseAcrossObjectsAndKinds) {
  const auto a = create(makeSlice("a"));
  api_.addNode("node-a");
  const auto b = create(makeSlice("b"));
  EXPECT_LT(std::stoll(a.metadata.resource_version), std::stoll(b.metadata.resource_version) - 1);
}

TEST_F(FakeKubeApiTest, GenerateNameAddsAFiveCharacterSuffix) {
  ResourceSlice slice = makeSlice("");
  slice.metadata.generate_name = "00000-gpu.example.com-node-a-";
  const auto first = create(slice);
  const auto second = create(slice);
  EXPECT_THAT(first.metadata.name,
              MatchesRegex("00000-gpu\\.example\\.com-node-a-[bcdfghjklmnpqrstvwxz2456789]{5}"));
  EXPECT_NE(first.metadata.name, second.metadata.name);
}

TEST_F(FakeKubeApiTest, GenerateNamePrefixIsCutTo58Characters) {
  ResourceSlice slice = makeSlice("");
  slice.metadata.generate_name = std::string(70, 'p');
  EXPECT_EQ(create(slice).metadata.name.size(), 63u);
}

TEST_F(FakeKubeApiTest, CreateWithoutNameOrGenerateNameIsInvalid) {
  EXPECT_EQ(api_.createResourceSlice(makeSlice("")).status().code(), StatusCode::kUnprocessable);
}

TEST_F(FakeKubeApiTest, CreateOfAnExistingNameIsAlreadyExists) {
  create(makeSlice("a"));
  const auto again = api_.createResourceSlice(makeSlice("a"));
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(again.status().reason(), "AlreadyExists");
}

TEST_F(FakeKubeApiTest, UpdateWithAStaleResourceVersionIsConflict) {
  const auto created = create(makeSlice("a"));
  ResourceSlice first = created;
  first.metadata.labels["x"] = "1";
  ASSERT_TRUE(api_.updateResourceSlice(first).ok());
  ResourceSlice stale = created;
  stale.metadata.labels["x"] = "2";
  const auto result = api_.updateResourceSlice(stale);
  EXPECT_EQ(result.status().code(), StatusCode::kConflict);
  EXPECT_THAT(result.status().message(), HasSubstr("the object has been modified"));
  EXPECT_EQ(api_.resourceSlice("a")->metadata.labels.at("x"), "1");
}

TEST_F(FakeKubeApiTest, UpdateWithoutResourceVersionIsRejected) {
  ResourceSlice slice = create(makeSlice("a"));
  slice.metadata.resource_version.clear();
  slice.metadata.labels["x"] = "1";
  const auto result = api_.updateResourceSlice(slice);
  EXPECT_EQ(result.status().code(), StatusCode::kUnprocessable);
  ASSERT_EQ(result.status().details().size(), 1u);
  EXPECT_EQ(result.status().details()[0].field, "metadata.resourceVersion");
}

TEST_F(FakeKubeApiTest, UpdateOfAMissingSliceIsNotFound) {
  ResourceSlice slice = makeSlice("a");
  slice.metadata.resource_version = "1";
  EXPECT_EQ(api_.updateResourceSlice(slice).status().code(), StatusCode::kNotFound);
}

TEST_F(FakeKubeApiTest, GenerationIsBumpedOnlyWhenTheSpecChanges) {
  ResourceSlice slice = create(makeSlice("a"));
  slice.metadata.labels["x"] = "1";
  auto relabelled = api_.updateResourceSlice(slice);
  ASSERT_TRUE(relabelled.ok());
  EXPECT_EQ(relabelled->metadata.generation, 1);
  EXPECT_NE(relabelled->metadata.resource_version, slice.metadata.resource_version);

  relabelled->spec.pool.generation = 2;
  const auto respecced = api_.updateResourceSlice(*relabelled);
  ASSERT_TRUE(respecced.ok());
  EXPECT_EQ(respecced->metadata.generation, 2);
}

TEST_F(FakeKubeApiTest, ServerOwnedFieldsCannotBeChangedByAnUpdate) {
  ResourceSlice slice = create(makeSlice("a"));
  const ResourceSlice original = slice;
  slice.metadata.generation = 42;
  slice.metadata.creation_timestamp = "1999-01-01T00:00:00Z";
  slice.metadata.labels["x"] = "1";
  const auto updated = api_.updateResourceSlice(slice);
  ASSERT_TRUE(updated.ok());
  EXPECT_EQ(updated->metadata.generation, 1);
  EXPECT_EQ(updated->metadata.creation_timestamp, original.metadata.creation_timestamp);
}

TEST_F(FakeKubeApiTest, UpdateThatChangesNothingKeepsTheVersionAndSendsNoEvent) {
  const ResourceSlice slice = create(makeSlice("a"));
  WatchRecorder watch(api_, Opts().from(slice.metadata.resource_version));
  ASSERT_TRUE(api_.waitForWatchesStarted(1));
  const auto same = api_.updateResourceSlice(slice);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->metadata.resource_version, slice.metadata.resource_version);
  EXPECT_EQ(api_.resourceVersion(), slice.metadata.resource_version);
  // A later change arrives first: nothing came before it.
  ASSERT_TRUE(api_.addResourceSlice(makeSlice("fence")).ok());
  ASSERT_TRUE(watch.waitForEvents(1));
  EXPECT_THAT(watch.summary(), ElementsAre("ADDED fence"));
}

TEST_F(FakeKubeApiTest, DriverAndNodeNameAreImmutable) {
  ResourceSlice slice = create(makeSlice("a"));
  ResourceSlice other_driver = slice;
  other_driver.spec.driver = "nic.example.com";
  const auto driver_result = api_.updateResourceSlice(other_driver);
  EXPECT_EQ(driver_result.status().code(), StatusCode::kUnprocessable);
  ResourceSlice other_node = slice;
  other_node.spec.node_name = "node-b";
  EXPECT_EQ(api_.updateResourceSlice(other_node).status().code(), StatusCode::kUnprocessable);
}

TEST_F(FakeKubeApiTest, DeleteChecksPreconditions) {
  const ResourceSlice slice = create(makeSlice("a"));
  const auto wrong_uid =
      api_.deleteResourceSlice("a", client::Preconditions{"other-uid", std::nullopt});
  EXPECT_EQ(wrong_uid.code(), StatusCode::kConflict);
  EXPECT_THAT(wrong_uid.message(), HasSubstr("Precondition failed: UID"));
  const auto wrong_rv = api_.deleteResourceSlice("a", client::Preconditions{std::nullopt, "1"});
  EXPECT_EQ(wrong_rv.code(), StatusCode::kConflict);
  EXPECT_TRUE(api_.resourceSlice("a").has_value());
  EXPECT_TRUE(api_.deleteResourceSlice("a", client::Preconditions{slice.metadata.uid,
                                                                  slice.metadata.resource_version})
                  .ok());
  EXPECT_FALSE(api_.resourceSlice("a").has_value());
  EXPECT_EQ(api_.deleteResourceSlice("a", {}).code(), StatusCode::kNotFound);
  EXPECT_EQ(api_.getResourceSlice("a").status().code(), StatusCode::kNotFound);
}

TEST_F(FakeKubeApiTest, DeleteCollectionDeletesWhatTheSelectorMatches) {
  create(makeSlice("a", "gpu.example.com", "node-a"));
  create(makeSlice("b", "gpu.example.com", "node-b"));
  create(makeSlice("c", "nic.example.com", "node-a"));
  ASSERT_TRUE(api_.deleteResourceSlices(Opts().fields("spec.nodeName=node-a")).ok());
  EXPECT_THAT(names(api_.resourceSlices()), ElementsAre("b"));
  EXPECT_EQ(api_.countActions("deletecollection", "resourceslices"), 1u);
}

// ---- list -------------------------------------------------------------------

TEST_F(FakeKubeApiTest, ListFiltersByLabelSelector) {
  ResourceSlice a = makeSlice("a");
  a.metadata.labels = {{"managed", "yes"}, {"tier", "gold"}};
  ResourceSlice b = makeSlice("b");
  b.metadata.labels = {{"managed", "no"}, {"tier", "silver"}};
  ResourceSlice c = makeSlice("c");
  for (const auto& slice : {a, b, c}) {
    create(slice);
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"", {"a", "b", "c"}},
      {"managed=yes", {"a"}},
      {"managed==yes", {"a"}},
      {"managed!=yes", {"b", "c"}},
      {"managed", {"a", "b"}},
      {"!managed", {"c"}},
      {"tier in (gold, bronze)", {"a"}},
      {"tier notin (gold)", {"b", "c"}},
      {"managed,tier=silver", {"b"}},
      {"managed=yes,tier=silver", {}},
  };
  for (const auto& [selector, expected] : cases) {
    const auto list = api_.listResourceSlices(Opts().labels(selector));
    ASSERT_TRUE(list.ok()) << selector << ": " << list.status().toString();
    EXPECT_EQ(names(list->items), expected) << selector;
  }
}

TEST_F(FakeKubeApiTest, ListFiltersByFieldSelector) {
  create(makeSlice("a", "gpu.example.com", "node-a"));
  create(makeSlice("b", "gpu.example.com", "node-b"));
  create(makeSlice("c", "nic.example.com", std::nullopt));
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"spec.nodeName=node-a", {"a"}},
      {"spec.nodeName!=node-a", {"b", "c"}},
      {"spec.nodeName=", {"c"}},
      {"spec.driver=gpu.example.com", {"a", "b"}},
      {"spec.driver==gpu.example.com,spec.nodeName=node-b", {"b"}},
      {"metadata.name=c", {"c"}},
  };
  for (const auto& [selector, expected] : cases) {
    const auto list = api_.listResourceSlices(Opts().fields(selector));
    ASSERT_TRUE(list.ok()) << selector << ": " << list.status().toString();
    EXPECT_EQ(names(list->items), expected) << selector;
  }
}

TEST_F(FakeKubeApiTest, UnsupportedSelectorsAreInvalidArgument) {
  EXPECT_EQ(api_.listResourceSlices(Opts().fields("spec.pool.name=x")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.listResourceSlices(Opts().fields("spec.driver")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.listResourceSlices(Opts().labels("a in b")).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(api_.listResourceSlices(Opts().labels("a,,b")).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(FakeKubeApiTest, PagesFormOneConsistentList) {
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    create(makeSlice(name));
  }
  const std::string listed_at = api_.resourceVersion();
  auto first = api_.listResourceSlices(Opts().limit(2));
  ASSERT_TRUE(first.ok());
  EXPECT_THAT(names(first->items), ElementsAre("a", "b"));
  EXPECT_EQ(first->remaining_item_count, 3);
  ASSERT_FALSE(first->continue_token.empty());

  // Changes after the first page do not show in later pages.
  ASSERT_TRUE(api_.removeResourceSlice("c").ok());
  create(makeSlice("bb"));

  std::vector<std::string> rest;
  std::string token = first->continue_token;
  while (!token.empty()) {
    auto page = api_.listResourceSlices(Opts().limit(2).continueFrom(token));
    ASSERT_TRUE(page.ok()) << page.status().toString();
    EXPECT_EQ(page->resource_version, listed_at);
    for (const auto& item : page->items) {
      rest.push_back(item.metadata.name);
    }
    token = page->continue_token;
  }
  EXPECT_THAT(rest, ElementsAre("c", "d", "e"));
}

TEST_F(FakeKubeApiTest, CompactionExpiresContinueTokens) {
  for (const char* name : {"a", "b", "c"}) {
    create(makeSlice(name));
  }
  auto first = api_.listResourceSlices(Opts().limit(1));
  ASSERT_TRUE(first.ok());
  api_.compact();
  const auto next = api_.listResourceSlices(Opts().limit(1).continueFrom(first->continue_token));
  EXPECT_EQ(next.status().code(), StatusCode::kGone);
  EXPECT_EQ(next.status().reason(), "Expired");
}

// ---- watch ------------------------------------------------------------------

TEST_F(FakeKubeApiTest, WatchWithoutVersionStartsWithSyntheticAdds) {
  create(makeSlice("b"));
  create(makeSlice("a"));
  WatchRecorder watch(api_, Opts());
  ASSERT_TRUE(api_.waitForWatchesStarted(1));
  ResourceSlice a = *api_.resourceSlice("a");
  a.metadata.labels["x"] = "1";
  ASSERT_TRUE(api_.updateResourceSlice(a).ok());
  ASSERT_TRUE(api_.deleteResourceSlice("b", {}).ok());
  ASSERT_TRUE(watch.waitForEvents(4));
  EXPECT_THAT(watch.summary(), ElementsAre("ADDED a", "ADDED b", "MODIFIED a", "DELETED b"));
}

TEST_F(FakeKubeApiTest, DeletedEventCarriesLastStateAtTheDeletionVersion) {
  const ResourceSlice slice = create(makeSlice("a"));
  WatchRecorder watch(api_, Opts().from(slice.metadata.resource_version));
  ASSERT_TRUE(api_.waitForWatchesStarted(1));
  ASSERT_TRUE(api_.deleteResourceSlice("a", {}).ok());
  ASSERT_TRUE(watch.waitForEvents(1));
  const auto deleted = watch.events()[0];
  EXPECT_EQ(deleted.type, WatchEventType::kDeleted);
  EXPECT_EQ(deleted.object.spec, slice.spec);
  EXPECT_EQ(deleted.object.metadata.resource_version, api_.resourceVersion());
  EXPECT_GT(std::stoll(deleted.object.metadata.resource_version),
            std::stoll(slice.metadata.resource_version));
}

TEST_F(FakeKubeApiTest, WatchFromAVersionReplaysOnlyLaterEvents) {
  create(makeSlice("a"));
  const std::string after_a = api_.resourceVersion();
  create(makeSlice("b"));
  ASSERT_TRUE(api_.removeResourceSlice("a").ok());
  WatchRecorder watch(api_, Opts().from(after_a));
  ASSERT_TRUE(watch.waitForEvents(2));
  EXPECT_THAT(watch.summary(), ElementsAre("ADDED b", "DELETED a"));
}

TEST_F(FakeKubeApiTest, WatchFromBeforeTheHistoryGetsAnError410) {
  create(makeSlice("a"));
  const std::string old = api_.resourceVersion();
  create(makeSlice("b"));
  api_.compact();
  WatchRecorder watch(api_, Opts().from(old));
  const auto result = watch.waitForEnd();
  ASSERT_TRUE(result.has_value());
  EXPECT_TRUE(result->ok()) << "a 410 is an event in a 200 stream";
  ASSERT_EQ(watch.events().size(), 1u);
  EXPECT_EQ(watch.events()[0].type, WatchEventType::kError);
  EXPECT_EQ(watch.events()[0].error.code(), StatusCode::kGone);
  EXPECT_EQ(watch.events()[0].error.reason(), "Expired");
}

TEST_F(FakeKubeApiTest, HistoryIsBoundedByTheOption) {
  FakeKubeApi api(clock_, FakeKubeApiOptions{.watch_history = 2});
  ASSERT_TRUE(api.addResourceSlice(makeSlice("a")).ok());
  const std::string after_a = api.resourceVersion();
  ASSERT_TRUE(api.addResourceSlice(makeSlice("b")).ok());
  ASSERT_TRUE(api.addResourceSlice(makeSlice("c")).ok());
  {
    // b and c are kept: from after a, the watch is complete.
    WatchRecorder watch(api, Opts().from(after_a));
    ASSERT_TRUE(watch.waitForEvents(2));
    EXPECT_THAT(watch.summary(), ElementsAre("ADDED b", "ADDED c"));
    watch.stop();
  }
  ASSERT_TRUE(api.addResourceSlice(makeSlice("d")).ok());
  WatchRecorder expired(api, Opts().from(after_a));
  ASSERT_TRUE(expired.waitForEnd().has_value());
  EXPECT_THAT(expired.summary(), ElementsAre("ERROR Gone"));
}

TEST_F(FakeKubeApiTest, EventsFanOutToEveryWatch) {
  WatchRecorder first(api_, Opts().from(api_.resourceVersion()));
  WatchRecorder second(api_, Opts().from(api_.resourceVersion()));
  WatchRecorder gpu_only(api_,
                         Opts().fields("spec.driver=gpu.example.com").from(api_.resourceVersion()));
  ASSERT_TRUE(api_.waitForActiveWatches(3));
  create(makeSlice("a", "gpu.example.com"));
  create(makeSlice("b", "nic.example.com"));
  ASSERT_TRUE(first.waitForEvents(2));
  ASSERT_TRUE(second.waitForEvents(2));
  EXPECT_THAT(first.summary(), ElementsAre("ADDED a", "ADDED b"));
  EXPECT_THAT(second.summary(), ElementsAre("ADDED a", "ADDED b"));
  // The fence for the filtered watch: one more gpu slice.
  create(makeSlice("c", "gpu.example.com"));
  ASSERT_TRUE(gpu_only.waitForEvents(2));
  EXPECT_THAT(gpu_only.summary(), ElementsAre("ADDED a", "ADDED c"));
}

TEST_F(FakeKubeApiTest, SliceLeavingOrEnteringTheSelectionIsDeletedOrAdded) {
  ResourceSlice slice = makeSlice("a");
  slice.metadata.labels["managed"] = "yes";
  slice = create(slice);
  WatchRecorder watch(api_, Opts().labels("managed=yes").from(api_.resourceVersion()));
  ASSERT_TRUE(api_.waitForWatchesStarted(1));
  ASSERT_TRUE(
      api_.editResourceSlice("a", [](ResourceSlice& s) { s.metadata.labels["managed"] = "no"; })
          .ok());
  ASSERT_TRUE(
      api_.editResourceSlice("a", [](ResourceSlice& s) { s.metadata.labels["managed"] = "yes"; })
          .ok());
  ASSERT_TRUE(watch.waitForEvents(2));
  EXPECT_THAT(watch.summary(), ElementsAre("DELETED a", "ADDED a"));
}

TEST_F(FakeKubeApiTest, ResetWatchesEndsEveryWatchNormally) {
  WatchRecorder first(api_, Opts());
  WatchRecorder second(api_, Opts());
  ASSERT_TRUE(api_.waitForActiveWatches(2));
  api_.resetWatches();
  const auto first_result = first.waitForEnd();
  const auto second_result = second.waitForEnd();
  ASSERT_TRUE(first_result && second_result);
  EXPECT_TRUE(first_result->ok());
  EXPECT_TRUE(second_result->ok());
  EXPECT_TRUE(api_.waitForActiveWatches(0));
}

TEST_F(FakeKubeApiTest, StopTokenCancelsABlockedWatch) {
  WatchRecorder watch(api_, Opts());
  ASSERT_TRUE(api_.waitForActiveWatches(1));
  watch.stop();
  const auto result = watch.waitForEnd();
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->code(), StatusCode::kCancelled);
  EXPECT_EQ(api_.activeWatches(), 0u);
}

// A watch counts as blocked while it waits with nothing to deliver; an event
// for it ends that at once, before its thread runs, and the count comes back
// only once the handler has returned.
TEST(FakeKubeApiBlockedThreads, CountWatchesWaitingWithNothingToDeliver) {
  BlockedThreads blocked;
  FakeClock clock;
  FakeKubeApi api(clock, {.blocked = &blocked});
  std::mutex mu;
  std::condition_variable cv;
  bool in_handler = false;  // guarded by mu
  bool release = false;     // guarded by mu
  std::jthread watch([&](const std::stop_token& stop) {
    (void)api.watchResourceSlices(
        Opts(),
        [&](const WatchEvent<ResourceSlice>&) {
          std::unique_lock lock(mu);
          in_handler = true;
          cv.notify_all();
          cv.wait_for(lock, kSafetyTimeout, [&] { return release; });
          return true;
        },
        stop);
  });
  ASSERT_TRUE(blocked.waitFor(1));
  ASSERT_TRUE(api.addResourceSlice(makeSlice("a")).ok());
  EXPECT_EQ(blocked.count(), 0U) << "an event is pending";
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kSafetyTimeout, [&] { return in_handler; }));
  }
  EXPECT_EQ(blocked.count(), 0U) << "the handler runs";
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(blocked.waitFor(1));
  api.resetWatches();
  EXPECT_EQ(blocked.count(), 0U) << "a closed watch is not waiting";
}

// Writes held until two are under way at once: two writers pass together.
TEST_F(FakeKubeApiTest, HeldWritesGoOnOnceEnoughRunTogether) {
  api_.holdWritesUntilConcurrent(2);
  std::thread other([&] { create(makeSlice("a")); });
  create(makeSlice("b"));
  other.join();
  EXPECT_EQ(api_.maxConcurrentWrites(), 2U);
  create(makeSlice("c"));  // the hold is over
  EXPECT_EQ(api_.resourceSlices().size(), 3U);
}

TEST_F(FakeKubeApiTest, HandlerReturningFalseEndsTheWatch) {
  create(makeSlice("a"));
  create(makeSlice("b"));
  int calls = 0;
  const Status status = api_.watchResourceSlices(
      Opts(),
      [&](const WatchEvent<ResourceSlice>&) {
        ++calls;
        return false;
      },
      std::stop_token{});
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(api_.activeWatches(), 0u);
}

TEST_F(FakeKubeApiTest, BookmarksGoOnlyToWatchesThatAllowThem) {
  WatchRecorder with(api_, Opts().from(api_.resourceVersion()).bookmarks());
  WatchRecorder without(api_, Opts().from(api_.resourceVersion()));
  ASSERT_TRUE(api_.waitForActiveWatches(2));
  api_.addNode("node-a");  // moves the resourceVersion without a slice event
  api_.sendBookmark();
  create(makeSlice("fence"));
  ASSERT_TRUE(with.waitForEvents(2));
  ASSERT_TRUE(without.waitForEvents(1));
  EXPECT_EQ(with.summary()[0],
            "BOOKMARK " + std::to_string(std::stoll(api_.resourceVersion()) - 1));
  EXPECT_THAT(without.summary(), ElementsAre("ADDED fence"));
}

TEST_F(FakeKubeApiTest, SendWatchErrorDeliversTheErrorAndEndsTheWatch) {
  WatchRecorder watch(api_, Opts());
  ASSERT_TRUE(api_.waitForActiveWatches(1));
  api_.sendWatchError(Status(StatusCode::kUnavailable, "etcd leader changed"));
  ASSERT_TRUE(watch.waitForEnd().has_value());
  EXPECT_THAT(watch.summary(), ElementsAre("ERROR Unavailable"));
}

TEST_F(FakeKubeApiTest, WatchFromAnInvalidVersionIsInvalidArgument) {
  const Status status = api_.watchResourceSlices(
      Opts().from("abc"), [](const WatchEvent<ResourceSlice>&) { return true; }, std::stop_token{});
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
}

// ---- reactors and actions ---------------------------------------------------

TEST_F(FakeKubeApiTest, ReactorErrorFailsTheCallAndChangesNothing) {
  api_.prependReactor("create", "resourceslices", [](FakeKubeApi::Request&) {
    return Status(StatusCode::kUnavailable, "Too many requests, please try again later.");
  });
  EXPECT_EQ(api_.createResourceSlice(makeSlice("a")).status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(api_.resourceSlices().empty());
  EXPECT_EQ(api_.countWrites(), 1u) << "failed calls are recorded";
}

TEST_F(FakeKubeApiTest, ReactorCanDefaultFieldsLikeTheServer) {
  api_.prependReactor("*", "resourceslices", [](FakeKubeApi::Request& request) {
    if (request.slice) {
      client::editDevices(request.slice->spec.devices, [](client::Device& device) {
        for (auto& taint : device.taints) {
          if (!taint.time_added) {
            taint.time_added = "2026-01-01T00:00:00Z";
          }
        }
      });
    }
    return okStatus();
  });
  ResourceSlice slice = makeSlice("a");
  client::Device device;
  device.name = "gpu-0";
  device.taints.push_back(client::DeviceTaint{"k", "v", "NoSchedule", std::nullopt});
  slice.spec.devices.push_back(device);
  const auto created = api_.createResourceSlice(slice);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(created->spec.devices[0].device().taints[0].time_added, "2026-01-01T00:00:00Z");
  EXPECT_EQ(api_.resourceSlice("a")->spec.devices[0].device().taints[0].time_added,
            "2026-01-01T00:00:00Z");
}

TEST_F(FakeKubeApiTest, NewestReactorRunsFirstAndCanCallTheFake) {
  std::vector<std::string> order;
  api_.prependReactor("update", "*", [&](FakeKubeApi::Request&) {
    order.emplace_back("older");
    return okStatus();
  });
  api_.prependReactor("update", "resourceslices", [&](FakeKubeApi::Request& request) {
    order.emplace_back("newer");
    // Another writer gets in first: the update then conflicts for real.
    EXPECT_TRUE(
        api_.editResourceSlice(request.name,
                               [](ResourceSlice& s) { s.metadata.labels["by"] = "someone-else"; })
            .ok());
    return okStatus();
  });
  ResourceSlice slice = create(makeSlice("a"));
  slice.metadata.labels["by"] = "us";
  EXPECT_EQ(api_.updateResourceSlice(slice).status().code(), StatusCode::kConflict);
  EXPECT_THAT(order, ElementsAre("newer", "older"));
}

TEST_F(FakeKubeApiTest, ReactorsMatchVerbAndResource) {
  int calls = 0;
  api_.prependReactor("delete", "resourceslices", [&](FakeKubeApi::Request&) {
    ++calls;
    return okStatus();
  });
  create(makeSlice("a"));
  (void)api_.getResourceSlice("a");
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(api_.deleteResourceSlice("a", {}).ok());
  EXPECT_EQ(calls, 1);
  api_.clearReactors();
  EXPECT_EQ(api_.deleteResourceSlice("a", {}).code(), StatusCode::kNotFound);
  EXPECT_EQ(calls, 1);
}

TEST_F(FakeKubeApiTest, ActionsRecordEveryCallInOrder) {
  create(makeSlice("a"));
  (void)api_.listResourceSlices(Opts().labels("x=y"));
  (void)api_.getResourceSlice("a");
  EXPECT_TRUE(api_.deleteResourceSlice("a", {}).ok());
  (void)api_.getLease("kube-system", "leader");
  const auto actions = api_.actions();
  ASSERT_EQ(actions.size(), 5u);
  EXPECT_EQ(actions[0].verb, "create");
  EXPECT_EQ(actions[0].name, "a");
  EXPECT_EQ(actions[1].verb, "list");
  EXPECT_EQ(actions[1].options.label_selector, "x=y");
  EXPECT_EQ(actions[2].verb, "get");
  EXPECT_EQ(actions[3].verb, "delete");
  EXPECT_EQ(actions[4].resource, "leases");
  EXPECT_EQ(actions[4].namespace_, "kube-system");
  EXPECT_EQ(api_.countWrites(), 2u);
  EXPECT_EQ(api_.countActions("get", "resourceslices"), 1u);
  api_.clearActions();
  EXPECT_TRUE(api_.actions().empty());
}

TEST_F(FakeKubeApiTest, SeedingAndForeignEditsAreNotRecorded) {
  ASSERT_TRUE(api_.addResourceSlice(makeSlice("a")).ok());
  ASSERT_TRUE(
      api_.editResourceSlice("a", [](ResourceSlice& s) { s.spec.pool.generation = 5; }).ok());
  EXPECT_EQ(api_.resourceSlice("a")->metadata.generation, 2);
  ASSERT_TRUE(api_.removeResourceSlice("a").ok());
  EXPECT_TRUE(api_.actions().empty());
}

// ---- other resources --------------------------------------------------------

TEST_F(FakeKubeApiTest, LeasesHaveOptimisticConcurrency) {
  client::Lease lease;
  lease.metadata.namespace_ = "kube-system";
  lease.metadata.name = "resourceslice-controller";
  lease.spec.holder_identity = "a";
  auto created = api_.createLease(lease);
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(api_.createLease(lease).status().code(), StatusCode::kAlreadyExists);

  client::Lease mine = *created;
  mine.spec.holder_identity = "b";
  const auto updated = api_.updateLease(mine);
  ASSERT_TRUE(updated.ok());
  client::Lease stale = *created;
  stale.spec.holder_identity = "c";
  EXPECT_EQ(api_.updateLease(stale).status().code(), StatusCode::kConflict);
  EXPECT_EQ(api_.getLease("kube-system", "resourceslice-controller")->spec.holder_identity, "b");
  EXPECT_EQ(api_.getLease("default", "resourceslice-controller").status().code(),
            StatusCode::kNotFound);
}

TEST_F(FakeKubeApiTest, NodesAreAddedAndRemovedByTheTest) {
  const client::Node node = api_.addNode("node-a");
  const auto got = api_.getNode("node-a");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->metadata.uid, node.metadata.uid);
  EXPECT_FALSE(node.metadata.uid.empty());
  api_.removeNode("node-a");
  EXPECT_EQ(api_.getNode("node-a").status().code(), StatusCode::kNotFound);
}

TEST_F(FakeKubeApiTest, NodeMetadataListAndWatchFollowNodeChanges) {
  const client::Node a = api_.addNode("node-a");
  const auto list = api_.listNodeMetadata({});
  ASSERT_TRUE(list.ok()) << list.status().toString();
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0].metadata.uid, a.metadata.uid);
  EXPECT_EQ(list->resource_version, api_.resourceVersion());

  std::mutex mu;
  std::vector<std::string> seen;
  std::jthread watch([&](const std::stop_token& stop) {
    ListOptions from;
    from.resource_version = list->resource_version;
    (void)api_.watchNodeMetadata(
        from,
        [&](const WatchEvent<client::PartialObjectMetadata>& e) {
          std::lock_guard lock(mu);
          const auto zone = e.object.metadata.labels.find("zone");
          seen.push_back(std::to_string(static_cast<int>(e.type)) + " " + e.object.metadata.name +
                         (zone == e.object.metadata.labels.end() ? "" : " " + zone->second));
          return true;
        },
        stop);
  });
  ASSERT_TRUE(api_.waitForActiveWatches(1, "nodes"));
  EXPECT_EQ(api_.activeWatches(), 0u) << "watches of slices are counted apart";
  ASSERT_TRUE(
      api_.editNode("node-a", [](client::Node& n) { n.metadata.labels["zone"] = "a"; }).ok());
  api_.removeNode("node-a");
  const client::Node b = api_.addNode("node-b");
  // Delivered means handled: no waiting on the recorder.
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  {
    std::lock_guard lock(mu);
    const auto line = [](WatchEventType type, const std::string& rest) {
      return std::to_string(static_cast<int>(type)) + " " + rest;
    };
    EXPECT_THAT(seen, ElementsAre(line(WatchEventType::kModified, "node-a a"),
                                  line(WatchEventType::kDeleted, "node-a a"),
                                  line(WatchEventType::kAdded, "node-b")));
  }
  EXPECT_EQ(api_.getNode("node-b")->metadata.uid, b.metadata.uid);
  EXPECT_EQ(api_.countActions("watch", "nodes"), 1u);
}

TEST_F(FakeKubeApiTest, ServicesAndEndpointSlicesByNamespaceAndLabel) {
  const auto svc = [](const std::string& ns, const std::string& name, bool labelled) {
    client::Service s;
    s.metadata.namespace_ = ns;
    s.metadata.name = name;
    if (labelled) s.metadata.labels["team"] = "gpu";
    return s;
  };
  const auto a = api_.putService(svc("a", "x", true));
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_FALSE(a->metadata.uid.empty());
  ASSERT_TRUE(api_.putService(svc("b", "x", true)).ok());
  ASSERT_TRUE(api_.putService(svc("b", "y", false)).ok());
  EXPECT_EQ(api_.putService(svc("", "x", true)).status().code(), StatusCode::kInvalidArgument);
  // The same object again: no new version.
  EXPECT_EQ(api_.putService(svc("a", "x", true))->metadata.resource_version,
            a->metadata.resource_version);

  ListOptions in_b;
  in_b.namespace_ = "b";
  in_b.label_selector = "team=gpu";
  auto list = api_.listServices(in_b);
  ASSERT_TRUE(list.ok()) << list.status().toString();
  ASSERT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->items[0].metadata.namespace_, "b");
  EXPECT_EQ(api_.listServices({})->items.size(), 3u);
  ListOptions by_field;
  by_field.field_selector = "metadata.name=x";
  EXPECT_EQ(api_.listServices(by_field).status().code(), StatusCode::kInvalidArgument);

  std::mutex mu;
  std::vector<std::string> seen;
  std::jthread watch([&](const std::stop_token& stop) {
    ListOptions from = in_b;
    from.resource_version = list->resource_version;
    (void)api_.watchEndpointSlices(
        from,
        [&](const WatchEvent<client::EndpointSlice>& e) {
          std::lock_guard lock(mu);
          seen.push_back(std::to_string(static_cast<int>(e.type)) + " " +
                         e.object.metadata.namespace_ + "/" + e.object.metadata.name);
          return true;
        },
        stop);
  });
  ASSERT_TRUE(api_.waitForActiveWatches(1, "endpointslices"));
  EXPECT_EQ(api_.activeWatches("services"), 0u);
  client::EndpointSlice slice;
  slice.metadata.namespace_ = "b";
  slice.metadata.name = "s";
  slice.metadata.labels["team"] = "gpu";
  ASSERT_TRUE(api_.putEndpointSlice(slice).ok());
  slice.metadata.namespace_ = "a";  // another namespace: not seen
  ASSERT_TRUE(api_.putEndpointSlice(slice).ok());
  slice.metadata.namespace_ = "b";
  slice.metadata.labels.clear();  // leaves the selection
  ASSERT_TRUE(api_.putEndpointSlice(slice).ok());
  ASSERT_TRUE(api_.removeEndpointSlice("a", "s").ok());
  EXPECT_EQ(api_.removeEndpointSlice("a", "s").code(), StatusCode::kNotFound);
  ASSERT_TRUE(api_.waitForWatchesDelivered());
  {
    std::lock_guard lock(mu);
    EXPECT_THAT(seen,
                ElementsAre(std::to_string(static_cast<int>(WatchEventType::kAdded)) + " b/s",
                            std::to_string(static_cast<int>(WatchEventType::kDeleted)) + " b/s"));
  }
  EXPECT_EQ(api_.countActions("watch", "endpointslices"), 1u);
}

TEST_F(FakeKubeApiTest, ReviewsAreAnsweredBySettableFunctions) {
  client::TokenReview review;
  review.token = "t0k3n";
  auto denied = api_.createTokenReview(review);
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE(denied->authenticated);
  EXPECT_EQ(denied->error, "fake: no token reviewer set");
  EXPECT_EQ(denied->token, "t0k3n") << "the review comes back";

  api_.setTokenReviewer([](const client::TokenReview& r) {
    client::TokenReview answer = r;
    answer.authenticated = r.token == "t0k3n";
    answer.user.username = "system:serviceaccount:drivers:gpu";
    return answer;
  });
  auto accepted = api_.createTokenReview(review);
  ASSERT_TRUE(accepted.ok());
  EXPECT_TRUE(accepted->authenticated);
  EXPECT_EQ(accepted->user.username, "system:serviceaccount:drivers:gpu");

  client::SubjectAccessReview access;
  access.verb = "publish";
  auto refused = api_.createSubjectAccessReview(access);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->allowed);
  EXPECT_EQ(refused->reason, "fake: no access reviewer set");
  EXPECT_EQ(refused->verb, "publish");
  api_.setAccessReviewer([](const client::SubjectAccessReview& r) {
    client::SubjectAccessReview answer = r;
    answer.allowed = r.verb == "publish";
    return answer;
  });
  EXPECT_TRUE(api_.createSubjectAccessReview(access)->allowed);
  EXPECT_EQ(api_.countActions("create", "tokenreviews"), 2u);
  EXPECT_EQ(api_.countActions("create", "subjectaccessreviews"), 2u);
}

TEST_F(FakeKubeApiTest, EventsAreRecorded) {
  client::Event event;
  event.metadata.namespace_ = "default";
  event.metadata.generate_name = "slice-";
  event.reason = "PoolPublished";
  ASSERT_TRUE(api_.createEvent(event).ok());
  const auto events = api_.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, "PoolPublished");
  EXPECT_THAT(events[0].metadata.name, MatchesRegex("slice-[a-z0-9]{5}"));
}

TEST_F(FakeKubeApiTest, ConcurrentWritersGetDistinctVersions) {
  constexpr size_t kThreads = 4;
  constexpr size_t kPerThread = 50;
  WatchRecorder watch(api_, Opts().from(api_.resourceVersion()));
  ASSERT_TRUE(api_.waitForActiveWatches(1));
  {
    std::vector<std::jthread> writers;
    writers.reserve(kThreads);
    for (size_t t = 0; t < kThreads; ++t) {
      writers.emplace_back([this, t] {
        for (size_t i = 0; i < kPerThread; ++i) {
          EXPECT_TRUE(api_.createResourceSlice(
                              makeSlice("s-" + std::to_string(t) + "-" + std::to_string(i)))
                          .ok());
        }
      });
    }
  }
  ASSERT_TRUE(watch.waitForEvents(kThreads * kPerThread));
  int64_t previous = 0;
  for (const auto& event : watch.events()) {
    const int64_t rv = std::stoll(event.object.metadata.resource_version);
    EXPECT_GT(rv, previous);
    previous = rv;
  }
}

}  // namespace
}  // namespace rsc::testing
