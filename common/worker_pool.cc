#include "common/worker_pool.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "common/log.h"
#include "common/thread_name.h"

namespace rsc {

WorkerPool::WorkerPool(Clock& clock, std::string thread_name, size_t max_threads)
    : clock_(clock),
      thread_name_(std::move(thread_name)),
      max_threads_(std::max<size_t>(max_threads, 1)) {}

WorkerPool::~WorkerPool() { stop(); }

std::unique_ptr<WorkerPool::Lane> WorkerPool::lane(size_t max_running) {
  std::lock_guard lock(mu_);
  auto state = std::make_unique<LaneState>();
  state->max_running = std::max<size_t>(max_running, 1);
  state->closed = stopping_;
  LaneState& raw = *state;
  lanes_.push_back(std::move(state));
  return std::unique_ptr<Lane>(new Lane(*this, raw));
}

void WorkerPool::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    delayed_.clear();
    delayed_index_.clear();
    for (auto& lane : lanes_) lane->closed = true;
    threads.swap(threads_);
    work_cv_.notify_all();
    if (clock_waker_ != nullptr) clock_waker_->request_stop();
  }
  for (std::thread& t : threads) t.join();
  std::lock_guard lock(mu_);
  joined_ = true;
  idle_cv_.notify_all();
}

size_t WorkerPool::threadCount() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

bool WorkerPool::postLocked(LaneState& lane, Task task) {
  if (lane.closed) return false;
  lane.ready.emplace_back(next_id_++, std::move(task));
  wakeLocked();
  return true;
}

void WorkerPool::releaseDueLocked(Clock::TimePoint now) {
  size_t released = 0;
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    Delayed d = std::move(delayed_.begin()->second);
    delayed_index_.erase(d.id);
    delayed_.erase(delayed_.begin());
    d.lane->ready.emplace_back(next_id_++, std::move(d.task));
    ++released;
  }
  // The caller takes one; the others may need threads.
  if (released > 1) wakeLocked();
}

size_t WorkerPool::runnableLocked() const {
  size_t n = 0;
  for (const auto& lane : lanes_) {
    if (lane->running < lane->max_running) {
      n += std::min(lane->ready.size(), lane->max_running - lane->running);
    }
  }
  return n;
}

void WorkerPool::wakeLocked() {
  if (waiting_ > 0) {
    work_cv_.notify_all();
    if (clock_waker_ != nullptr) clock_waker_->request_stop();
  }
  if (stopping_) return;
  // The waiting threads count until they have woken, and the new ones until
  // they look for work; more runnable tasks than that need threads of their own.
  size_t runnable = runnableLocked();
  if (runnable == 0 && !delayed_.empty() && threads_.empty()) runnable = 1;
  while (runnable > waiting_ + starting_ && threads_.size() < max_threads_) {
    startThreadLocked();
    --runnable;
  }
}

void WorkerPool::startThreadLocked() {
  ++starting_;
  threads_.emplace_back([this] {
    setThreadName(thread_name_);
    loop();
  });
}

void WorkerPool::loop() {
  std::unique_lock lock(mu_);
  --starting_;
  for (;;) {
    releaseDueLocked(clock_.now());
    // The lane whose oldest ready task came first, among those under their bound.
    LaneState* next = nullptr;
    for (auto& lane : lanes_) {
      if (lane->ready.empty() || lane->running >= lane->max_running) continue;
      if (next == nullptr || lane->ready.front().first < next->ready.front().first) {
        next = lane.get();
      }
    }
    if (next != nullptr) {
      Task task = std::move(next->ready.front().second);
      next->ready.pop_front();
      ++next->running;
      lock.unlock();
      try {
        task();
      } catch (const std::exception& e) {
        // Tasks report their own errors; this is a bug, and the thread stays.
        log::error("A worker pool task threw", internalError(e.what()), {{"pool", thread_name_}});
      }
      lock.lock();
      --next->running;
      idle_cv_.notify_all();
      continue;
    }
    if (stopping_) return;
    // Until work arrives, or the earliest delayed task is due: one thread
    // sleeps on the Clock for it, the others on the condition variable.
    ++waiting_;
    if (!delayed_.empty() && clock_waker_ == nullptr) {
      std::stop_source wake;
      clock_waker_ = &wake;
      const Clock::TimePoint due = delayed_.begin()->first;
      lock.unlock();
      clock_.sleepUntil(due, wake.get_token());
      lock.lock();
      clock_waker_ = nullptr;
    } else {
      work_cv_.wait(lock);
    }
    --waiting_;
  }
}

WorkerPool::Lane::~Lane() { drain(); }

bool WorkerPool::Lane::post(Task task) {
  std::lock_guard lock(pool_.mu_);
  return pool_.postLocked(state_, std::move(task));
}

uint64_t WorkerPool::Lane::postAt(Clock::TimePoint due, Task task) {
  std::lock_guard lock(pool_.mu_);
  if (state_.closed) return 0;
  const uint64_t id = pool_.next_id_++;
  auto it = pool_.delayed_.emplace(due, Delayed{&state_, id, std::move(task)});
  pool_.delayed_index_.emplace(id, it);
  // Only a new earliest due time changes when the sleeper must wake.
  if (it == pool_.delayed_.begin()) pool_.wakeLocked();
  return id;
}

bool WorkerPool::Lane::cancel(uint64_t id) {
  std::lock_guard lock(pool_.mu_);
  auto it = pool_.delayed_index_.find(id);
  if (it == pool_.delayed_index_.end()) return false;
  pool_.delayed_.erase(it->second);
  pool_.delayed_index_.erase(it);
  return true;
}

void WorkerPool::Lane::drain() {
  std::unique_lock lock(pool_.mu_);
  state_.closed = true;
  std::erase_if(pool_.delayed_index_, [&](const auto& entry) {
    if (entry.second->second.lane != &state_) return false;
    pool_.delayed_.erase(entry.second);
    return true;
  });
  pool_.idle_cv_.wait(
      lock, [&] { return state_.running == 0 && (state_.ready.empty() || pool_.joined_); });
}

}  // namespace rsc
