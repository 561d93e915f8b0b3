#include "common/clock.h"

#include <ctime>
#include <thread>

namespace rsc {

Clock::TimePoint RealClock::now() const { return std::chrono::steady_clock::now(); }

Clock::SystemTime RealClock::systemNow() const { return std::chrono::system_clock::now(); }

void RealClock::sleepFor(Duration d) { std::this_thread::sleep_for(d); }

RealClock& RealClock::instance() {
  static RealClock clock;
  return clock;
}

namespace {

std::string format(Clock::SystemTime t, bool micros) {
  const auto since_epoch = t.time_since_epoch();
  const auto secs = std::chrono::floor<std::chrono::seconds>(since_epoch);
  const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(since_epoch - secs);
  const auto tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf, n);
  if (micros) {
    char frac[24];
    std::snprintf(frac, sizeof(frac), ".%06lld", static_cast<long long>(usec.count()));
    out += frac;
  }
  out += 'Z';
  return out;
}

}  // namespace

std::string formatMicroTime(Clock::SystemTime t) { return format(t, true); }
std::string formatTime(Clock::SystemTime t) { return format(t, false); }

}  // namespace rsc
