#include "controller/shutdown_signals.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <future>
#include <memory>
#include <mutex>
#include <optional>

#include "test/fakes/fake_clock.h"

namespace rsc::controller {
namespace {

using std::chrono::milliseconds;

// As main() does before any thread starts: the stop signals are taken only
// by sigwait on ShutdownSignals' thread, never by a default handler.
const bool kSignalsBlocked = [] {
  const sigset_t signals = stopSignals();
  return pthread_sigmask(SIG_BLOCK, &signals, nullptr) == 0;
}();

// Records the exit code the process would have ended with.
class ExitRecorder {
 public:
  std::function<void(int)> callback() {
    return [this](int code) {
      std::lock_guard lock(mu_);
      if (!code_) {
        code_ = code;
        exited_.set_value();
      }
    };
  }
  // Blocks until an exit was asked for (the timeout is a safety net).
  std::optional<int> wait() {
    if (future_.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      return std::nullopt;
    }
    std::lock_guard lock(mu_);
    return code_;
  }
  std::optional<int> code() {
    std::lock_guard lock(mu_);
    return code_;
  }

 private:
  std::mutex mu_;
  std::optional<int> code_;
  std::promise<void> exited_;
  std::future<void> future_ = exited_.get_future();
};

class ShutdownSignalsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(kSignalsBlocked); }
  // Ends the fake clock's blocking, so that a watchdog still asleep returns.
  void TearDown() override { clock_.stopBlocking(); }

  // Signals with a timeout of `timeout`, stopped by requestStop() (when
  // `stopped`), with the watchdog asleep on the clock.
  std::unique_ptr<ShutdownSignals> make(milliseconds timeout, bool stopped) {
    auto signals = std::make_unique<ShutdownSignals>(clock_, timeout, exits_.callback());
    if (stopped) {
      signals->requestStop();
      EXPECT_TRUE(clock_.waitForSleepers(1));
    }
    return signals;
  }

  testing::FakeClock clock_{testing::FakeClock::Sleeps::kBlock};
  ExitRecorder exits_;
};

TEST_F(ShutdownSignalsTest, TheFirstSignalStopsAndASecondOneExitsWithCode1) {
  std::unique_ptr<ShutdownSignals> signals = make(milliseconds(30000), /*stopped=*/false);
  EXPECT_FALSE(signals->token().stop_requested());
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  signals->wait();
  EXPECT_TRUE(signals->token().stop_requested());
  EXPECT_FALSE(signals->abandonToken().stop_requested());

  ASSERT_EQ(kill(getpid(), SIGINT), 0);
  EXPECT_EQ(exits_.wait(), 1) << "a second signal ends the process at once";
  clock_.stopBlocking();  // the watchdog sleeps
}

// The watchdog waits on the clock: three quarters into the timeout API calls
// are abandoned, at the timeout the process exits with code 1.
TEST_F(ShutdownSignalsTest, AShutdownThatOutlastsTheTimeoutAbandonsCallsThenExits) {
  std::unique_ptr<ShutdownSignals> signals = make(milliseconds(1000), /*stopped=*/true);
  signals->requestStop();  // once is enough: one watchdog
  signals->wait();
  clock_.advance(milliseconds(749));
  ASSERT_TRUE(clock_.waitForSleepers(1));
  EXPECT_FALSE(signals->abandonToken().stop_requested());
  clock_.advance(milliseconds(1));
  ASSERT_TRUE(clock_.waitForSleepers(1));  // asleep again, until the timeout
  EXPECT_TRUE(signals->abandonToken().stop_requested());
  EXPECT_EQ(exits_.code(), std::nullopt);
  clock_.advance(milliseconds(250));
  EXPECT_EQ(exits_.wait(), 1);
}

TEST_F(ShutdownSignalsTest, AShutdownThatFinishesInTimeExitsNothing) {
  make(milliseconds(1000), /*stopped=*/true).reset();  // finished: both threads end
  EXPECT_EQ(exits_.code(), std::nullopt);
  EXPECT_EQ(clock_.sleepers(), 0U);
}

}  // namespace
}  // namespace rsc::controller
