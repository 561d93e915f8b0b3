// Clock: the only way code in this project reads time or sleeps, so that tests
// can run time-dependent logic (backoff, leases, timeouts) without sleeping.
// RealClock is the production implementation; FakeClock (test/fakes) the test
// one. Implementations are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

namespace rsc {

class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;
  using SystemTime = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;

  // Returns monotonic time, for measuring intervals and deadlines.
  virtual TimePoint now() const = 0;
  // Returns wall-clock time, for timestamps written into objects and logs.
  virtual SystemTime systemNow() const = 0;
  // Blocks the calling thread for `d` of this clock's time.
  virtual void sleepFor(Duration d) = 0;
  // Blocks the calling thread until now() reaches `deadline` or a stop is requested on `wake`,
  // whichever comes first: the one wait that can be cut short, for a thread that waits for the
  // earliest of many due times and must wake when an earlier one arrives (a std::stop_source
  // per wait, stopped under the waiter's lock, loses no wake-up). The caller reads now() again
  // to tell which. This default sleeps in steps of sleepFor(), looking at `wake` between them.
  virtual void sleepUntil(TimePoint deadline, std::stop_token wake);
};

class RealClock final : public Clock {
 public:
  TimePoint now() const override;
  SystemTime systemNow() const override;
  void sleepFor(Duration d) override;
  void sleepUntil(TimePoint deadline, std::stop_token wake) override;

  // Returns the process-wide real clock.
  static RealClock& instance();
};

// Formats `t` as an RFC 3339 UTC timestamp with microseconds, the format of
// Kubernetes MicroTime ("2026-11-30T03:01:14.123456Z").
std::string formatMicroTime(Clock::SystemTime t);
// Formats `t` as an RFC 3339 UTC timestamp with seconds (metav1.Time).
std::string formatTime(Clock::SystemTime t);
// Seconds since the epoch of an RFC 3339 time ("2026-12-01T10:00:00Z",
// fractions and offsets allowed, as metav1.Time parses it), fractions dropped
// (the API server stores metav1.Time to the second); nullopt when `s` is not one.
std::optional<int64_t> rfc3339Seconds(std::string_view s);

}  // namespace rsc
