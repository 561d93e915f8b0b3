#include "test/fakes/fake_clock.h"

namespace rsc::testing {

// Starts at a fixed, recognisable wall time (2026-01-01T00:00:00Z) so that
// timestamps in test expectations are stable.
FakeClock::FakeClock()
    : now_(TimePoint(std::chrono::hours(1000))),
      system_now_(SystemTime(std::chrono::seconds(1767225600))) {}

Clock::TimePoint FakeClock::now() const {
  std::lock_guard lock(mu_);
  return now_;
}

Clock::SystemTime FakeClock::systemNow() const {
  std::lock_guard lock(mu_);
  return system_now_;
}

void FakeClock::sleepFor(Duration d) {
  std::lock_guard lock(mu_);
  sleeps_.push_back(d);
  now_ += d;
  system_now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
}

void FakeClock::advance(Duration d) {
  std::lock_guard lock(mu_);
  now_ += d;
  system_now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
}

std::vector<Clock::Duration> FakeClock::sleeps() const {
  std::lock_guard lock(mu_);
  return sleeps_;
}

}  // namespace rsc::testing
