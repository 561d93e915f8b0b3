#include "controller/runnable_group.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rsc::controller {
namespace {

// The order of starts and stops the parts saw, as "+name" and "-name".
class Journal {
 public:
  void note(std::string entry) {
    std::lock_guard lock(mu_);
    entries_.push_back(std::move(entry));
  }
  std::vector<std::string> entries() {
    std::lock_guard lock(mu_);
    return entries_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> entries_;
};

class RunnableGroupTest : public ::testing::Test {
 protected:
  // A part that notes its start and stop, and starts with `result`.
  void addPart(const std::string& name, Status result = {}) {
    group_.add(
        name,
        [this, name, result](std::stop_token) {
          journal_.note("+" + name);
          return result;
        },
        [this, name] { journal_.note("-" + name); });
  }

  std::stop_source stop_;
  int stop_requests_ = 0;
  RunnableGroup group_{stop_.get_token(), [this] {
                         ++stop_requests_;
                         stop_.request_stop();
                       }};
  Journal journal_;
};

TEST_F(RunnableGroupTest, StartsInOrderAndStopsInReverseOnAStop) {
  addPart("a");
  addPart("b");
  addPart("c");
  std::future<Status> ran = std::async(std::launch::async, [this] { return group_.run(); });
  // run() waits for the stop once every part started.
  EXPECT_EQ(ran.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout);
  stop_.request_stop();
  EXPECT_TRUE(ran.get().ok());
  EXPECT_EQ(journal_.entries(), (std::vector<std::string>{"+a", "+b", "+c", "-c", "-b", "-a"}));
  EXPECT_EQ(group_.failedPart(), std::nullopt);
  EXPECT_EQ(stop_requests_, 0) << "a stop from outside is not a failure";
}

TEST_F(RunnableGroupTest, APartThatCannotStartStopsThoseBeforeItAndIsNamed) {
  addPart("health server");
  addPart("inventory server", unavailable("address already in use"));
  addPart("never started");
  const Status s = group_.run();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "inventory server: address already in use");
  EXPECT_EQ(group_.failedPart(), "inventory server");
  EXPECT_EQ(stop_requests_, 1);
  EXPECT_EQ(journal_.entries(),
            (std::vector<std::string>{"+health server", "+inventory server", "-health server"}));
}

TEST_F(RunnableGroupTest, AFailureWhileRunningStopsEveryPartAndTheFirstIsReported) {
  std::function<void(Status)> fail_b;
  addPart("a");
  group_.add("b", [&](std::stop_token) {
    fail_b = group_.failer("b");
    return Status();
  });
  std::promise<void> running;
  group_.add(
      "c",
      [&](std::stop_token) {
        journal_.note("+c");
        running.set_value();
        return Status();
      },
      [this] { journal_.note("-c"); });
  std::future<Status> ran = std::async(std::launch::async, [this] { return group_.run(); });
  running.get_future().wait();
  // From another thread, as a Lease lost would be; a second failure changes nothing.
  std::thread([&] { fail_b(failedPrecondition("leader lease lost")); }).join();
  group_.fail("c", internalError("later"));
  const Status s = ran.get();
  EXPECT_EQ(s.message(), "b: leader lease lost");
  EXPECT_EQ(group_.failedPart(), "b");
  EXPECT_EQ(stop_requests_, 1);
  EXPECT_EQ(journal_.entries(), (std::vector<std::string>{"+a", "+c", "-c", "-a"}));
}

TEST_F(RunnableGroupTest, AStartCutShortByTheStopIsNotAFailure) {
  addPart("a");
  std::promise<void> waiting;
  group_.add("waits for a first sync", [&waiting](std::stop_token stop) {
    waiting.set_value();
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait(lock, stop, [] { return false; });
    return cancelled("stopped before the first sync");
  });
  addPart("never started");
  std::future<Status> ran = std::async(std::launch::async, [this] { return group_.run(); });
  waiting.get_future().wait();
  stop_.request_stop();
  EXPECT_TRUE(ran.get().ok());
  EXPECT_EQ(group_.failedPart(), std::nullopt);
  EXPECT_EQ(journal_.entries(), (std::vector<std::string>{"+a", "-a"}));
}

TEST_F(RunnableGroupTest, AStopBeforeRunStartsNothing) {
  addPart("a");
  stop_.request_stop();
  EXPECT_TRUE(group_.run().ok());
  EXPECT_TRUE(journal_.entries().empty());
}

}  // namespace
}  // namespace rsc::controller
