#include "test/fakes/fake_clock.h"

#include <algorithm>

namespace rsc::testing {

// Starts at a fixed, recognisable wall time (2026-01-01T00:00:00Z) so that
// timestamps in test expectations are stable.
FakeClock::FakeClock(Sleeps sleeps, BlockedThreads* blocked)
    : blocked_(blocked),
      blocking_(sleeps == Sleeps::kBlock),
      now_(TimePoint(std::chrono::hours(1000))),
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
  std::unique_lock lock(mu_);
  sleeps_.push_back(d);
  if (!blocking_) {
    advanceLocked(d);
    return;
  }
  if (d <= Duration::zero()) return;
  const TimePoint deadline = now_ + d;
  deadlines_.insert(deadline);
  reportLocked();
  cv_.notify_all();
  // advance() and stopBlocking() take the deadline out of deadlines_.
  cv_.wait(lock, [&] { return now_ >= deadline || !blocking_; });
}

void FakeClock::sleepUntil(TimePoint deadline, std::stop_token wake) {
  std::unique_lock lock(mu_);
  sleeps_.push_back(std::max(deadline - now_, Duration::zero()));
  if (wake.stop_requested() || deadline <= now_) return;
  if (!blocking_) {
    advanceLocked(deadline - now_);
    return;
  }
  deadlines_.insert(deadline);
  reportLocked();
  cv_.notify_all();
  cv_.wait(lock, wake, [&] { return now_ >= deadline || !blocking_; });
  if (now_ < deadline && blocking_) {
    // Woken early: advance() and stopBlocking() did not take the deadline out.
    deadlines_.erase(deadlines_.find(deadline));
    reportLocked();
    cv_.notify_all();
  }
}

void FakeClock::advance(Duration d) {
  std::lock_guard lock(mu_);
  advanceLocked(d);
}

void FakeClock::advanceLocked(Duration d) {
  now_ += d;
  system_now_ += std::chrono::duration_cast<std::chrono::system_clock::duration>(d);
  if (deadlines_.empty() || *deadlines_.begin() > now_) return;
  deadlines_.erase(deadlines_.begin(), deadlines_.upper_bound(now_));
  reportLocked();
  cv_.notify_all();
}

std::vector<Clock::Duration> FakeClock::sleeps() const {
  std::lock_guard lock(mu_);
  return sleeps_;
}

size_t FakeClock::sleepers() const {
  std::lock_guard lock(mu_);
  return deadlines_.size();
}

bool FakeClock::waitForSleepers(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return deadlines_.size() == n; });
}

std::optional<Clock::TimePoint> FakeClock::nextWakeup() const {
  std::lock_guard lock(mu_);
  if (deadlines_.empty()) return std::nullopt;
  return *deadlines_.begin();
}

bool FakeClock::advanceToNextWakeup() {
  std::lock_guard lock(mu_);
  if (deadlines_.empty()) return false;
  advanceLocked(*deadlines_.begin() - now_);
  return true;
}

void FakeClock::stopBlocking() {
  std::lock_guard lock(mu_);
  blocking_ = false;
  deadlines_.clear();
  reportLocked();
  cv_.notify_all();
}

void FakeClock::reportLocked() {
  if (blocked_ != nullptr) blocked_->set(this, deadlines_.size());
}

}  // namespace rsc::testing
