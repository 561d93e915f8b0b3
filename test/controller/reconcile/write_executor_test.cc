#include "controller/reconcile/write_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace rsc::controller::reconcile {
namespace {

TEST(WriteExecutorTest, EveryCallRunsOnceAndNoThreadStartsWithoutParallelWork) {
  WriteExecutor executor(7);
  std::vector<std::atomic<int>> calls(100);
  EXPECT_TRUE(executor
                  .forEach(calls.size(), 1,
                           [&](size_t i) {
                             calls[i]++;
                             return Status();
                           })
                  .ok());
  for (const auto& c : calls) EXPECT_EQ(c.load(), 1);
  EXPECT_EQ(executor.threadCount(), 0u) << "parallelism 1 runs on the caller";
  EXPECT_TRUE(executor.forEach(1, 8, [](size_t) { return Status(); }).ok());
  EXPECT_EQ(executor.threadCount(), 0u) << "one call runs on the caller";
}

// The calls of one step run side by side: all of them wait at one barrier,
// which only parallelism n lets them pass.
TEST(WriteExecutorTest, AStepRunsItsCallsSideBySideAndLaterStepsStartNoThread) {
  WriteExecutor executor(7);
  for (int step = 0; step < 3; ++step) {
    std::barrier all(8);
    std::mutex mu;
    std::set<std::thread::id> threads;
    EXPECT_TRUE(executor
                    .forEach(8, 8,
                             [&](size_t) {
                               all.arrive_and_wait();
                               std::lock_guard lock(mu);
                               threads.insert(std::this_thread::get_id());
                               return Status();
                             })
                    .ok());
    EXPECT_EQ(threads.size(), 8u);
    EXPECT_EQ(executor.threadCount(), 7u) << "step " << step;
  }
}

// Several reconciles stepping at once share the bound: the helpers in all
// never exceed it, and every step still finishes (each caller runs its own
// share when no helper is free).
TEST(WriteExecutorTest, ConcurrentStepsShareTheBound) {
  WriteExecutor executor(3);
  std::atomic<int> running{0};
  std::atomic<int> most{0};
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&] {
      for (int step = 0; step < 20; ++step) {
        Status s = executor.forEach(16, 8, [&](size_t) {
          const int now = ++running;
          int seen = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          std::this_thread::yield();
          --running;
          ++total;
          return Status();
        });
        EXPECT_TRUE(s.ok());
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 6 * 20 * 16);
  EXPECT_LE(executor.threadCount(), 3u);
  EXPECT_LE(most.load(), 6 + 3) << "the callers and the helpers, no more";
}

TEST(WriteExecutorTest, AfterAFailureNoCallStartsAndTheFirstFailureIsReturned) {
  WriteExecutor executor(0);
  std::atomic<int> calls{0};
  Status s = executor.forEach(10, 4, [&](size_t i) {
    ++calls;
    return i == 2 ? conflict("slice 2") : Status();
  });
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.message(), "slice 2");
  EXPECT_EQ(calls.load(), 3) << "without helpers, calls run in order and stop at the failure";
}

}  // namespace
}  // namespace rsc::controller::reconcile
