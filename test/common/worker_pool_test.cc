// WorkerPool: threads on demand, each lane's bound, delayed tasks on the
// Clock (a blocking FakeClock, so time moves only when the test says).
#include "common/worker_pool.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <string>

#include "test/fakes/fake_clock.h"

namespace rsc {
namespace {

using namespace std::chrono_literals;
using testing::FakeClock;

class WorkerPoolTest : public ::testing::Test {
 protected:
  void TearDown() override {
    clock_.stopBlocking();
    pool_.stop();
  }

  FakeClock clock_{FakeClock::Sleeps::kBlock};
  WorkerPool pool_{clock_, "test-work", 4};
};

std::string threadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

TEST_F(WorkerPoolTest, StartsNamedThreadsOnDemandOnly) {
  auto lane = pool_.lane(2);
  EXPECT_EQ(pool_.threadCount(), 0U) << "no work, no thread";
  std::promise<std::string> ran;
  ASSERT_TRUE(lane->post([&] { ran.set_value(threadName()); }));
  std::future<std::string> name = ran.get_future();
  ASSERT_EQ(name.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(name.get(), "test-work");
  lane->drain();
  EXPECT_EQ(pool_.threadCount(), 1U);
}

// Tasks of one lane run side by side up to its bound: three tasks that each
// wait for all three to be running finish only if they run at once.
TEST_F(WorkerPoolTest, RunsALanesTasksSideBySideUpToItsBound) {
  auto lane = pool_.lane(3);
  std::latch all_running(3);
  std::atomic<int> finished = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(lane->post([&] {
      all_running.arrive_and_wait();
      ++finished;
    }));
  }
  lane->drain();
  EXPECT_EQ(finished, 3);
  EXPECT_EQ(pool_.threadCount(), 3U);
}

// A lane at its bound leaves the other threads to the other lanes: scrapes
// stuck on reviews do not delay pushes, nor the reverse.
TEST_F(WorkerPoolTest, ALaneAtItsBoundDoesNotStarveAnother) {
  auto slow = pool_.lane(1);
  auto other = pool_.lane(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> slow_ran = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(slow->post([&, released] {
      ++slow_ran;
      released.wait();
    }));
  }
  std::promise<void> other_ran;
  ASSERT_TRUE(other->post([&] { other_ran.set_value(); }));
  EXPECT_EQ(other_ran.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(slow_ran, 1) << "one of the slow lane's tasks at a time";
  release.set_value();
  slow->drain();
  EXPECT_EQ(slow_ran, 3);
  EXPECT_LE(pool_.threadCount(), 2U);
}

TEST_F(WorkerPoolTest, RunsADelayedTaskWhenTheClockReachesIt) {
  auto lane = pool_.lane(1);
  std::promise<void> ran;
  std::future<void> done = ran.get_future();
  ASSERT_NE(lane->postAt(clock_.now() + 10s, [&] { ran.set_value(); }), 0U);
  ASSERT_TRUE(clock_.waitForSleepers(1));
  EXPECT_EQ(pool_.threadCount(), 1U) << "one thread sleeps for it";
  // An earlier one wakes the sleeper, which then sleeps until it.
  std::promise<void> earlier_ran;
  std::future<void> earlier = earlier_ran.get_future();
  ASSERT_NE(lane->postAt(clock_.now() + 1s, [&] { earlier_ran.set_value(); }), 0U);
  clock_.advance(1s);
  EXPECT_EQ(earlier.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(done.wait_for(0s), std::future_status::timeout);
  ASSERT_TRUE(clock_.waitForSleepers(1));
  clock_.advance(9s);
  EXPECT_EQ(done.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(pool_.threadCount(), 1U);
}

TEST_F(WorkerPoolTest, ACancelledDelayedTaskNeverRuns) {
  auto lane = pool_.lane(1);
  std::atomic<bool> ran = false;
  const uint64_t id = lane->postAt(clock_.now() + 1s, [&] { ran = true; });
  ASSERT_TRUE(clock_.waitForSleepers(1));
  EXPECT_TRUE(lane->cancel(id));
  EXPECT_FALSE(lane->cancel(id));
  clock_.advance(1s);
  lane->drain();
  EXPECT_FALSE(ran);
}

// drain() waits for the lane's work, drops its delayed tasks and refuses
// more; the pool and its other lanes go on.
TEST_F(WorkerPoolTest, DrainWaitsForTheLaneAndRefusesMore) {
  auto lane = pool_.lane(2);
  auto other = pool_.lane(1);
  std::atomic<int> ran = 0;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(lane->post([&] { ++ran; }));
  std::atomic<bool> delayed_ran = false;
  ASSERT_NE(lane->postAt(clock_.now() + 1s, [&] { delayed_ran = true; }), 0U);
  lane->drain();
  EXPECT_EQ(ran, 5);
  EXPECT_FALSE(lane->post([&] { ++ran; }));
  EXPECT_EQ(lane->postAt(clock_.now(), [&] { ++ran; }), 0U);
  std::promise<void> other_ran;
  ASSERT_TRUE(other->post([&] { other_ran.set_value(); }));
  EXPECT_EQ(other_ran.get_future().wait_for(10s), std::future_status::ready);
  clock_.advance(1s);
  other->drain();
  EXPECT_FALSE(delayed_ran);
  EXPECT_EQ(ran, 5);
}

TEST_F(WorkerPoolTest, StopRunsWhatIsQueuedAndRefusesMore) {
  auto lane = pool_.lane(1);
  std::atomic<int> ran = 0;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(lane->post([&] { ++ran; }));
  ASSERT_NE(lane->postAt(clock_.now() + 1s, [&] { ran += 100; }), 0U);
  pool_.stop();
  EXPECT_EQ(ran, 3);
  EXPECT_FALSE(lane->post([&] { ++ran; }));
  EXPECT_EQ(pool_.threadCount(), 0U);
  lane->drain();
}

}  // namespace
}  // namespace rsc
