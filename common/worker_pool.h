// WorkerPool: named threads for blocking work, shared by several users, each through a Lane
// of its own that bounds how many of its tasks run at once, so that one user's slow tasks
// cannot take the threads another needs. The service's HTTP endpoints (inventory pushes and
// reviews, metrics scrapers' reviews) share one. Threads start on demand, up to the pool's
// bound, and stay until stop(): an endpoint nobody called has none. Delayed tasks wait on the
// Clock (sleepUntil, cut short by a stop source when an earlier task or other work arrives).
// Threading: every method is thread-safe; a task may post to any lane.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"

namespace rsc {

class WorkerPool {
 public:
  using Task = std::function<void()>;
  class Lane;

  // `clock` must outlive the pool; `thread_name` names every thread
  // (kMaxThreadName bytes kept); at most `max_threads` (at least 1) run.
  WorkerPool(Clock& clock, std::string thread_name, size_t max_threads);
  // Calls stop().
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // A lane of which at most `max_running` (at least 1) tasks run at once.
  // Destroy it before the pool.
  std::unique_ptr<Lane> lane(size_t max_running);

  // Refuses new tasks, drops the delayed ones, runs those queued and joins
  // the threads. Idempotent.
  void stop();

  // Threads started so far (they stay until stop()).
  size_t threadCount() const;

 private:
  struct LaneState {
    size_t max_running;
    size_t running = 0;
    bool closed = false;
    // Ready tasks with their order of arrival, so that lanes share in FIFO order.
    std::deque<std::pair<uint64_t, Task>> ready;
  };
  struct Delayed {
    LaneState* lane;
    uint64_t id;
    Task task;
  };
  using DelayedMap = std::multimap<Clock::TimePoint, Delayed>;

  bool postLocked(LaneState& lane, Task task);
  // Moves the delayed tasks due by `now` to their lanes.
  void releaseDueLocked(Clock::TimePoint now);
  // Ready tasks that a free thread could start now.
  size_t runnableLocked() const;
  // Wakes the waiting threads and starts more while there is more runnable
  // work than waiting threads (or delayed work and no thread at all).
  void wakeLocked();
  void startThreadLocked();
  void loop();

  Clock& clock_;
  const std::string thread_name_;
  const size_t max_threads_;

  mutable std::mutex mu_;
  // Waiting threads without a due time wait here.
  std::condition_variable work_cv_;
  // Lane::drain() waits here for its lane to empty.
  std::condition_variable idle_cv_;
  // All guarded by mu_.
  std::vector<std::unique_ptr<LaneState>> lanes_;
  DelayedMap delayed_;
  std::unordered_map<uint64_t, DelayedMap::iterator> delayed_index_;
  uint64_t next_id_ = 1;
  size_t waiting_ = 0;   // threads waiting for work
  size_t starting_ = 0;  // threads started that have not looked for work yet
  // The one thread that sleeps on the Clock for the earliest delayed task is
  // woken through this; null when none does.
  std::stop_source* clock_waker_ = nullptr;
  bool stopping_ = false;
  bool joined_ = false;  // stop() has joined the threads
  std::vector<std::thread> threads_;
};

// One user's share of a WorkerPool.
class WorkerPool::Lane {
 public:
  // Calls drain().
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  // Queues `task`; false, and the task is dropped, once the lane is drained
  // or the pool stopped.
  bool post(Task task);
  // Queues `task` for when the clock reaches `due`; returns an id for
  // cancel(), 0 when refused as post() is. When every thread is busy at that
  // time it runs when one frees.
  uint64_t postAt(Clock::TimePoint due, Task task);
  // Drops a delayed task that has not been released yet; false otherwise.
  bool cancel(uint64_t id);
  // Refuses new tasks, drops the delayed ones and blocks until the queued
  // and running ones have finished. Call it from outside the lane's tasks.
  // Idempotent.
  void drain();

 private:
  friend class WorkerPool;
  Lane(WorkerPool& pool, LaneState& state) : pool_(pool), state_(state) {}

  WorkerPool& pool_;
  LaneState& state_;
};

}  // namespace rsc
