#include "controller/reconcile/write_executor.h"

#include <algorithm>
#include <atomic>

#include "common/thread_name.h"

namespace rsc::controller::reconcile {

// One forEach() call: its calls, the next index to take, and how many
// helpers are running it.
struct WriteExecutor::Batch {
  Batch(size_t count, const std::function<Status(size_t)>& f) : n(count), fn(f) {}

  // Takes calls until none is left or one failed.
  void run() {
    for (size_t i = next++; i < n && !failed.load(); i = next++) {
      Status s = fn(i);
      if (s.ok()) continue;
      std::lock_guard lock(mu);
      if (!failed.exchange(true)) first = std::move(s);
    }
  }

  const size_t n;
  const std::function<Status(size_t)>& fn;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable done_cv;
  Status first;        // guarded by mu
  size_t running = 0;  // guarded by mu: helpers inside run()
};

WriteExecutor::WriteExecutor(size_t threads) : max_threads_(threads) {}

WriteExecutor::~WriteExecutor() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

size_t WriteExecutor::threadCount() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

Status WriteExecutor::forEach(size_t n, size_t parallelism,
                              const std::function<Status(size_t)>& fn) {
  if (n == 0) return okStatus();
  auto batch = std::make_shared<Batch>(n, fn);
  const size_t helpers = std::min({n, std::max<size_t>(parallelism, 1)}) - 1;
  if (helpers > 0 && max_threads_ > 0) {
    std::lock_guard lock(mu_);
    for (size_t h = 0; h < helpers; ++h) slots_.push_back(batch);
    // Start helpers on demand, up to the bound: as many as there are slots
    // no idle helper will take.
    while (idle_ < slots_.size() && threads_.size() < max_threads_) {
      threads_.emplace_back([this] {
        setThreadName("slice-writes");
        helperLoop();
      });
      ++idle_;  // counted as idle until it takes a slot
    }
  }
  cv_.notify_all();

  // The caller takes its share, then withdraws the slots no helper took and
  // waits for the helpers inside the batch.
  batch->run();
  {
    std::lock_guard lock(mu_);
    std::erase(slots_, batch);
  }
  std::unique_lock lock(batch->mu);
  batch->done_cv.wait(lock, [&] { return batch->running == 0; });
  return batch->first;
}

void WriteExecutor::helperLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !slots_.empty(); });
    if (stopping_) return;
    std::shared_ptr<Batch> batch = std::move(slots_.front());
    slots_.pop_front();
    --idle_;
    {
      // Under mu_: the caller's withdrawal of the slots sees this helper.
      std::lock_guard inside(batch->mu);
      ++batch->running;
    }
    lock.unlock();
    batch->run();
    {
      std::lock_guard inside(batch->mu);
      --batch->running;
    }
    batch->done_cv.notify_all();
    lock.lock();
    ++idle_;
  }
}

}  // namespace rsc::controller::reconcile
