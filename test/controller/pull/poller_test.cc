#include "controller/pull/poller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <fstream>
#include <map>
#include <thread>

#include "common/strings.h"
#include "test/controller/pull/scripted_transport.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/gate.h"

namespace rsc::controller::pull {
namespace {

using std::chrono::seconds;
using testing::FakeClock;

constexpr char kDriver[] = "nic.example.com";
constexpr char kSource[] = "flag/nic.example.com";

SourceSpec configured(const std::string& driver, const std::string& url) {
  SourceSpec spec;
  spec.driver = driver;
  spec.id = "flag/" + driver;
  spec.url = url;
  spec.caller.unrestricted = true;
  return spec;
}
constexpr char kOnePool[] = R"({"pools": {"p1": {"allNodes": true, "devices": [{"name": "d0"}]}}})";
constexpr char kTwoPools[] = R"({"pools": {"p1": {"allNodes": true, "devices": [{"name": "d0"}]},
                                         "p2": {"allNodes": true, "devices": [{"name": "d1"}]}}})";
// p1 changed, and p2 not a valid pool: must change nothing.
constexpr char kPartlyBad[] = R"({"pools": {"p1": {"allNodes": true, "devices": [{"name": "d9"}]},
                                          "p2": {"allNodes": true, "devices": [{"name": "D_1"}]}}})";

class PollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.setChangeListener([this](const reconcile::PoolKey&) { ++changes_; });
  }

  std::unique_ptr<Poller> make(Clock& clock, Clock::Duration grace = Clock::Duration::zero()) {
    PollerOptions options;
    options.store = &store_;
    options.clock = &clock;
    options.interval = seconds(30);
    options.grace = grace;
    options.random = [] { return 0.5; };
    options.sources.push_back(configured(kDriver, "http://driver.test:8080"));
    options.transport = [this](const SourceSpec&, const SourceUrl&) {
      return StatusOr<std::shared_ptr<client::HttpTransport>>(transport_);
    };
    options.observer.on_fetch = [this](const std::string&, std::string_view result,
                                       Clock::Duration) { results_.emplace_back(result); };
    options.observer.on_expired = [this](const std::string&, size_t expired) {
      expired_.push_back(expired);
    };
    auto made = Poller::create(std::move(options));
    EXPECT_TRUE(made.ok()) << made.status().toString();
    return made.ok() ? std::move(*made) : nullptr;
  }

  std::optional<Status> lastError(const std::string& pool) const {
    auto s = store_.status({kDriver, pool});
    if (!s) return std::nullopt;
    return s->last_error;
  }

  FakeClock clock_;
  reconcile::DesiredStore store_{clock_};
  std::shared_ptr<ScriptedTransport> transport_ = std::make_shared<ScriptedTransport>();
  std::atomic<int> changes_{0};
  std::vector<std::string> results_;
  std::vector<size_t> expired_;
};

TEST_F(PollerTest, AnswerReplacesTheDriversPoolsAsAPushWould) {
  auto poller = make(clock_);
  transport_->addBody(200, kTwoPools, {{"etag", "\"v1\""}});
  poller->pollOnce(kSource);
  EXPECT_EQ(store_.keys(kDriver).size(), 2u);
  EXPECT_EQ(changes_, 2);
  // Pools left out are withdrawn, as with PUT /v1/drivers/{driver}.
  transport_->addBody(200, kOnePool, {{"etag", "\"v2\""}});
  poller->pollOnce(kSource);
  ASSERT_EQ(store_.keys(kDriver).size(), 1u);
  EXPECT_EQ(store_.keys(kDriver)[0].pool, "p1");
  EXPECT_EQ(results_, (std::vector<std::string>{"ok", "ok"}));
}

TEST_F(PollerTest, NotModifiedCostsNoReconcile) {
  auto poller = make(clock_);
  transport_->addBody(200, kOnePool, {{"etag", "\"v1\""}});
  poller->pollOnce(kSource);
  ASSERT_EQ(changes_, 1);
  const uint64_t version = store_.get({kDriver, "p1"})->version;
  transport_->addBody(304, "");
  poller->pollOnce(kSource);
  EXPECT_EQ(changes_, 1);
  EXPECT_EQ(store_.get({kDriver, "p1"})->version, version);
  const auto requests = transport_->requests();
  ASSERT_EQ(requests.size(), 2u);
  ASSERT_EQ(requests[1].headers.size(), 1u);
  EXPECT_EQ(requests[1].headers[0].second, "\"v1\"");
  EXPECT_EQ(results_, (std::vector<std::string>{"ok", "unchanged"}));
}

TEST_F(PollerTest, SameContentWithoutEtagCostsNoReconcile) {
  auto poller = make(clock_);
  transport_->addBody(200, kOnePool);
  transport_->addBody(200, kOnePool);
  poller->pollOnce(kSource);
  poller->pollOnce(kSource);
  EXPECT_EQ(changes_, 1);
  EXPECT_TRUE(transport_->requests()[1].headers.empty());
}

TEST_F(PollerTest, BadAnswerChangesNothingAndIsThePoolsStatus) {
  auto poller = make(clock_);
  transport_->addBody(200, kOnePool, {{"etag", "\"v1\""}});
  poller->pollOnce(kSource);
  const auto before = store_.get({kDriver, "p1"});
  transport_->addBody(200, kPartlyBad, {{"etag", "\"v2\""}});
  poller->pollOnce(kSource);
  EXPECT_EQ(store_.get({kDriver, "p1"}), before) << "nothing of a bad answer is applied";
  EXPECT_EQ(store_.keys(kDriver).size(), 1u);
  EXPECT_EQ(changes_, 1);
  std::optional<Status> error = lastError("p1");
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->reason(), kReasonSourceFailed);
  EXPECT_NE(error->message().find("http://driver.test:8080"), std::string::npos)
      << error->message();
  EXPECT_NE(error->message().find("pools[\"p2\"].devices[0].name"), std::string::npos)
      << error->message();
  EXPECT_EQ(results_.back(), kReasonInvalid);
  // The ETag of what is applied is still the one sent.
  transport_->addBody(304, "");
  poller->pollOnce(kSource);
  EXPECT_EQ(transport_->requests()[2].headers[0].second, "\"v1\"");
  EXPECT_TRUE(lastError("p1")->ok()) << "the source answers again: its error goes";
}

TEST_F(PollerTest, SourceFailingPastTheGraceHasItsPoolsWithdrawn) {
  auto poller = make(clock_);  // grace: 3 x 30 s
  transport_->addBody(200, kOnePool, {{"etag", "\"v1\""}});
  poller->pollOnce(kSource);
  for (int i = 0; i < 3; ++i) {
    clock_.advance(seconds(29));
    transport_->addError(unavailable("driver.test:8080: Connection refused"));
    poller->pollOnce(kSource);
    EXPECT_EQ(store_.keys(kDriver).size(), 1u) << "within the grace, after " << (i + 1) * 29 << "s";
  }
  EXPECT_TRUE(expired_.empty());
  EXPECT_EQ(lastError("p1")->reason(), kReasonSourceFailed);
  clock_.advance(seconds(4));  // 91 s since the last success
  transport_->addError(unavailable("driver.test:8080: Connection refused"));
  poller->pollOnce(kSource);
  EXPECT_TRUE(store_.keys(kDriver).empty());
  EXPECT_EQ(expired_, std::vector<size_t>{1});
  EXPECT_EQ(results_.back(), kReasonUnreachable);

  // Back: the whole inventory is asked for again (the ETag went with the pools).
  transport_->addBody(200, kOnePool, {{"etag", "\"v1\""}});
  poller->pollOnce(kSource);
  EXPECT_TRUE(transport_->requests().back().headers.empty());
  EXPECT_EQ(store_.keys(kDriver).size(), 1u);
  EXPECT_EQ(expired_, (std::vector<size_t>{1, 0}));
}

TEST_F(PollerTest, GraceIsConfigurable) {
  auto poller = make(clock_, seconds(40));
  transport_->addBody(200, kOnePool);
  poller->pollOnce(kSource);
  clock_.advance(seconds(41));
  transport_->addBody(500, "down");
  poller->pollOnce(kSource);
  EXPECT_TRUE(store_.keys(kDriver).empty());
}

TEST_F(PollerTest, NotModifiedRenewsLeasedPools) {
  auto poller = make(clock_);
  transport_->addBody(
      200,
      R"({"pools": {"p1": {"allNodes": true, "leaseSeconds": 60, "devices": [{"name": "d0"}]}}})",
      {{"etag", "\"v1\""}});
  poller->pollOnce(kSource);
  for (int i = 0; i < 4; ++i) {
    clock_.advance(seconds(30));
    transport_->addBody(304, "");
    poller->pollOnce(kSource);
    EXPECT_TRUE(store_.expireLeases().empty()) << "after " << (i + 1) * 30 << "s";
  }
  EXPECT_EQ(store_.keys(kDriver).size(), 1u);
}

TEST_F(PollerTest, WaitIsTheIntervalWithJitter) {
  auto poller = make(clock_);
  transport_->addBody(200, kOnePool);
  EXPECT_EQ(poller->pollOnce(kSource), seconds(30) + std::chrono::milliseconds(1500));
  transport_->addError(unavailable("down"));
  EXPECT_EQ(poller->pollOnce(kSource), seconds(30) + std::chrono::milliseconds(1500));
}

TEST_F(PollerTest, KnowsWhichDriversItPulls) {
  auto poller = make(clock_);
  EXPECT_TRUE(poller->pulls(kDriver));
  EXPECT_FALSE(poller->pulls("gpu.example.com"));
}

// Discovered sources: several per driver, each with its own transport.
class DiscoveredSourcesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_.setChangeListener([this](const reconcile::PoolKey&) { ++changes_; });
    PollerOptions options;
    options.store = &store_;
    options.clock = &clock_;
    options.interval = seconds(30);
    options.random = [] { return 0.0; };
    options.max_sources = 3;
    options.transport = [this](const SourceSpec& spec, const SourceUrl&) {
      auto& transport = transports_[spec.id];
      if (!transport) transport = std::make_shared<ScriptedTransport>();
      return StatusOr<std::shared_ptr<client::HttpTransport>>(transport);
    };
    options.observer.on_fetch = [this](const std::string&, std::string_view result,
                                       Clock::Duration) { results_.emplace_back(result); };
    options.observer.on_sources = [this](const std::string& driver, size_t n) {
      sources_[driver] = n;
    };
    options.observer.on_ignored = [this](IgnoredReason reason) {
      ignored_.emplace_back(ignoredReasonName(reason));
    };
    auto made = Poller::create(std::move(options));
    ASSERT_TRUE(made.ok()) << made.status().toString();
    poller_ = std::move(*made);
  }

  // An endpoint of a node-local Service on `node`.
  static SourceSpec endpoint(const std::string& address, const std::string& node) {
    SourceSpec spec;
    spec.driver = kDriver;
    spec.id = "dra/nic-inventory/" + address + ":9000";
    spec.url = "http://" + address + ":9000/v1/inventory";
    spec.caller.node_name = node;
    spec.caller.subject = "the endpoint";
    return spec;
  }
  static std::string nodePool(const std::string& node, const std::string& device = "d0") {
    return R"({"pools": {")" + node + R"(": {"nodeName": ")" + node +
           R"(", "devices": [{"name": ")" + device + R"("}]}}})";
  }
  ScriptedTransport& transport(const SourceSpec& spec) { return *transports_.at(spec.id); }
  std::vector<std::string> pools() const {
    std::vector<std::string> names;
    for (const auto& key : store_.keys(kDriver)) names.push_back(key.pool);
    return names;
  }

  FakeClock clock_;
  reconcile::DesiredStore store_{clock_};
  std::map<std::string, std::shared_ptr<ScriptedTransport>> transports_;
  std::unique_ptr<Poller> poller_;
  std::atomic<int> changes_{0};
  std::vector<std::string> results_;
  std::map<std::string, size_t> sources_;
  std::vector<std::string> ignored_;
  pool::BodyProblems problems_;
};

TEST_F(DiscoveredSourcesTest, TheDriversPoolsAreTheUnionOfItsEndpoints) {
  const SourceSpec a = endpoint("10.0.0.1", "node-a");
  const SourceSpec b = endpoint("10.0.0.2", "node-b");
  poller_->setDiscovered({a, b});
  EXPECT_TRUE(poller_->pulls(kDriver));
  EXPECT_EQ(sources_[kDriver], 2u);
  transport(a).addBody(200, nodePool("node-a"));
  transport(b).addBody(200, nodePool("node-b"));
  poller_->pollOnce(a.id);
  poller_->pollOnce(b.id);
  EXPECT_EQ(pools(), (std::vector<std::string>{"node-a", "node-b"}));
  // One endpoint's answer changes only its own pools.
  transport(a).addBody(200, nodePool("node-a", "d1"));
  const uint64_t b_version = store_.get({kDriver, "node-b"})->version;
  poller_->pollOnce(a.id);
  EXPECT_EQ(store_.get({kDriver, "node-b"})->version, b_version);
  EXPECT_EQ(changes_, 3);
}

TEST_F(DiscoveredSourcesTest, ANodeLocalEndpointServingAnotherNodesPoolIsRefusedWhole) {
  const SourceSpec a = endpoint("10.0.0.1", "node-a");
  poller_->setDiscovered({a});
  transport(a).addBody(200, R"({"pools": {
      "node-a": {"nodeName": "node-a", "devices": [{"name": "d0"}]},
      "node-b": {"nodeName": "node-b", "devices": [{"name": "d0"}]}}})");
  poller_->pollOnce(a.id);
  EXPECT_TRUE(pools().empty()) << "nothing of a refused answer is applied";
  EXPECT_EQ(results_, std::vector<std::string>{kReasonForbidden});
  // Placed by a selector: also not a node-local endpoint's to publish.
  transport(a).addBody(200, R"({"pools": {"p": {"allNodes": true, "devices": [{"name": "d0"}]}}})");
  poller_->pollOnce(a.id);
  EXPECT_TRUE(pools().empty());
  EXPECT_EQ(results_.back(), kReasonForbidden);
  transport(a).addBody(200, nodePool("node-a"));
  poller_->pollOnce(a.id);
  EXPECT_EQ(pools(), std::vector<std::string>{"node-a"});
}

TEST_F(DiscoveredSourcesTest, ADepartedEndpointsPoolsGoAfterTheGraceUnlessItComesBack) {
  const SourceSpec a = endpoint("10.0.0.1", "node-a");
  const SourceSpec b = endpoint("10.0.0.2", "node-b");
  poller_->setDiscovered({a, b});
  transport(a).addBody(200, nodePool("node-a"));
  transport(b).addBody(200, nodePool("node-b"));
  poller_->pollOnce(a.id);
  poller_->pollOnce(b.id);
  // b leaves and comes back within the grace: nothing changes, and it is fetched again.
  poller_->setDiscovered({a});
  EXPECT_EQ(poller_->pollOnce(b.id), seconds(30)) << "nothing fetched; looked at every interval";
  EXPECT_EQ(transport(b).requests().size(), 1u);
  clock_.advance(seconds(60));
  poller_->setDiscovered({a, b});
  transport(b).addBody(304, "");
  poller_->pollOnce(b.id);
  EXPECT_EQ(results_.back(), "unchanged");
  EXPECT_EQ(pools(), (std::vector<std::string>{"node-a", "node-b"}));
  // b leaves for good: its pools stay for the grace, then go, and so does the source.
  poller_->setDiscovered({a});
  clock_.advance(seconds(89));
  poller_->pollOnce(b.id);
  EXPECT_EQ(pools(), (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ(store_.status({kDriver, "node-b"})->last_error.reason(), kReasonSourceFailed);
  clock_.advance(seconds(1));
  poller_->pollOnce(b.id);
  EXPECT_EQ(pools(), std::vector<std::string>{"node-a"});
  EXPECT_EQ(poller_->sourceIds(), std::vector<std::string>{a.id});
  EXPECT_EQ(sources_[kDriver], 1u);
  // The last one leaves: the driver is not pulled any more.
  poller_->setDiscovered({});
  clock_.advance(seconds(90));
  poller_->pollOnce(a.id);
  EXPECT_TRUE(pools().empty());
  EXPECT_FALSE(poller_->pulls(kDriver));
  EXPECT_EQ(sources_[kDriver], 0u);
}

TEST_F(DiscoveredSourcesTest, ARollingUpdateOfTheEndpointsWritesNothing) {
  // Two replicas of a central endpoint serve the same pool; one is replaced by a new pod.
  SourceSpec old_pod = endpoint("10.0.0.1", "");
  old_pod.caller = {};
  SourceSpec new_pod = endpoint("10.0.0.9", "");
  new_pod.caller = {};
  constexpr char kShared[] = R"({"pools": {"p": {"allNodes": true, "devices": [{"name": "d0"}]}}})";
  poller_->setDiscovered({old_pod});
  transport(old_pod).addBody(200, kShared);
  poller_->pollOnce(old_pod.id);
  ASSERT_EQ(changes_, 1);
  poller_->setDiscovered({new_pod});
  transport(new_pod).addBody(200, kShared);
  poller_->pollOnce(new_pod.id);
  clock_.advance(seconds(90));
  poller_->pollOnce(old_pod.id);
  EXPECT_EQ(pools(), std::vector<std::string>{"p"});
  EXPECT_EQ(changes_, 1) << "the same content from the new pod costs no reconcile";
}

TEST_F(DiscoveredSourcesTest, AHealthySourceWinsASharedPoolFromAFailingOne) {
  SourceSpec first = endpoint("10.0.0.1", "");
  first.caller = {};
  SourceSpec second = endpoint("10.0.0.2", "");
  second.caller = {};
  poller_->setDiscovered({first, second});
  transport(first).addBody(200,
                           R"({"pools": {"p": {"allNodes": true, "devices": [{"name": "a"}]}}})");
  transport(second).addBody(200,
                            R"({"pools": {"p": {"allNodes": true, "devices": [{"name": "b"}]}}})");
  poller_->pollOnce(first.id);
  poller_->pollOnce(second.id);
  const auto device = [&] { return store_.get({kDriver, "p"})->pool.devices.at(0)->name(); };
  EXPECT_EQ(device(), "a") << "the source known longest";
  transport(first).addError(unavailable("refused"));
  poller_->pollOnce(first.id);
  EXPECT_EQ(device(), "b") << "the healthy source";
  EXPECT_TRUE(store_.status({kDriver, "p"})->last_error.ok())
      << "the failing source does not report on a pool a healthy one serves";
  transport(first).addBody(304, "");
  poller_->pollOnce(first.id);
  EXPECT_EQ(device(), "a");
}

TEST_F(DiscoveredSourcesTest, ADriverThatPushesIsNotPulledUntilItsPushedPoolsAreGone) {
  auto pushed = pool::decodeDriverInventory(
      pool::Json::parse(
          R"({"pools": {"pushed": {"allNodes": true, "devices": [{"name": "d0"}]}}})"),
      std::nullopt, problems_);
  store_.put({kDriver, "pushed"}, pushed.at("pushed"));
  const SourceSpec a = endpoint("10.0.0.1", "node-a");
  poller_->setDiscovered({a});
  EXPECT_FALSE(poller_->pulls(kDriver)) << "pushes go on";
  transport(a).addBody(200, nodePool("node-a"));
  poller_->pollOnce(a.id);
  EXPECT_EQ(results_, std::vector<std::string>{kReasonConflict});
  EXPECT_EQ(pools(), std::vector<std::string>{"pushed"});
  store_.remove({kDriver, "pushed"});
  transport(a).addBody(200, nodePool("node-a"));
  poller_->pollOnce(a.id);
  EXPECT_EQ(results_.back(), "ok");
  EXPECT_TRUE(poller_->pulls(kDriver));
  EXPECT_EQ(pools(), std::vector<std::string>{"node-a"});
}

TEST_F(DiscoveredSourcesTest, SourcesPastTheLimitAreIgnoredAndCounted) {
  poller_->setDiscovered({endpoint("10.0.0.1", "a"), endpoint("10.0.0.2", "b"),
                          endpoint("10.0.0.3", "c"), endpoint("10.0.0.4", "d")});
  EXPECT_EQ(poller_->sourceIds().size(), 3u);
  EXPECT_EQ(ignored_, std::vector<std::string>{"OverLimit"});
  SourceSpec bad = endpoint("10.0.0.5", "e");
  bad.url = "gopher://10.0.0.5";
  poller_->setDiscovered({endpoint("10.0.0.1", "a"), bad});
  EXPECT_EQ(ignored_, (std::vector<std::string>{"OverLimit", "Invalid"}));
}

TEST_F(DiscoveredSourcesTest, AChangedSpecReplacesTheSourceWithoutLosingItsPools) {
  const SourceSpec a = endpoint("10.0.0.1", "node-a");
  poller_->setDiscovered({a});
  transport(a).addBody(200, nodePool("node-a"));
  poller_->pollOnce(a.id);
  SourceSpec moved = a;
  moved.url = "http://10.0.0.1:9000/v2/inventory";
  transports_.erase(a.id);
  poller_->setDiscovered({moved});
  EXPECT_EQ(pools(), std::vector<std::string>{"node-a"});
  transport(moved).addBody(200, nodePool("node-a"));
  poller_->pollOnce(moved.id);
  EXPECT_EQ(transport(moved).requests().at(0).path_and_query, "/v2/inventory");
  EXPECT_EQ(changes_, 1);
  EXPECT_EQ(poller_->sourceIds().size(), 2u) << "the old one until its grace is over";
}

// The schedule: start() and the workers, with a blocking FakeClock (time moves only when the
// test says) and transports that record when each source's fetch runs.
class SchedulerTest : public ::testing::Test {
 protected:
  // What the fetches did, over every source.
  struct Record {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::string> started;  // source ids, in the order their fetches began
    std::map<std::string, int> running;
    size_t running_now = 0;
    size_t most_at_once = 0;
    bool twice_at_once = false;  // one source fetched twice at once
    size_t ended = 0;
    size_t abandoned = 0;  // ended by the stop token

    bool waitEnded(size_t n) {
      std::unique_lock lock(mu);
      return cv.wait_for(lock, std::chrono::seconds(10), [&] { return ended >= n; });
    }
  };

  // Answers every fetch with one pool at once, or, while the source's gate is closed, holds it
  // there until the gate opens or the fetch is stopped.
  class RecordingTransport final : public client::HttpTransport {
   public:
    RecordingTransport(std::string id, Record& record, testing::Gate* gate)
        : id_(std::move(id)), record_(record), gate_(gate) {}

    StatusOr<client::HttpResponse> send(const client::HttpRequest&) override {
      return internalError("RecordingTransport: send() is not used");
    }
    StatusOr<client::HttpResponse> stream(
        const client::HttpRequest&, const std::function<void(const client::HttpResponse&)>& on_head,
        const std::function<bool(std::string_view)>& on_chunk, std::stop_token stop) override {
      {
        std::lock_guard lock(record_.mu);
        record_.started.push_back(id_);
        if (++record_.running[id_] > 1) record_.twice_at_once = true;
        record_.most_at_once = std::max(record_.most_at_once, ++record_.running_now);
      }
      if (gate_ != nullptr) gate_->pass(stop);
      const bool stopped = stop.stop_requested();
      StatusOr<client::HttpResponse> result = cancelled("fetch stopped");
      if (!stopped) {
        client::HttpResponse head;
        head.code = 200;
        if (on_head) on_head(head);
        on_chunk(R"({"pools": {"p": {"allNodes": true, "devices": [{"name": "d0"}]}}})");
        result = head;
      }
      std::lock_guard lock(record_.mu);
      --record_.running[id_];
      --record_.running_now;
      ++record_.ended;
      if (stopped) ++record_.abandoned;
      record_.cv.notify_all();
      return result;
    }
    std::string host() const override { return id_; }

   private:
    const std::string id_;
    Record& record_;
    testing::Gate* const gate_;
  };

  // A source of its own driver, so that sources do not share pools.
  static SourceSpec source(int i) {
    SourceSpec spec;
    spec.driver = "d" + std::to_string(i) + ".example.com";
    spec.id = "ns/svc/10.0.0." + std::to_string(i) + ":9000";
    spec.url = "http://10.0.0." + std::to_string(i) + ":9000/v1/inventory";
    return spec;
  }
  static std::vector<SourceSpec> sources(int n) {
    std::vector<SourceSpec> specs;
    for (int i = 0; i < n; ++i) specs.push_back(source(i));
    return specs;
  }

  void make(
      size_t concurrency, std::function<double()> random = [] { return 0.0; }) {
    PollerOptions options;
    options.store = &store_;
    options.clock = &clock_;
    options.interval = seconds(30);
    options.concurrency = concurrency;
    options.random = std::move(random);
    options.transport = [this](const SourceSpec& spec, const SourceUrl&) {
      testing::Gate* gate = gates_.contains(spec.id) ? &gates_[spec.id] : nullptr;
      return StatusOr<std::shared_ptr<client::HttpTransport>>(
          std::make_shared<RecordingTransport>(spec.id, record_, gate));
    };
    options.observer.on_fetch_delay = [this](Clock::Duration late) { delays_.push_back(late); };
    options.observer.on_waiting = [this](size_t waiting) { waiting_.push_back(waiting); };
    auto made = Poller::create(std::move(options));
    ASSERT_TRUE(made.ok()) << made.status().toString();
    poller_ = std::move(*made);
  }

  // Waits until every due fetch has run and the timer waits for the next due time.
  void settle() {
    ASSERT_TRUE(clock_.waitForSleepers(1));
    ASSERT_TRUE(poller_->waitIdleForTest());
  }
  size_t fetches() {
    std::lock_guard lock(record_.mu);
    return record_.started.size();
  }
  std::vector<std::string> started() {
    std::lock_guard lock(record_.mu);
    return record_.started;
  }

  // The threads of this process now (/proc/self/status), counted by the kernel.
  static int threads() {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("Threads:")) return std::stoi(line.substr(8));
    }
    return -1;
  }

  void TearDown() override {
    for (auto& [id, gate] : gates_) gate.open();
    if (poller_) poller_->stop();
  }

  FakeClock clock_{FakeClock::Sleeps::kBlock};
  reconcile::DesiredStore store_{clock_};
  Record record_;
  std::map<std::string, testing::Gate> gates_;  // sources whose fetches a test holds
  std::vector<Clock::Duration> delays_;         // under the Poller's lock
  std::vector<size_t> waiting_;                 // under the Poller's lock
  std::unique_ptr<Poller> poller_;
};

TEST_F(SchedulerTest, ManySourcesShareAFewThreadsAndAreFetchedAtOnceThenEveryInterval) {
  make(3);
  poller_->setDiscovered(sources(200));
  poller_->start();
  settle();
  const int running = threads();
  EXPECT_EQ(fetches(), 200u) << "each source at once";
  EXPECT_EQ(store_.keys().size(), 200u);
  // The interval counts from the end of each fetch; no fetch before it is over.
  clock_.advance(seconds(29));
  settle();
  EXPECT_EQ(fetches(), 200u);
  clock_.advance(seconds(1));
  settle();
  EXPECT_EQ(fetches(), 400u);
  // A source that appears while started is fetched at once.
  poller_->setDiscovered(sources(201));
  settle();
  EXPECT_EQ(started().back(), source(200).id);
  EXPECT_EQ(fetches(), 401u);
  // Counted as the workers end (a sanitizer may start a thread of its own with the first).
  clock_.stopBlocking();
  poller_->stop();
  EXPECT_EQ(running - threads(), 3) << "three workers (one of them the timer), for 201 sources";
  std::lock_guard lock(record_.mu);
  EXPECT_LE(record_.most_at_once, 3u);
  EXPECT_FALSE(record_.twice_at_once);
}

TEST_F(SchedulerTest, DueSourcesAreFetchedInDueOrder) {
  // The jitter of each fetch's next wait, in turn: a, b, c are due again at +2.7 s, +0.3 s and
  // +1.5 s past the interval.
  auto next = std::make_shared<std::atomic<int>>(0);
  make(1, [next] {
    constexpr double kJitters[] = {0.9, 0.1, 0.5};
    return kJitters[next->fetch_add(1) % 3];
  });
  poller_->setDiscovered(sources(3));
  poller_->start();
  settle();
  EXPECT_EQ(started(), (std::vector<std::string>{source(0).id, source(1).id, source(2).id}))
      << "at first in the order they became known";
  clock_.advance(seconds(40));
  settle();
  EXPECT_EQ(started(), (std::vector<std::string>{source(0).id, source(1).id, source(2).id,
                                                 source(1).id, source(2).id, source(0).id}));
}

TEST_F(SchedulerTest, ASlowSourceHoldsOneWorkerAndTheOthersGoOn) {
  gates_[source(0).id].close();
  make(2);
  poller_->setDiscovered(sources(6));
  poller_->start();
  ASSERT_TRUE(gates_[source(0).id].waitHeld());
  // The five others, on the other worker, while the slow one hangs.
  ASSERT_TRUE(record_.waitEnded(5));
  ASSERT_TRUE(poller_->waitIdleForTest(/*stepping=*/1));
  clock_.advance(seconds(30));
  ASSERT_TRUE(record_.waitEnded(10)) << "and again an interval later";
  gates_[source(0).id].open();
  settle();
  EXPECT_EQ(fetches(), 11u);
  std::lock_guard lock(record_.mu);
  EXPECT_EQ(record_.most_at_once, 2u);
  EXPECT_FALSE(record_.twice_at_once) << "the slow source is not fetched again meanwhile";
}

TEST_F(SchedulerTest, DueSourcesWaitForAFreeWorkerAndTheDelayIsCounted) {
  gates_[source(0).id].close();
  make(1);
  poller_->setDiscovered(sources(3));
  poller_->start();
  ASSERT_TRUE(gates_[source(0).id].waitHeld());
  clock_.advance(seconds(5));
  gates_[source(0).id].open();
  settle();
  EXPECT_EQ(started(), (std::vector<std::string>{source(0).id, source(1).id, source(2).id}));
  // Under the Poller's lock; it is idle now.
  EXPECT_EQ(delays_,
            (std::vector<Clock::Duration>{Clock::Duration::zero(), seconds(5), seconds(5)}));
  ASSERT_FALSE(waiting_.empty());
  EXPECT_EQ(*std::max_element(waiting_.begin(), waiting_.end()), 3u) << "all three due at start";
  EXPECT_EQ(waiting_.back(), 0u);
}

TEST_F(SchedulerTest, PollOnceWaitsForAWorkersFetchOfTheSameSource) {
  gates_[source(0).id].close();
  make(4);
  poller_->setDiscovered(sources(1));
  poller_->start();
  ASSERT_TRUE(gates_[source(0).id].waitHeld());
  std::jthread test_step([&] { poller_->pollOnce(source(0).id); });
  gates_[source(0).id].open();
  test_step.join();
  settle();
  EXPECT_EQ(fetches(), 2u);
  std::lock_guard lock(record_.mu);
  EXPECT_FALSE(record_.twice_at_once);
}

TEST_F(SchedulerTest, StopAbandonsTheFetchesUnderWayAndJoinsEveryThread) {
  gates_[source(0).id].close();
  gates_[source(1).id].close();
  make(2);
  poller_->setDiscovered(sources(3));
  poller_->start();
  ASSERT_TRUE(gates_[source(0).id].waitArrived(1));
  ASSERT_TRUE(gates_[source(1).id].waitArrived(1));
  const int running = threads();
  poller_->stop();  // the gates stay closed: only the stop token ends the fetches
  EXPECT_EQ(running - threads(), 2) << "both workers joined";
  std::lock_guard lock(record_.mu);
  EXPECT_EQ(record_.abandoned, 2u);
  EXPECT_EQ(record_.started.size(), 2u) << "the third waited for a worker and was not fetched";
}

TEST_F(SchedulerTest, ADepartedSourceIsWithdrawnAfterTheGraceAndLeavesTheSchedule) {
  make(2);
  poller_->setDiscovered(sources(2));
  poller_->start();
  settle();
  ASSERT_EQ(store_.keys().size(), 2u);
  poller_->setDiscovered({source(1)});
  // Looked at every interval; withdrawn once the grace (3 intervals) is over.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(clock_.advanceToNextWakeup());
    settle();
  }
  EXPECT_EQ(poller_->sourceIds(), std::vector<std::string>{source(1).id});
  EXPECT_EQ(store_.keys().size(), 1u);
  EXPECT_EQ(fetches(), 5u) << "the departed source is not fetched";
}

TEST(PollerOptionsTest, RefusesWhatCannotWork) {
  FakeClock clock;
  reconcile::DesiredStore store(clock);
  auto transport = std::make_shared<ScriptedTransport>();
  const auto check = [&](const std::function<void(PollerOptions&)>& change,
                         const std::string& expected) {
    PollerOptions options;
    options.store = &store;
    options.clock = &clock;
    options.sources.push_back(configured(kDriver, "http://a"));
    options.transport = [&](const SourceSpec&, const SourceUrl&) {
      return StatusOr<std::shared_ptr<client::HttpTransport>>(transport);
    };
    change(options);
    auto made = Poller::create(std::move(options));
    ASSERT_FALSE(made.ok()) << expected;
    EXPECT_NE(made.status().message().find(expected), std::string::npos) << made.status().message();
  };
  check([](PollerOptions& o) { o.sources[0].driver = "Not_A_Driver"; }, "Not_A_Driver");
  check([&](PollerOptions& o) { o.sources.push_back(configured(kDriver, "http://b")); },
        "has a source already");
  check([](PollerOptions& o) { o.grace = seconds(10); }, "--pull-grace");
  check([](PollerOptions& o) { o.interval = Clock::Duration::zero(); }, "--pull-interval");
  check([](PollerOptions& o) { o.fetch.timeout = Clock::Duration::zero(); }, "--pull-timeout");
  check([](PollerOptions& o) { o.sources[0].url = "ftp://a"; }, "http://");
  check([](PollerOptions& o) { o.concurrency = 0; }, "--pull-concurrency");
}

}  // namespace
}  // namespace rsc::controller::pull
