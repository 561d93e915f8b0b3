// WriteExecutor: the helper threads that run a reconcile's slice writes side
// by side (the creates and changes of a bump, then its generation updates,
// then its deletes). One per Reconciler, shared by every reconcile, so that
// however many workers write at once, at most `threads` helpers run in all
// (--max-parallel-slice-writes - 1). Threads start on first demand and stay
// until the executor goes: a controller that never wrote in parallel has
// none, and later steps start no new ones.
// Threading: forEach() may be called from many threads at once; each caller
// runs a share of its own calls, so a step never waits for a free helper.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"

namespace rsc::controller::reconcile {

class WriteExecutor {
 public:
  explicit WriteExecutor(size_t threads);
  // Joins the helpers; no forEach() may be running.
  ~WriteExecutor();

  WriteExecutor(const WriteExecutor&) = delete;
  WriteExecutor& operator=(const WriteExecutor&) = delete;

  // Calls fn(i) for every i in [0, n), up to `parallelism` at once, the
  // caller's thread included, and returns when every call has returned.
  // After a failure no further call starts (those under way finish); returns
  // the first failure.
  Status forEach(size_t n, size_t parallelism, const std::function<Status(size_t)>& fn);

  // Helper threads started so far (at most `threads`).
  size_t threadCount() const;

 private:
  struct Batch;
  void helperLoop();

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // One entry per helper a batch asked for, not yet taken.
  std::deque<std::shared_ptr<Batch>> slots_;  // guarded by mu_
  size_t idle_ = 0;                           // guarded by mu_: helpers waiting for a slot
  bool stopping_ = false;                     // guarded by mu_
  std::vector<std::thread> threads_;          // guarded by mu_
};

}  // namespace rsc::controller::reconcile
