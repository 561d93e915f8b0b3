// WorkQueue: the controller's queue of (driver, pool) keys to reconcile, with
// client-go's workqueue semantics: a key is queued at most once, is never handed
// to two workers at once, and is retried later with per-key backoff. Event
// handlers and the inventory API add keys; reconcile workers get() and done()
// them. Every method is thread-safe; get() blocks. The getters themselves move
// delayed keys into the queue when they are due (no thread of the queue's own);
// the controller's housekeeping reports unfinished work.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "controller/reconcile/rate_limiter.h"

namespace rsc::controller::reconcile {

// Receives the queue's events so that metrics/ can export Kubernetes' workqueue
// metrics without this folder depending on it. The queue calls it with its lock
// held, from whichever thread caused the event, so implementations must be
// quick, thread-safe, and must not call back into the queue. Every method does
// nothing by default.
class WorkQueueObserver {
 public:
  virtual ~WorkQueueObserver() = default;

  // A key became dirty (workqueue_adds_total). Adding a key that is already
  // dirty is not an add.
  virtual void add() {}
  // The number of dirty keys is now `depth` (workqueue_depth). A key re-added
  // while it is being processed counts, though it is queued only after done().
  virtual void depth(std::size_t /*depth*/) {}
  // A worker got a key that had been dirty for `queued_for`
  // (workqueue_queue_duration_seconds).
  virtual void get(Clock::Duration /*queued_for*/) {}
  // A worker finished a key it had held for `worked_for`
  // (workqueue_work_duration_seconds).
  virtual void done(Clock::Duration /*worked_for*/) {}
  // addAfter or addRateLimited was called (workqueue_retries_total).
  virtual void retry() {}
  // Work in progress: `total` is the sum over the keys being processed of how
  // long each has been processing (workqueue_unfinished_work_seconds), and
  // `longest` the largest of them (workqueue_longest_running_processor_seconds).
  virtual void unfinishedWork(Clock::Duration /*total*/, Clock::Duration /*longest*/) {}
};

struct WorkQueueOptions {
  // Receives the queue's events; null means nobody listens. Must outlive the
  // queue.
  WorkQueueObserver* observer = nullptr;
  // Whether get() releases delayed keys when they are due, waiting for the
  // earliest. Tests with a FakeClock turn it off and call releaseDueForTest()
  // after advancing the clock, because a blocked getter notices a FakeClock's
  // advance only when its real-time wait ends.
  bool release_due_in_get = true;
};

// A getter waiting for a delayed key re-reads the clock at least this often,
// as client-go's heartbeat does, so no mistake in a computed wait can hold a
// key back for longer.
inline constexpr Clock::Duration kMaxDelayWait = std::chrono::seconds(10);

namespace internal {

// Returns the observer that does nothing.
WorkQueueObserver& noOpWorkQueueObserver();
// Blocks on `cv` (with `lock` held on entry and exit) until it is notified or
// `timeout` has passed. The one place the queue measures time without Clock;
// see work_queue.cc for why.
void waitAtMost(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                Clock::Duration timeout);

}  // namespace internal

// A work queue keyed by Key, which must be copyable, equality-comparable and
// hashable with Hash. For a struct key, define operator== and specialize
// std::hash next to the struct, so that the queue and the rate limiters all use
// the defaults:
//
//   struct PoolKey {
//     std::string driver;
//     std::string pool;
//     bool operator==(const PoolKey&) const = default;
//   };
//   template <>
//   struct std::hash<PoolKey> {
//     std::size_t operator()(const PoolKey& k) const noexcept {
//       const std::size_t h = std::hash<std::string>()(k.driver);
//       const std::size_t p = std::hash<std::string>()(k.pool);
//       return h ^ (p + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
//     }
//   };
//
// A key is in at most one of three states, plus possibly waiting: queued
// (dirty and in the FIFO), processing (handed out by get(), not yet done()), or
// processing and dirty (added again while being processed; it is queued again
// by done()). Waiting keys (addAfter) are held apart and added when due.
//
// Threading: every method may be called from any thread. get() blocks until a
// key is queued or the queue shuts down. Destroy the queue only after the
// threads that call get() have returned; destruction shuts it down. The
// clock, the rate limiter and the observer must outlive the queue.
//
// Example worker loop:
//   while (std::optional<PoolKey> key = queue.get()) {
//     if (reconcile(*key).ok()) {
//       queue.forget(*key);
//     } else {
//       queue.addRateLimited(*key);
//     }
//     queue.done(*key);
//   }
template <typename Key, typename Hash = std::hash<Key>, typename KeyEqual = std::equal_to<Key>>
class WorkQueue {
 public:
  WorkQueue(Clock& clock, RateLimiter<Key>& limiter, WorkQueueOptions options = {})
      : clock_(clock),
        limiter_(limiter),
        observer_(options.observer != nullptr ? *options.observer
                                              : internal::noOpWorkQueueObserver()),
        release_due_in_get_(options.release_due_in_get) {}

  ~WorkQueue() { shutDown(); }

  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Marks `key` as needing processing. Does nothing if it is already dirty or
  // the queue is shutting down; if it is being processed, it is queued again
  // when done() is called.
  void add(const Key& key) {
    std::lock_guard lock(mu_);
    if (shutting_down_) {
      return;
    }
    addLocked(key, clock_.now());
  }

  // Blocks until a key is queued and returns it, marking it as processing; the
  // caller must call done() with it. Returns nothing once the queue is shutting
  // down and its FIFO is empty: keys queued before shutdown are still handed out.
  std::optional<Key> get() { return getWithin(std::nullopt); }

  // Like get(), but also returns nothing when no key came within `max_wait`
  // (by the clock): an elastic worker's idle limit. shuttingDown() tells the
  // two apart.
  std::optional<Key> getWithin(std::optional<Clock::Duration> max_wait) {
    std::unique_lock lock(mu_);
    ++blocked_getters_;
    idle_cv_.notify_all();
    const Clock::TimePoint give_up = max_wait ? clock_.now() + *max_wait : Clock::TimePoint::max();
    for (;;) {
      const Clock::TimePoint now = clock_.now();
      if (release_due_in_get_) releaseDueLocked(now);
      if (!queue_.empty() || shutting_down_ || now >= give_up) break;
      // Until the earliest delayed key is due, the idle limit, an add, or
      // shutdown.
      Clock::TimePoint until = give_up;
      if (release_due_in_get_ && !waiting_.empty()) {
        until = std::min(until, waiting_.begin()->first);
      }
      if (until == Clock::TimePoint::max()) {
        items_cv_.wait(lock);
      } else {
        internal::waitAtMost(items_cv_, lock,
                             until - now < kMaxDelayWait ? until - now : kMaxDelayWait);
      }
    }
    --blocked_getters_;
    if (queue_.empty()) {
      return std::nullopt;
    }
    Key key = std::move(queue_.front());
    queue_.pop_front();
    const Clock::TimePoint now = clock_.now();
    auto dirty = dirty_.find(key);
    observer_.get(now - dirty->second);
    dirty_.erase(dirty);
    observer_.depth(dirty_.size());
    processing_.emplace(key, now);
    return key;
  }

  // Marks `key` as no longer being processed; if it was added again meanwhile,
  // queues it. Does nothing for a key that is not being processed.
  void done(const Key& key) {
    std::lock_guard lock(mu_);
    auto processing = processing_.find(key);
    if (processing == processing_.end()) {
      return;
    }
    observer_.done(clock_.now() - processing->second);
    processing_.erase(processing);
    if (dirty_.contains(key)) {
      queue_.push_back(key);
      items_cv_.notify_one();
    } else if (processing_.empty()) {
      drained_cv_.notify_all();
      idle_cv_.notify_all();
    }
  }

  // Returns the number of queued keys (not those being processed or waiting).
  // For information only: it may change before the caller looks at it.
  std::size_t len() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }

  // Returns the number of keys added with a delay that is not over yet. For
  // information only, as len().
  std::size_t delayedLen() const {
    std::lock_guard lock(mu_);
    return waiting_.size();
  }

  // Adds `key` after `delay`, at once if `delay` <= 0. A key added again
  // before it is due keeps the earlier due time. Ignored once shutting down.
  void addAfter(const Key& key, Clock::Duration delay) {
    std::lock_guard lock(mu_);
    if (shutting_down_) {
      return;
    }
    observer_.retry();
    const Clock::TimePoint now = clock_.now();
    if (delay <= Clock::Duration::zero()) {
      addLocked(key, now);
      return;
    }
    const Clock::TimePoint due =
        delay < Clock::TimePoint::max() - now ? now + delay : Clock::TimePoint::max();
    auto known = waiting_index_.find(key);
    if (known != waiting_index_.end()) {
      if (known->second->first <= due) {
        return;
      }
      waiting_.erase(known->second);
      known->second = waiting_.emplace(due, key);
    } else {
      known = waiting_index_.emplace(key, waiting_.emplace(due, key)).first;
    }
    // Only a new earliest due time changes when a waiting getter must wake.
    if (known->second == waiting_.begin()) {
      items_cv_.notify_all();
    }
  }

  // Adds `key` after the delay the rate limiter gives it.
  void addRateLimited(const Key& key) { addAfter(key, limiter_.when(key)); }

  // Tells the rate limiter that `key` succeeded, so its backoff starts over.
  // Does not remove the key from the queue.
  void forget(const Key& key) { limiter_.forget(key); }

  // Returns how many times `key` has been rate-limited since it was forgotten.
  int numRequeues(const Key& key) const { return limiter_.numRequeues(key); }

  // Stops the queue: adds are ignored from now on, waiting keys are dropped,
  // and get() returns nothing once the queued keys are handed out. Wakes every
  // blocked get() and ends a shutDownWithDrain() that is waiting.
  void shutDown() {
    std::lock_guard lock(mu_);
    drain_ = false;
    shutDownLocked();
  }

  // Shuts down like shutDown(), then blocks until no key is being processed, so
  // that work in flight can finish. Workers must keep calling done(); a
  // shutDown() from another thread ends the wait early.
  void shutDownWithDrain() {
    std::unique_lock lock(mu_);
    drain_ = true;
    shutDownLocked();
    drained_cv_.wait(lock, [this] { return processing_.empty() || !drain_; });
  }

  // Returns whether shutDown() or shutDownWithDrain() has been called.
  bool shuttingDown() const {
    std::lock_guard lock(mu_);
    return shutting_down_;
  }

  // Reports the work in progress to the observer; the controller's
  // housekeeping calls it every second, well inside a Prometheus scrape
  // interval, so a stuck worker shows on the next scrape.
  void updateUnfinishedWork() {
    std::lock_guard lock(mu_);
    if (!shutting_down_) {
      reportUnfinishedWorkLocked(clock_.now());
    }
  }

  // Adds the waiting keys that are due by the clock's time now, and returns how
  // many there were. For tests whose getters do not release them.
  std::size_t releaseDueForTest() {
    std::lock_guard lock(mu_);
    if (shutting_down_) {
      return 0;
    }
    return releaseDueLocked(clock_.now());
  }

  // Returns the waiting keys and their due times, earliest first.
  std::vector<std::pair<Key, Clock::TimePoint>> waitingForTest() const {
    std::lock_guard lock(mu_);
    std::vector<std::pair<Key, Clock::TimePoint>> waiting;
    for (const auto& [due, key] : waiting_) {
      waiting.emplace_back(key, due);
    }
    return waiting;
  }

  // Returns how many keys are being processed.
  std::size_t processingForTest() const {
    std::lock_guard lock(mu_);
    return processing_.size();
  }

  // Blocks until no key is being processed and `getters` callers wait in
  // get() with nothing queued; with `getters` 0, until no key is being
  // processed. A test that runs `getters` worker threads then knows that they
  // have done all they can. `timeout` is a safety net, never the
  // synchronisation; returns false when it runs out.
  bool waitIdleForTest(std::size_t getters, Clock::Duration timeout) const {
    std::unique_lock lock(mu_);
    return idle_cv_.wait_for(lock, timeout, [&] {
      return processing_.empty() &&
             (getters == 0 || (queue_.empty() && blocked_getters_ == getters));
    });
  }

  // Blocks until shutDown() or shutDownWithDrain() has been called; false
  // when the safety net `timeout` runs out. shutDownWithDrain() starts its
  // wait in the same critical section, so a drainer is waiting by then.
  bool waitShuttingDownForTest(Clock::Duration timeout) const {
    std::unique_lock lock(mu_);
    return idle_cv_.wait_for(lock, timeout, [&] { return shutting_down_; });
  }

  // Returns how many callers are blocked in get(), so tests can tell that a
  // getter is waiting before they wake it.
  std::size_t blockedGettersForTest() const {
    std::lock_guard lock(mu_);
    return blocked_getters_;
  }

 private:
  using Waiting = std::multimap<Clock::TimePoint, Key>;

  void addLocked(const Key& key, Clock::TimePoint now) {
    if (dirty_.contains(key)) {
      return;
    }
    dirty_.emplace(key, now);
    observer_.add();
    observer_.depth(dirty_.size());
    if (processing_.contains(key)) {
      return;
    }
    queue_.push_back(key);
    items_cv_.notify_one();
  }

  void shutDownLocked() {
    shutting_down_ = true;
    waiting_.clear();
    waiting_index_.clear();
    items_cv_.notify_all();
    drained_cv_.notify_all();
    idle_cv_.notify_all();
  }

  std::size_t releaseDueLocked(Clock::TimePoint now) {
    std::size_t released = 0;
    while (!waiting_.empty() && waiting_.begin()->first <= now) {
      Key key = std::move(waiting_.begin()->second);
      waiting_.erase(waiting_.begin());
      waiting_index_.erase(key);
      addLocked(key, now);
      ++released;
    }
    return released;
  }

  void reportUnfinishedWorkLocked(Clock::TimePoint now) {
    Clock::Duration total = Clock::Duration::zero();
    Clock::Duration longest = Clock::Duration::zero();
    for (const auto& [key, started] : processing_) {
      total += now - started;
      longest = std::max(longest, now - started);
    }
    observer_.unfinishedWork(total, longest);
  }

  Clock& clock_;
  RateLimiter<Key>& limiter_;
  WorkQueueObserver& observer_;
  const bool release_due_in_get_;

  mutable std::mutex mu_;
  // Getters wait here for a queued key, an earlier delayed key, or shutdown.
  std::condition_variable items_cv_;
  // shutDownWithDrain() waits here for processing_ to empty.
  std::condition_variable drained_cv_;
  // waitIdleForTest() waits here for getters to block and processing_ to
  // empty, waitShuttingDownForTest() for shutdown.
  mutable std::condition_variable idle_cv_;

  // All guarded by mu_. Every key in queue_ is in dirty_ and not in processing_.
  std::deque<Key> queue_;
  // Keys that need processing, with the time each became dirty.
  std::unordered_map<Key, Clock::TimePoint, Hash, KeyEqual> dirty_;
  // Keys handed out by get() and not yet done(), with the time get() returned.
  std::unordered_map<Key, Clock::TimePoint, Hash, KeyEqual> processing_;
  // Keys added with a delay, by due time; waiting_index_ finds a key's entry.
  Waiting waiting_;
  std::unordered_map<Key, typename Waiting::iterator, Hash, KeyEqual> waiting_index_;
  bool shutting_down_ = false;
  bool drain_ = false;
  std::size_t blocked_getters_ = 0;
};

}  // namespace rsc::controller::reconcile
