#include "controller/reconcile/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "controller/reconcile/rate_limiter.h"
#include "test/controller/reconcile/default_backoff.h"
#include "test/fakes/fake_clock.h"

namespace rsc::controller::reconcile {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Upper bound on any wait for another thread; reached only when the queue is
// broken, so that a bug fails the test instead of hanging it.
constexpr auto kSafetyNet = std::chrono::seconds(60);

// The controller's key: a struct with operator== and a std::hash
// specialization, as work_queue.h recommends.
struct PoolKey {
  std::string driver;
  std::string pool;
  bool operator==(const PoolKey&) const = default;
};

}  // namespace
}  // namespace rsc::controller::reconcile

template <>
struct std::hash<rsc::controller::reconcile::PoolKey> {
  std::size_t operator()(const rsc::controller::reconcile::PoolKey& k) const noexcept {
    const std::size_t h = std::hash<std::string>()(k.driver);
    return h ^ (std::hash<std::string>()(k.pool) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  }
};

namespace rsc::controller::reconcile {
namespace {

// A queue on a FakeClock whose getters release nothing: tests move time with
// clock.advance() and release due keys with releaseDueForTest().
struct FakeTimeQueue {
  explicit FakeTimeQueue(WorkQueueObserver* observer = nullptr)
      : queue(clock, limiter, WorkQueueOptions{.observer = observer, .release_due_in_get = false}) {
  }

  testing::FakeClock clock;
  ItemExponentialFailureRateLimiter<std::string> limiter;
  WorkQueue<std::string> queue;
};

TEST(WorkQueue, AddDeduplicatesQueuedKey) {
  FakeTimeQueue q;
  q.queue.add("a");
  q.queue.add("a");
  q.queue.add("b");
  q.queue.add("a");
  EXPECT_EQ(q.queue.len(), 2u);
  EXPECT_EQ(q.queue.get(), "a");
  EXPECT_EQ(q.queue.get(), "b");
  EXPECT_EQ(q.queue.len(), 0u);
}

TEST(WorkQueue, GetsInFifoOrder) {
  FakeTimeQueue q;
  for (const char* key : {"c", "a", "d", "b"}) {
    q.queue.add(key);
  }
  std::vector<std::string> got;
  got.reserve(4);
  for (int i = 0; i < 4; ++i) {
    got.push_back(*q.queue.get());
  }
  EXPECT_EQ(got, (std::vector<std::string>{"c", "a", "d", "b"}));

  // A key that becomes dirty again goes to the back.
  q.queue.add("x");
  q.queue.done("c");
  q.queue.add("c");
  EXPECT_EQ(q.queue.get(), "x");
  EXPECT_EQ(q.queue.get(), "c");
}

TEST(WorkQueue, AddWhileProcessingRequeuesAfterDone) {
  FakeTimeQueue q;
  q.queue.add("a");
  ASSERT_EQ(q.queue.get(), "a");

  // Dirty but held back: a second worker must not get it yet.
  q.queue.add("a");
  q.queue.add("a");
  EXPECT_EQ(q.queue.len(), 0u);
  EXPECT_EQ(q.queue.processingForTest(), 1u);

  q.queue.done("a");
  EXPECT_EQ(q.queue.len(), 1u);
  ASSERT_EQ(q.queue.get(), "a");
  q.queue.done("a");

  // Queued exactly once: nothing is left.
  EXPECT_EQ(q.queue.len(), 0u);
  EXPECT_EQ(q.queue.processingForTest(), 0u);
}

TEST(WorkQueue, DoneWithoutAddDoesNotRequeue) {
  FakeTimeQueue q;
  q.queue.add("a");
  ASSERT_EQ(q.queue.get(), "a");
  q.queue.done("a");
  EXPECT_EQ(q.queue.len(), 0u);
  // done() of a key that is not being processed changes nothing.
  q.queue.add("b");
  q.queue.done("b");
  EXPECT_EQ(q.queue.len(), 1u);
  EXPECT_EQ(q.queue.get(), "b");
  EXPECT_EQ(q.queue.len(), 0u);
}

TEST(WorkQueue, NeverHandsOneKeyToTwoWorkersAtOnce) {
  testing::FakeClock clock;
  ItemExponentialFailureRateLimiter<PoolKey> limiter;
  WorkQueue<PoolKey> queue(clock, limiter,
                           WorkQueueOptions{.observer = nullptr, .release_due_in_get = false});
  constexpr int kWorkers = 4;
  constexpr int kKeys = 20;
  constexpr int kAdds = 4000;
  // Each worker also re-adds the key it holds, up to this many times per key,
  // so that every key is added while it is being processed and other workers
  // are idle: the moment a broken queue would hand it out twice.
  constexpr int kReaddsPerKey = 50;

  std::mutex mu;
  std::set<std::string> in_flight;           // guarded by mu
  std::map<std::string, int> added_version;  // guarded by mu
  std::map<std::string, int> seen_version;   // guarded by mu
  std::map<std::string, int> processed;      // guarded by mu
  std::atomic<int> overlaps = 0;

  std::vector<std::thread> workers;
  workers.reserve(kWorkers);
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&] {
      while (std::optional<PoolKey> key = queue.get()) {
        bool readd = false;
        {
          std::lock_guard lock(mu);
          if (!in_flight.insert(key->pool).second) {
            ++overlaps;
          }
          seen_version[key->pool] = added_version[key->pool];
          readd = processed[key->pool]++ < kReaddsPerKey;
          if (readd) {
            ++added_version[key->pool];
          }
        }
        if (readd) {
          queue.add(*key);
        }
        // Hold the key for a moment, giving another worker the chance to get
        // it if the queue would hand it out.
        for (int i = 0; i < 8; ++i) {
          std::this_thread::yield();
        }
        {
          std::lock_guard lock(mu);
          in_flight.erase(key->pool);
        }
        queue.done(*key);
      }
    });
  }

  for (int i = 0; i < kAdds; ++i) {
    const std::string pool = "pool-" + std::to_string(i % kKeys);
    {
      std::lock_guard lock(mu);
      ++added_version[pool];
    }
    queue.add(PoolKey{"gpu.example.com", pool});
    if (i % 64 == 0) {
      std::this_thread::yield();
    }
  }
  // Wait until the workers have made their last re-adds and gone idle, so
  // that shutting down ignores no add: a worker re-adds before done(), so
  // with every worker waiting on an empty queue no add is left to come.
  ASSERT_TRUE(queue.waitIdleForTest(kWorkers, kSafetyNet));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(processed.size(), static_cast<size_t>(kKeys));
    for (const auto& [pool, count] : processed) EXPECT_GT(count, kReaddsPerKey) << pool;
  }
  queue.shutDown();
  for (auto& worker : workers) {
    worker.join();
  }

  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(queue.len(), 0u);
  // No add was lost: every key was processed after its last add.
  EXPECT_EQ(seen_version, added_version);
}

TEST(WorkQueue, ShutDownWakesBlockedGetters) {
  FakeTimeQueue q;
  constexpr int kGetters = 3;
  std::vector<std::future<std::optional<std::string>>> results;
  results.reserve(kGetters);
  for (int i = 0; i < kGetters; ++i) {
    results.push_back(std::async(std::launch::async, [&q] { return q.queue.get(); }));
  }
  ASSERT_TRUE(q.queue.waitIdleForTest(kGetters, kSafetyNet));
  EXPECT_FALSE(q.queue.shuttingDown());

  q.queue.shutDown();

  EXPECT_TRUE(q.queue.shuttingDown());
  for (auto& result : results) {
    ASSERT_EQ(result.wait_for(kSafetyNet), std::future_status::ready);
    EXPECT_EQ(result.get(), std::nullopt);
  }
}

TEST(WorkQueue, AddWakesBlockedGetter) {
  FakeTimeQueue q;
  auto result = std::async(std::launch::async, [&q] { return q.queue.get(); });
  ASSERT_TRUE(q.queue.waitIdleForTest(1, kSafetyNet));
  q.queue.add("a");
  ASSERT_EQ(result.wait_for(kSafetyNet), std::future_status::ready);
  EXPECT_EQ(result.get(), "a");
}

TEST(WorkQueue, ShutDownIgnoresAddsAndHandsOutQueuedKeys) {
  FakeTimeQueue q;
  q.queue.add("a");
  q.queue.add("b");
  ASSERT_EQ(q.queue.get(), "a");
  q.queue.add("a");
  q.queue.addAfter("w", seconds(1));

  q.queue.shutDown();
  q.queue.add("c");
  q.queue.addAfter("d", Clock::Duration::zero());
  q.queue.addRateLimited("e");

  EXPECT_EQ(q.queue.get(), "b");
  // "a" became dirty before shutdown, so done() still queues it.
  q.queue.done("a");
  EXPECT_EQ(q.queue.get(), "a");
  EXPECT_EQ(q.queue.get(), std::nullopt);
  // Waiting keys were dropped.
  EXPECT_TRUE(q.queue.waitingForTest().empty());
  q.clock.advance(seconds(2));
  EXPECT_EQ(q.queue.releaseDueForTest(), 0u);
  EXPECT_EQ(q.queue.get(), std::nullopt);
}

TEST(WorkQueue, ShutDownWithDrainWaitsForDone) {
  FakeTimeQueue q;
  q.queue.add("a");
  q.queue.add("b");
  ASSERT_EQ(q.queue.get(), "a");
  ASSERT_EQ(q.queue.get(), "b");

  std::atomic<bool> returned = false;
  std::thread drainer([&] {
    q.queue.shutDownWithDrain();
    returned = true;
  });
  // shutDownWithDrain sets shuttingDown and starts waiting in one critical
  // section, so once it shows, the drainer is waiting.
  ASSERT_TRUE(q.queue.waitShuttingDownForTest(kSafetyNet));
  EXPECT_FALSE(returned.load());

  q.queue.done("a");
  EXPECT_FALSE(returned.load());
  q.queue.done("b");
  drainer.join();
  EXPECT_TRUE(returned.load());
}

TEST(WorkQueue, ShutDownWithDrainReturnsAtOnceWhenIdle) {
  FakeTimeQueue q;
  q.queue.shutDownWithDrain();
  EXPECT_TRUE(q.queue.shuttingDown());
}

TEST(WorkQueue, ShutDownEndsAWaitingDrain) {
  FakeTimeQueue q;
  q.queue.add("a");
  ASSERT_EQ(q.queue.get(), "a");
  auto drained = std::async(std::launch::async, [&q] { q.queue.shutDownWithDrain(); });
  ASSERT_TRUE(q.queue.waitShuttingDownForTest(kSafetyNet));
  q.queue.shutDown();
  EXPECT_EQ(drained.wait_for(kSafetyNet), std::future_status::ready);
  EXPECT_EQ(q.queue.processingForTest(), 1u);
}

TEST(WorkQueue, AddAfterReleasesAtDueTimeNotBefore) {
  FakeTimeQueue q;
  const Clock::TimePoint start = q.clock.now();
  q.queue.addAfter("a", milliseconds(10));
  EXPECT_EQ(q.queue.len(), 0u);
  ASSERT_EQ(q.queue.waitingForTest().size(), 1u);
  EXPECT_EQ(q.queue.waitingForTest()[0].second, start + milliseconds(10));

  q.clock.advance(milliseconds(9));
  EXPECT_EQ(q.queue.releaseDueForTest(), 0u);
  EXPECT_EQ(q.queue.len(), 0u);

  q.clock.advance(milliseconds(1));
  EXPECT_EQ(q.queue.releaseDueForTest(), 1u);
  EXPECT_EQ(q.queue.len(), 1u);
  EXPECT_TRUE(q.queue.waitingForTest().empty());
  EXPECT_EQ(q.queue.get(), "a");
}

TEST(WorkQueue, AddAfterWithoutDelayAddsAtOnce) {
  FakeTimeQueue q;
  q.queue.addAfter("a", Clock::Duration::zero());
  q.queue.addAfter("b", -milliseconds(5));
  EXPECT_EQ(q.queue.len(), 2u);
  EXPECT_TRUE(q.queue.waitingForTest().empty());
  EXPECT_EQ(q.queue.get(), "a");
  EXPECT_EQ(q.queue.get(), "b");
}

TEST(WorkQueue, AddAfterEarliestDueTimeWins) {
  FakeTimeQueue q;
  q.queue.addAfter("late-then-early", milliseconds(50));
  q.queue.addAfter("late-then-early", milliseconds(10));
  q.queue.addAfter("early-then-late", milliseconds(20));
  q.queue.addAfter("early-then-late", milliseconds(60));
  ASSERT_EQ(q.queue.waitingForTest().size(), 2u);

  q.clock.advance(milliseconds(10));
  EXPECT_EQ(q.queue.releaseDueForTest(), 1u);
  EXPECT_EQ(q.queue.get(), "late-then-early");
  q.clock.advance(milliseconds(10));
  EXPECT_EQ(q.queue.releaseDueForTest(), 1u);
  EXPECT_EQ(q.queue.get(), "early-then-late");

  // Each key was waiting once: nothing comes back at the later due times.
  q.clock.advance(milliseconds(100));
  EXPECT_EQ(q.queue.releaseDueForTest(), 0u);
  EXPECT_EQ(q.queue.len(), 0u);
}

TEST(WorkQueue, AddAfterReleasesInDueOrder) {
  FakeTimeQueue q;
  q.queue.addAfter("c", milliseconds(30));
  q.queue.addAfter("a", milliseconds(10));
  q.queue.addAfter("b", milliseconds(20));
  q.clock.advance(milliseconds(30));
  EXPECT_EQ(q.queue.releaseDueForTest(), 3u);
  EXPECT_EQ(q.queue.get(), "a");
  EXPECT_EQ(q.queue.get(), "b");
  EXPECT_EQ(q.queue.get(), "c");
}

TEST(WorkQueue, ReleasedKeyThatIsAlreadyQueuedIsNotDuplicated) {
  FakeTimeQueue q;
  q.queue.add("a");
  q.queue.addAfter("a", milliseconds(5));
  q.clock.advance(milliseconds(5));
  EXPECT_EQ(q.queue.releaseDueForTest(), 1u);
  EXPECT_EQ(q.queue.len(), 1u);
}

// Returns how long after now the single waiting key is due.
Clock::Duration waitingDelay(FakeTimeQueue& q) {
  const auto waiting = q.queue.waitingForTest();
  EXPECT_EQ(waiting.size(), 1u);
  return waiting.empty() ? Clock::Duration::zero() : waiting[0].second - q.clock.now();
}

TEST(WorkQueue, AddRateLimitedBacksOffExponentiallyAndForgetResets) {
  FakeTimeQueue q;
  std::vector<Clock::Duration> delays;
  delays.reserve(20);
  for (int attempt = 0; attempt < 20; ++attempt) {
    // The worker fails: retry with backoff, then let the retry come due.
    q.queue.addRateLimited("a");
    const Clock::Duration delay = waitingDelay(q);
    delays.push_back(delay);
    q.clock.advance(delay - Clock::Duration(1));
    ASSERT_EQ(q.queue.releaseDueForTest(), 0u) << attempt;
    q.clock.advance(Clock::Duration(1));
    ASSERT_EQ(q.queue.releaseDueForTest(), 1u) << attempt;
    ASSERT_EQ(q.queue.get(), "a");
    q.queue.done("a");
  }
  expectDefaultBackoff(delays);
  EXPECT_EQ(q.queue.numRequeues("a"), 20);
  EXPECT_EQ(q.queue.numRequeues("b"), 0);

  // The worker succeeds: the next failure starts over.
  q.queue.forget("a");
  EXPECT_EQ(q.queue.numRequeues("a"), 0);
  q.queue.addRateLimited("a");
  EXPECT_EQ(waitingDelay(q), milliseconds(5));
}

TEST(WorkQueue, OneKeysBackoffDoesNotDelayAnother) {
  FakeTimeQueue q;
  for (int i = 0; i < 10; ++i) {
    q.limiter.when("bad");
  }
  q.queue.addRateLimited("bad");
  q.queue.addRateLimited("good");
  q.clock.advance(milliseconds(5));
  EXPECT_EQ(q.queue.releaseDueForTest(), 1u);
  EXPECT_EQ(q.queue.get(), "good");
}

// Records every observer call, for assertions.
class RecordingObserver final : public WorkQueueObserver {
 public:
  void add() override {
    std::lock_guard lock(mu_);
    ++adds_;
  }
  void depth(std::size_t depth) override {
    std::lock_guard lock(mu_);
    depths_.push_back(depth);
  }
  void get(Clock::Duration queued_for) override {
    std::lock_guard lock(mu_);
    queued_for_.push_back(queued_for);
  }
  void done(Clock::Duration worked_for) override {
    std::lock_guard lock(mu_);
    worked_for_.push_back(worked_for);
  }
  void retry() override {
    std::lock_guard lock(mu_);
    ++retries_;
  }
  void unfinishedWork(Clock::Duration total, Clock::Duration longest) override {
    std::lock_guard lock(mu_);
    unfinished_.emplace_back(total, longest);
    unfinished_cv_.notify_all();
  }
  // Blocks until `n` reports of unfinished work have come; false after
  // kSafetyNet.
  bool waitForUnfinished(size_t n) const {
    std::unique_lock lock(mu_);
    return unfinished_cv_.wait_for(lock, kSafetyNet, [&] { return unfinished_.size() >= n; });
  }

  int adds() const {
    std::lock_guard lock(mu_);
    return adds_;
  }
  int retries() const {
    std::lock_guard lock(mu_);
    return retries_;
  }
  std::vector<std::size_t> depths() const {
    std::lock_guard lock(mu_);
    return depths_;
  }
  std::vector<Clock::Duration> queuedFor() const {
    std::lock_guard lock(mu_);
    return queued_for_;
  }
  std::vector<Clock::Duration> workedFor() const {
    std::lock_guard lock(mu_);
    return worked_for_;
  }
  std::vector<std::pair<Clock::Duration, Clock::Duration>> unfinished() const {
    std::lock_guard lock(mu_);
    return unfinished_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable unfinished_cv_;
  int adds_ = 0;
  int retries_ = 0;
  std::vector<std::size_t> depths_;
  std::vector<Clock::Duration> queued_for_;
  std::vector<Clock::Duration> worked_for_;
  std::vector<std::pair<Clock::Duration, Clock::Duration>> unfinished_;
};

using Durations = std::vector<Clock::Duration>;

TEST(WorkQueue, ObserverSeesAddsGetsDonesRetriesAndDepth) {
  RecordingObserver observer;
  FakeTimeQueue q(&observer);

  q.queue.add("a");
  q.queue.add("a");  // already dirty: not an add
  q.queue.add("b");
  EXPECT_EQ(observer.adds(), 2);
  EXPECT_EQ(observer.depths(), (std::vector<std::size_t>{1, 2}));

  q.clock.advance(milliseconds(3));
  ASSERT_EQ(q.queue.get(), "a");
  q.clock.advance(milliseconds(4));
  ASSERT_EQ(q.queue.get(), "b");
  EXPECT_EQ(observer.queuedFor(), (Durations{milliseconds(3), milliseconds(7)}));
  EXPECT_EQ(observer.depths(), (std::vector<std::size_t>{1, 2, 1, 0}));

  // Unfinished work: "a" has run 4 ms, "b" 0 ms; then 6 ms more each.
  q.queue.updateUnfinishedWork();
  q.clock.advance(milliseconds(6));
  q.queue.updateUnfinishedWork();
  using Pair = std::pair<Clock::Duration, Clock::Duration>;
  EXPECT_EQ(observer.unfinished(), (std::vector<Pair>{{milliseconds(4), milliseconds(4)},
                                                      {milliseconds(16), milliseconds(10)}}));

  // Added while processing: counted in depth though not yet queued.
  q.queue.add("a");
  EXPECT_EQ(observer.adds(), 3);
  EXPECT_EQ(observer.depths().back(), 1u);
  q.queue.done("a");
  q.clock.advance(milliseconds(1));
  q.queue.done("b");
  EXPECT_EQ(observer.workedFor(), (Durations{milliseconds(10), milliseconds(7)}));
  ASSERT_EQ(q.queue.get(), "a");
  // Queued for the time since the add, not since the done.
  EXPECT_EQ(observer.queuedFor().back(), milliseconds(1));
  q.queue.done("a");

  // Retries: every addAfter and addRateLimited, delayed or not; a delayed key
  // is an add only when it is released.
  q.queue.addRateLimited("c");
  q.queue.addAfter("d", Clock::Duration::zero());
  EXPECT_EQ(observer.retries(), 2);
  EXPECT_EQ(observer.adds(), 4);
  q.clock.advance(milliseconds(5));
  EXPECT_EQ(q.queue.releaseDueForTest(), 1u);
  EXPECT_EQ(observer.adds(), 5);
  EXPECT_EQ(observer.depths().back(), 2u);

  // Nothing is reported after shutdown.
  q.queue.shutDown();
  const std::size_t reports = observer.unfinished().size();
  q.queue.updateUnfinishedWork();
  EXPECT_EQ(observer.unfinished().size(), reports);
}

TEST(WorkQueue, AGetterReleasesDueKeysWithRealClock) {
  ItemExponentialFailureRateLimiter<std::string> limiter;
  WorkQueue<std::string> queue(RealClock::instance(), limiter);
  const Clock::TimePoint start = RealClock::instance().now();
  queue.addAfter("a", milliseconds(1));
  auto result = std::async(std::launch::async, [&queue] { return queue.get(); });
  if (result.wait_for(kSafetyNet) != std::future_status::ready) {
    queue.shutDown();
    FAIL() << "the delayed key was never released";
  }
  EXPECT_EQ(result.get(), "a");
  EXPECT_GE(RealClock::instance().now() - start, milliseconds(1));
}

TEST(WorkQueue, AnEarlierKeyWakesAWaitingGetter) {
  ItemExponentialFailureRateLimiter<std::string> limiter;
  WorkQueue<std::string> queue(RealClock::instance(), limiter);
  // The getter waits for "late", at most kMaxDelayWait, until "early" comes.
  queue.addAfter("late", hours(1));
  auto result = std::async(std::launch::async, [&queue] { return queue.get(); });
  ASSERT_TRUE(queue.waitIdleForTest(1, kSafetyNet));
  queue.addAfter("early", milliseconds(1));
  // Well under kMaxDelayWait: only the wake-up on the earlier key releases it
  // this soon.
  if (result.wait_for(kMaxDelayWait / 2) != std::future_status::ready) {
    queue.shutDown();
    FAIL() << "the earlier key did not wake the getter";
  }
  EXPECT_EQ(result.get(), "early");
  ASSERT_EQ(queue.waitingForTest().size(), 1u);
  EXPECT_EQ(queue.waitingForTest()[0].first, "late");
}

TEST(WorkQueue, AGetterReadsDueTimesFromTheClock) {
  testing::FakeClock clock;
  ItemExponentialFailureRateLimiter<std::string> limiter;
  WorkQueue<std::string> queue(clock, limiter);
  queue.addAfter("a", milliseconds(1));
  queue.addAfter("b", hours(1));
  clock.advance(milliseconds(1));
  auto result = std::async(std::launch::async, [&queue] { return queue.get(); });
  if (result.wait_for(kSafetyNet) != std::future_status::ready) {
    queue.shutDown();
    FAIL() << "the due key was never released";
  }
  EXPECT_EQ(result.get(), "a");
  // An hour of real time has not passed, and the fake clock did not move: "b" waits.
  EXPECT_EQ(queue.waitingForTest().size(), 1u);
}

}  // namespace
}  // namespace rsc::controller::reconcile
