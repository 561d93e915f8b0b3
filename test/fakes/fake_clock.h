// FakeClock: a Clock that moves only when a test says so, so that backoff,
// lease and timeout logic runs without sleeping. What sleepFor() does is
// chosen at construction: Sleeps::kAdvance moves the clock by the requested
// time at once, for code that sleeps on the test's own thread; Sleeps::kBlock
// blocks the sleeper until the test advances the clock past its deadline, for
// code that sleeps on threads of its own (informers, housekeeping), so that
// time moves only when the test says and the test can tell, without polling,
// that those threads have nothing to do (waitForSleepers(), BlockedThreads).
// Every sleep is recorded. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include "common/clock.h"
#include "test/fakes/blocked_threads.h"

namespace rsc::testing {

class FakeClock final : public Clock {
 public:
  enum class Sleeps { kAdvance, kBlock };

  // `blocked`, when given, is told how many threads sleep; it must outlive
  // this clock.
  explicit FakeClock(Sleeps sleeps = Sleeps::kAdvance, BlockedThreads* blocked = nullptr);

  TimePoint now() const override;
  SystemTime systemNow() const override;
  void sleepFor(Duration d) override;
  // As sleepFor(deadline - now()), and a stop on `wake` ends it early (Sleeps::kBlock: the
  // sleeper stops counting then; Sleeps::kAdvance: the clock does not move).
  void sleepUntil(TimePoint deadline, std::stop_token wake) override;

  // Moves both clocks forward by `d`, and wakes the sleepers whose deadline
  // has come.
  void advance(Duration d);
  // Returns every duration passed to sleepFor, in order.
  std::vector<Duration> sleeps() const;

  // Sleeps::kBlock. The number of threads asleep; a sleeper stops counting
  // as soon as advance() passes its deadline, before it runs again.
  size_t sleepers() const;
  // Blocks until `n` threads are asleep. The timeout is a safety net, never
  // the synchronisation. Returns false on timeout.
  bool waitForSleepers(size_t n,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // The earliest deadline of a sleeper, if any thread sleeps.
  std::optional<TimePoint> nextWakeup() const;
  // Advances the clock to the earliest sleeper's deadline, waking it (and any
  // other sleeper due by then). Returns false, and moves nothing, when no
  // thread sleeps.
  bool advanceToNextWakeup();
  // Ends blocking for good: sleepers return at once and later sleeps move
  // the clock as with Sleeps::kAdvance. Clock::sleepFor cannot be
  // interrupted, so a test calls this before it stops and joins threads
  // that may be asleep.
  void stopBlocking();

 private:
  void advanceLocked(Duration d);
  // Tells `blocked_` how many threads sleep.
  void reportLocked();

  BlockedThreads* const blocked_;
  mutable std::mutex mu_;
  // _any: sleepUntil() waits on a stop token too.
  mutable std::condition_variable_any cv_;
  bool blocking_;
  TimePoint now_;
  SystemTime system_now_;
  std::vector<Duration> sleeps_;
  // The deadlines of the threads asleep; advance() removes those that came.
  std::multiset<TimePoint> deadlines_;
};

}  // namespace rsc::testing
