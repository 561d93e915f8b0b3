// FakeClock: a Clock that moves only when a test says so, so that backoff,
// lease and timeout logic runs without sleeping. sleepFor() advances the clock
// by the requested time at once and records it. Thread-safe.
#pragma once

#include <mutex>
#include <vector>

#include "common/clock.h"

namespace rsc::testing {

class FakeClock final : public Clock {
 public:
  FakeClock();

  TimePoint now() const override;
  SystemTime systemNow() const override;
  void sleepFor(Duration d) override;

  // Moves both clocks forward by `d`.
  void advance(Duration d);
  // Returns every duration passed to sleepFor, in order.
  std::vector<Duration> sleeps() const;

 private:
  mutable std::mutex mu_;
  TimePoint now_;
  SystemTime system_now_;
  std::vector<Duration> sleeps_;
};

}  // namespace rsc::testing
