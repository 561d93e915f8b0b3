#include "client/event_recorder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"
#include "test/fakes/gate.h"

namespace rsc::client {
namespace {

using rsc::testing::FakeClock;
using rsc::testing::FakeKubeApi;
using rsc::testing::Gate;
using ::testing::StartsWith;
using namespace std::chrono_literals;

ObjectReference sliceRef(const std::string& name) {
  return {"resource.k8s.io/v1", "ResourceSlice", "", name, "uid-" + name};
}

class EventRecorderTest : public ::testing::Test {
 protected:
  std::unique_ptr<EventRecorder> start(EventRecorderOptions o = {}) {
    o.api = &api_;
    o.clock = &clock_;
    o.reporting_instance = "replica-a";
    o.qps = 0;  // the sender's rate limit has a test of its own below
    o.observer = [this](std::string_view reason, EventResult result) {
      std::lock_guard lock(mu_);
      results_[std::string(reason) + "/" + std::string(eventResultName(result))]++;
    };
    auto r = EventRecorder::create(std::move(o));
    EXPECT_TRUE(r.ok()) << r.status().toString();
    return std::move(*r);
  }
  int result(const std::string& key) {
    std::lock_guard lock(mu_);
    return results_[key];
  }

  FakeClock clock_;
  FakeKubeApi api_{clock_};
  std::mutex mu_;
  std::map<std::string, int> results_;
};

TEST_F(EventRecorderTest, EventAboutAClusterScopedObjectGoesToTheConfiguredNamespace) {
  auto r = start();
  r->record(sliceRef("slice-a"), EventRecorder::kNormal, "ForeignChangeReverted", "Update",
            "kubectl-edit changed it");
  ASSERT_TRUE(r->waitIdleForTest());
  const auto events = api_.events();
  ASSERT_EQ(events.size(), 1U);
  const Event& e = events[0];
  EXPECT_EQ(e.metadata.namespace_, "default");
  EXPECT_THAT(e.metadata.name, StartsWith("slice-a."));
  EXPECT_EQ(e.regarding, sliceRef("slice-a"));
  EXPECT_EQ(e.type, "Normal");
  EXPECT_EQ(e.reason, "ForeignChangeReverted");
  EXPECT_EQ(e.action, "Update");
  EXPECT_EQ(e.note, "kubectl-edit changed it");
  EXPECT_EQ(e.reporting_controller, "resourceslice-controller");
  EXPECT_EQ(e.reporting_instance, "replica-a");
  EXPECT_FALSE(e.event_time.empty());
  EXPECT_FALSE(e.series.has_value());
  EXPECT_EQ(result("ForeignChangeReverted/created"), 1);

  // A namespaced object's Events stay in its namespace.
  r->record({"coordination.k8s.io/v1", "Lease", "kube-system", "rsc", ""}, EventRecorder::kNormal,
            "LeaderElected", "Acquire", "replica-a leads");
  ASSERT_TRUE(r->waitIdleForTest());
  ASSERT_EQ(api_.events().size(), 2U);
  EXPECT_EQ(api_.events()[1].metadata.namespace_, "kube-system");
}

TEST_F(EventRecorderTest, RepeatWithinTheWindowCountsInTheSeriesAndAfterItStartsANewEvent) {
  auto r = start();
  for (int i = 0; i < 3; ++i) {
    r->record(sliceRef("slice-a"), EventRecorder::kNormal, "ForeignChangeReverted", "Update",
              "note " + std::to_string(i));
    ASSERT_TRUE(r->waitIdleForTest());
    clock_.advance(1min);
  }
  auto events = api_.events();
  ASSERT_EQ(events.size(), 1U);
  ASSERT_TRUE(events[0].series.has_value());
  EXPECT_EQ(events[0].series->count, 3);
  EXPECT_EQ(events[0].series->last_observed_time, formatMicroTime(clock_.systemNow() - 1min));
  EXPECT_EQ(result("ForeignChangeReverted/created"), 1);
  EXPECT_EQ(result("ForeignChangeReverted/series"), 2);

  // Another reason about the same object is another Event.
  r->record(sliceRef("slice-a"), EventRecorder::kWarning, "PublishFailed", "Update", "refused");
  ASSERT_TRUE(r->waitIdleForTest());
  EXPECT_EQ(api_.events().size(), 2U);

  // Six minutes after the last repeat the series has ended.
  clock_.advance(kDefaultEventSeriesWindow);
  r->record(sliceRef("slice-a"), EventRecorder::kNormal, "ForeignChangeReverted", "Update", "x");
  ASSERT_TRUE(r->waitIdleForTest());
  events = api_.events();
  ASSERT_EQ(events.size(), 3U);
  EXPECT_FALSE(events[2].series.has_value());
  EXPECT_NE(events[2].metadata.name, events[0].metadata.name);
}

TEST_F(EventRecorderTest, SeriesOfAnEventTheServerDeletedStartsANewEvent) {
  auto r = start();
  api_.prependReactor("patch", "events", [](FakeKubeApi::Request& req) {
    return Status{StatusCode::kNotFound, "events \"" + req.name + "\" not found", {}, "NotFound"};
  });
  for (int i = 0; i < 2; ++i) {
    r->record(sliceRef("slice-a"), EventRecorder::kNormal, "SlicesAdopted", "Adopt", "n");
    ASSERT_TRUE(r->waitIdleForTest());
  }
  EXPECT_EQ(api_.events().size(), 2U);
  EXPECT_EQ(result("SlicesAdopted/created"), 2);
}

TEST_F(EventRecorderTest, SpamFilterLetsClientGosBurstPassThenOneEveryFiveMinutes) {
  auto r = start();
  const int burst = kDefaultEventSpamBurst;
  for (int i = 0; i < burst + 2; ++i) {
    r->record(sliceRef("slice-a"), EventRecorder::kNormal, "ForeignChangeReverted", "Update", "n");
  }
  ASSERT_TRUE(r->waitIdleForTest());
  EXPECT_EQ(result("ForeignChangeReverted/created") + result("ForeignChangeReverted/series"),
            burst);
  EXPECT_EQ(result("ForeignChangeReverted/spam_filtered"), 2);
  // Other objects, and other reasons of the same object, have buckets of
  // their own.
  r->record(sliceRef("slice-b"), EventRecorder::kNormal, "ForeignChangeReverted", "Update", "n");
  r->record(sliceRef("slice-a"), EventRecorder::kNormal, "SlicesAdopted", "Adopt", "n");
  ASSERT_TRUE(r->waitIdleForTest());
  EXPECT_EQ(result("ForeignChangeReverted/spam_filtered"), 2);
  EXPECT_EQ(result("SlicesAdopted/created"), 1);

  // One token comes back every five minutes.
  clock_.advance(299s);
  r->record(sliceRef("slice-a"), EventRecorder::kNormal, "ForeignChangeReverted", "Update", "n");
  clock_.advance(1s);
  r->record(sliceRef("slice-a"), EventRecorder::kNormal, "ForeignChangeReverted", "Update", "n");
  r->record(sliceRef("slice-a"), EventRecorder::kNormal, "ForeignChangeReverted", "Update", "n");
  ASSERT_TRUE(r->waitIdleForTest());
  EXPECT_EQ(result("ForeignChangeReverted/spam_filtered"), 4);
}

TEST_F(EventRecorderTest, RecordNeverWaitsForTheApiServerAndAFullQueueDropsAndCounts) {
  EventRecorderOptions o;
  o.queue_size = 2;
  auto r = start(o);
  // Holds the sender inside the fake's create until opened.
  Gate gate;
  gate.close();
  api_.prependReactor("create", "events", [&](FakeKubeApi::Request&) {
    gate.pass();
    return okStatus();
  });
  r->record(sliceRef("s0"), EventRecorder::kNormal, "SlicesAdopted", "Adopt", "n");
  ASSERT_TRUE(gate.waitHeld());
  // The sender is stuck in the API call: record() still returns at once.
  for (int i = 1; i <= 5; ++i) {
    r->record(sliceRef("s" + std::to_string(i)), EventRecorder::kNormal, "SlicesAdopted", "Adopt",
              "n");
  }
  EXPECT_EQ(result("SlicesAdopted/queue_full"), 3);
  gate.open();
  ASSERT_TRUE(r->waitIdleForTest());
  EXPECT_EQ(api_.events().size(), 3U);
  EXPECT_EQ(result("SlicesAdopted/created"), 3);
}

TEST_F(EventRecorderTest, ErrorsAreCountedAndTheNextEventIsSent) {
  auto r = start();
  api_.prependReactor("create", "events", [](FakeKubeApi::Request& req) {
    if (req.name.rfind("bad.", 0) == 0) return Status{StatusCode::kPermissionDenied, "forbidden"};
    return okStatus();
  });
  r->record(sliceRef("bad"), EventRecorder::kWarning, "PublishFailed", "Update", "n");
  r->record(sliceRef("good"), EventRecorder::kWarning, "PublishFailed", "Update", "n");
  ASSERT_TRUE(r->waitIdleForTest());
  EXPECT_EQ(result("PublishFailed/error"), 1);
  EXPECT_EQ(result("PublishFailed/created"), 1);
}

TEST_F(EventRecorderTest, StopSendsWhatIsQueuedUntilTheFlushTimeoutThenDrops) {
  auto r = start();
  Gate gate;
  gate.close();
  // Each create takes three seconds of the fake clock; the flush timeout is two.
  api_.prependReactor("create", "events", [&](FakeKubeApi::Request&) {
    clock_.advance(3s);
    gate.pass();
    return okStatus();
  });
  for (int i = 0; i < 3; ++i) {
    r->record(sliceRef("s" + std::to_string(i)), EventRecorder::kNormal, "SlicesAdopted", "Adopt",
              "n");
  }
  ASSERT_TRUE(gate.waitHeld());
  r->requestStop();
  r->record(sliceRef("late"), EventRecorder::kNormal, "SlicesAdopted", "Adopt", "n");
  EXPECT_EQ(result("SlicesAdopted/shutdown"), 1);
  gate.open();
  r->stop();
  // s0 was under way; s1 went within the flush timeout; s2 came after it.
  EXPECT_EQ(api_.events().size(), 2U);
  EXPECT_EQ(result("SlicesAdopted/created"), 2);
  EXPECT_EQ(result("SlicesAdopted/shutdown"), 2);
  r->stop();  // idempotent
}

TEST_F(EventRecorderTest, SenderRateLimitWaitsOnTheClock) {
  EventRecorderOptions o;
  o.api = &api_;
  o.clock = &clock_;
  o.reporting_instance = "replica-a";
  o.qps = 1;
  o.burst = 2;
  auto limited = EventRecorder::create(o);
  ASSERT_TRUE(limited.ok());
  for (int i = 0; i < 4; ++i) {
    (*limited)->record(sliceRef("s" + std::to_string(i)), EventRecorder::kNormal, "SlicesAdopted",
                       "Adopt", "n");
  }
  ASSERT_TRUE((*limited)->waitIdleForTest());
  EXPECT_EQ(api_.events().size(), 4U);
  // Two from the burst, then one a second: the sender slept twice.
  EXPECT_EQ(clock_.sleeps().size(), 2U);
}

TEST_F(EventRecorderTest, OptionsThatCannotWorkAreRefusedNamingThem) {
  EventRecorderOptions o;
  o.api = &api_;
  o.clock = &clock_;
  auto r = EventRecorder::create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("reporting instance"));
  o.reporting_instance = "x";
  o.queue_size = 0;
  r = EventRecorder::create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("queue size"));
}

}  // namespace
}  // namespace rsc::client
