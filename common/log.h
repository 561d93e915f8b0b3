// Structured logging, one line per event: klog-like text or JSON, chosen once
// by main (--log-format, -v). Keys such as driver and pool make every line of a
// pool's history greppable. Thread-safe: lines from concurrent threads never
// interleave.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <map>
#include <mutex>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/clock.h"
#include "common/status.h"

namespace rsc::log {

enum class Format { kText, kJson };

// One key/value pair of a log line; numbers and booleans are kept unquoted in
// JSON.
class Field {
 public:
  Field(std::string_view key, std::string_view value) : key_(key), value_(value) {}
  Field(std::string_view key, const char* value) : key_(key), value_(value) {}
  Field(std::string_view key, const std::string& value) : key_(key), value_(value) {}
  Field(std::string_view key, bool value)
      : key_(key), value_(value ? "true" : "false"), raw_(true) {}
  template <typename T>
  requires std::is_arithmetic_v<T> Field(std::string_view key, T value)
      : key_(key), value_(std::to_string(value)), raw_(true) {}

  const std::string& key() const { return key_; }
  const std::string& value() const { return value_; }
  // True when the value is a JSON number or boolean, not a string.
  bool raw() const { return raw_; }

 private:
  std::string key_;
  std::string value_;
  bool raw_ = false;
};

using Fields = std::initializer_list<Field>;

// Sets the format, the verbosity (-v) and the stream (stderr if null).
// Call before starting threads that log.
void configure(Format format, int verbosity, std::ostream* out = nullptr);
// Returns true when messages of verbosity `level` are written.
bool enabled(int level);

void info(std::string_view message, Fields fields = {},
          std::source_location loc = std::source_location::current());
void warning(std::string_view message, Fields fields = {},
             std::source_location loc = std::source_location::current());
void error(std::string_view message, const Status& err, Fields fields = {},
           std::source_location loc = std::source_location::current());
// Writes a debug message when -v is at least `level`.
void debug(int level, std::string_view message, Fields fields = {},
           std::source_location loc = std::source_location::current());

// Rate-limits a log line that a client can provoke at will (a refused
// connection, a rejected token): the first line of each key passes, then at
// most one per interval, and the line that passes says how many were held
// back. Keys are few and fixed (reasons, not client addresses). Thread-safe.
class Throttle {
 public:
  explicit Throttle(Clock& clock, Clock::Duration interval = std::chrono::seconds(10))
      : clock_(clock), interval_(interval) {}

  // Returns nullopt when the line for `key` should be held back now; else the
  // number of lines held back since the last one that passed.
  std::optional<uint64_t> allow(std::string_view key);

 private:
  struct State {
    Clock::TimePoint last;
    uint64_t held = 0;
  };
  Clock& clock_;
  const Clock::Duration interval_;
  std::mutex mu_;
  std::map<std::string, State, std::less<>> keys_;  // guarded by mu_
};

// Returns `s` as a quoted JSON string; exposed for the formatter's tests.
std::string quote(std::string_view s);

}  // namespace rsc::log
