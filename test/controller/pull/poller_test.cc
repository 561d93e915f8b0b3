#include "controller/pull/poller.h"

#include <gtest/gtest.h>

#include <atomic>

#include "test/controller/pull/scripted_transport.h"
#include "test/fakes/fake_clock.h"

namespace rsc::controller::pull {
namespace {

using std::chrono::seconds;
using testing::FakeClock;

constexpr char kDriver[] = "nic.example.com";
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
    options.sources.push_back(
        {kDriver, "http://driver.test:8080", kDefaultInventoryPath, transport_});
    options.observer.on_fetch = [this](const std::string&, std::string_view result,
                                       Clock::Duration) { results_.emplace_back(result); };
    options.observer.on_expired = [this](const std::string&, bool expired) {
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
  std::vector<bool> expired_;
};

TEST_F(PollerTest, AnswerReplacesTheDriversPoolsAsAPushWould) {
  auto poller = make(clock_);
  transport_->addBody(200, kTwoPools, {{"etag", "\"v1\""}});
  poller->pollOnce(0);
  EXPECT_EQ(store_.keys(kDriver).size(), 2u);
  EXPECT_EQ(changes_, 2);
  // Pools left out are withdrawn, as with PUT /v1/drivers/{driver}.
  transport_->addBody(200, kOnePool, {{"etag", "\"v2\""}});
  poller->pollOnce(0);
  ASSERT_EQ(store_.keys(kDriver).size(), 1u);
  EXPECT_EQ(store_.keys(kDriver)[0].pool, "p1");
  EXPECT_EQ(results_, (std::vector<std::string>{"ok", "ok"}));
}

TEST_F(PollerTest, NotModifiedCostsNoReconcile) {
  auto poller = make(clock_);
  transport_->addBody(200, kOnePool, {{"etag", "\"v1\""}});
  poller->pollOnce(0);
  ASSERT_EQ(changes_, 1);
  const uint64_t version = store_.get({kDriver, "p1"})->version;
  transport_->addBody(304, "");
  poller->pollOnce(0);
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
  poller->pollOnce(0);
  poller->pollOnce(0);
  EXPECT_EQ(changes_, 1);
  EXPECT_TRUE(transport_->requests()[1].headers.empty());
}

TEST_F(PollerTest, BadAnswerChangesNothingAndIsThePoolsStatus) {
  auto poller = make(clock_);
  transport_->addBody(200, kOnePool, {{"etag", "\"v1\""}});
  poller->pollOnce(0);
  const auto before = store_.get({kDriver, "p1"});
  transport_->addBody(200, kPartlyBad, {{"etag", "\"v2\""}});
  poller->pollOnce(0);
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
  poller->pollOnce(0);
  EXPECT_EQ(transport_->requests()[2].headers[0].second, "\"v1\"");
  EXPECT_TRUE(lastError("p1")->ok()) << "the source answers again: its error goes";
}

TEST_F(PollerTest, SourceFailingPastTheGraceHasItsPoolsWithdrawn) {
  auto poller = make(clock_);  // grace: 3 x 30 s
  transport_->addBody(200, kOnePool, {{"etag", "\"v1\""}});
  poller->pollOnce(0);
  for (int i = 0; i < 3; ++i) {
    clock_.advance(seconds(29));
    transport_->addError(unavailable("driver.test:8080: Connection refused"));
    poller->pollOnce(0);
    EXPECT_EQ(store_.keys(kDriver).size(), 1u) << "within the grace, after " << (i + 1) * 29 << "s";
  }
  EXPECT_TRUE(expired_.empty());
  EXPECT_EQ(lastError("p1")->reason(), kReasonSourceFailed);
  clock_.advance(seconds(4));  // 91 s since the last success
  transport_->addError(unavailable("driver.test:8080: Connection refused"));
  poller->pollOnce(0);
  EXPECT_TRUE(store_.keys(kDriver).empty());
  EXPECT_EQ(expired_, std::vector<bool>{true});
  EXPECT_EQ(results_.back(), kReasonUnreachable);

  // Back: the whole inventory is asked for again (the ETag went with the pools).
  transport_->addBody(200, kOnePool, {{"etag", "\"v1\""}});
  poller->pollOnce(0);
  EXPECT_TRUE(transport_->requests().back().headers.empty());
  EXPECT_EQ(store_.keys(kDriver).size(), 1u);
  EXPECT_EQ(expired_, (std::vector<bool>{true, false}));
}

TEST_F(PollerTest, GraceIsConfigurable) {
  auto poller = make(clock_, seconds(40));
  transport_->addBody(200, kOnePool);
  poller->pollOnce(0);
  clock_.advance(seconds(41));
  transport_->addBody(500, "down");
  poller->pollOnce(0);
  EXPECT_TRUE(store_.keys(kDriver).empty());
}

TEST_F(PollerTest, NotModifiedRenewsLeasedPools) {
  auto poller = make(clock_);
  transport_->addBody(
      200,
      R"({"pools": {"p1": {"allNodes": true, "leaseSeconds": 60, "devices": [{"name": "d0"}]}}})",
      {{"etag", "\"v1\""}});
  poller->pollOnce(0);
  for (int i = 0; i < 4; ++i) {
    clock_.advance(seconds(30));
    transport_->addBody(304, "");
    poller->pollOnce(0);
    EXPECT_TRUE(store_.expireLeases().empty()) << "after " << (i + 1) * 30 << "s";
  }
  EXPECT_EQ(store_.keys(kDriver).size(), 1u);
}

TEST_F(PollerTest, WaitIsTheIntervalWithJitter) {
  auto poller = make(clock_);
  transport_->addBody(200, kOnePool);
  EXPECT_EQ(poller->pollOnce(0), seconds(30) + std::chrono::milliseconds(1500));
  transport_->addError(unavailable("down"));
  EXPECT_EQ(poller->pollOnce(0), seconds(30) + std::chrono::milliseconds(1500));
}

TEST_F(PollerTest, KnowsWhichDriversItPulls) {
  auto poller = make(clock_);
  EXPECT_TRUE(poller->pulls(kDriver));
  EXPECT_FALSE(poller->pulls("gpu.example.com"));
}

TEST_F(PollerTest, ThreadFetchesAtOnceThenEveryInterval) {
  FakeClock clock(FakeClock::Sleeps::kBlock);
  reconcile::DesiredStore store(clock);
  PollerOptions options;
  options.store = &store;
  options.clock = &clock;
  options.interval = seconds(30);
  options.random = [] { return 0.0; };
  options.sources.push_back(
      {kDriver, "http://driver.test:8080", kDefaultInventoryPath, transport_});
  auto poller = Poller::create(std::move(options));
  ASSERT_TRUE(poller.ok());
  transport_->addBody(200, kOnePool, {{"etag", "\"v1\""}});
  transport_->addBody(304, "");
  (*poller)->start();
  ASSERT_TRUE(clock.waitForSleepers(1));
  EXPECT_EQ(transport_->requests().size(), 1u);
  EXPECT_EQ(store.keys(kDriver).size(), 1u);
  // Sleeping in steps; no fetch until the interval is over.
  for (int i = 0; i < 29; ++i) {
    ASSERT_TRUE(clock.advanceToNextWakeup());
    ASSERT_TRUE(clock.waitForSleepers(1));
  }
  EXPECT_EQ(transport_->requests().size(), 1u);
  ASSERT_TRUE(clock.advanceToNextWakeup());
  ASSERT_TRUE(clock.waitForSleepers(1));
  EXPECT_EQ(transport_->requests().size(), 2u);
  clock.stopBlocking();
  (*poller)->stop();
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
    options.sources.push_back({kDriver, "http://a", "/", transport});
    change(options);
    auto made = Poller::create(std::move(options));
    ASSERT_FALSE(made.ok()) << expected;
    EXPECT_NE(made.status().message().find(expected), std::string::npos) << made.status().message();
  };
  check([](PollerOptions& o) { o.sources[0].driver = "Not_A_Driver"; }, "Not_A_Driver");
  check(
      [&](PollerOptions& o) {
        o.sources.push_back({kDriver, "http://b", "/", transport});
      },
      "has a source already");
  check([](PollerOptions& o) { o.grace = seconds(10); }, "--pull-grace");
  check([](PollerOptions& o) { o.interval = Clock::Duration::zero(); }, "--pull-interval");
  check([](PollerOptions& o) { o.fetch.timeout = Clock::Duration::zero(); }, "--pull-timeout");
}

}  // namespace
}  // namespace rsc::controller::pull
