#include "common/clock.h"

#include <algorithm>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <thread>

namespace rsc {

Clock::TimePoint RealClock::now() const { return std::chrono::steady_clock::now(); }

Clock::SystemTime RealClock::systemNow() const { return std::chrono::system_clock::now(); }

void RealClock::sleepFor(Duration d) { std::this_thread::sleep_for(d); }

void Clock::sleepUntil(TimePoint deadline, std::stop_token wake) {
  // How often a clock without a wait of its own looks at `wake`.
  constexpr Duration kStep = std::chrono::milliseconds(100);
  for (TimePoint now = this->now(); now < deadline && !wake.stop_requested(); now = this->now()) {
    sleepFor(std::min(deadline - now, kStep));
  }
}

void RealClock::sleepUntil(TimePoint deadline, std::stop_token wake) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  // Nothing but `wake` notifies cv; the predicate only ends the wait on a stop.
  cv.wait_until(lock, wake, deadline, [] { return false; });
}

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

std::optional<int64_t> rfc3339Seconds(std::string_view s) {
  auto number = [&](size_t pos, size_t len) -> std::optional<int> {
    if (pos + len > s.size()) {
      return std::nullopt;
    }
    int value = 0;
    for (size_t i = pos; i < pos + len; ++i) {
      if (s[i] < '0' || s[i] > '9') {
        return std::nullopt;
      }
      value = value * 10 + (s[i] - '0');
    }
    return value;
  };
  auto year = number(0, 4), month = number(5, 2), day = number(8, 2);
  auto hour = number(11, 2), minute = number(14, 2), second = number(17, 2);
  if (!year || !month || !day || !hour || !minute || !second || s[4] != '-' || s[7] != '-' ||
      (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  size_t pos = 19;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
      ++pos;
    }
  }
  int64_t offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    auto off_hour = number(pos + 1, 2), off_minute = number(pos + 4, 2);
    if (!off_hour || !off_minute || s[pos + 3] != ':') {
      return std::nullopt;
    }
    offset = (s[pos] == '-' ? -1 : 1) * (int64_t{*off_hour} * 3600 + int64_t{*off_minute} * 60);
    pos += 6;
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) {
    return std::nullopt;
  }
  std::chrono::year_month_day date{std::chrono::year(*year),
                                   std::chrono::month(static_cast<unsigned>(*month)),
                                   std::chrono::day(static_cast<unsigned>(*day))};
  if (!date.ok()) {
    return std::nullopt;
  }
  int64_t days = std::chrono::sys_days(date).time_since_epoch().count();
  return days * 86400 + int64_t{*hour} * 3600 + int64_t{*minute} * 60 + *second - offset;
}

}  // namespace rsc
