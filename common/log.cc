#include "common/log.h"

#include <unistd.h>

#include <chrono>
#include <ctime>
#include <iostream>
#include <mutex>

namespace rsc::log {
namespace {

struct Config {
  std::mutex mu;
  Format format = Format::kText;
  int verbosity = 0;
  std::ostream* out = &std::cerr;
};

Config& config() {
  static Config c;
  return c;
}

enum class Severity { kInfo, kWarning, kError };

std::string_view baseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// Log lines carry wall-clock time: they are read next to other components'
// logs. This is the one place outside clock.cc that reads a clock directly,
// so logging works before any Clock exists.
std::chrono::system_clock::time_point wallNow() { return std::chrono::system_clock::now(); }

void write(Severity severity, int v, std::string_view message, const Status* err, Fields fields,
           const std::source_location& loc) {
  const auto now = wallNow();
  const auto since_epoch = now.time_since_epoch();
  const auto secs = std::chrono::floor<std::chrono::seconds>(since_epoch);
  const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(since_epoch - secs);
  std::string caller = std::string(baseName(loc.file_name())) + ":" + std::to_string(loc.line());

  Config& c = config();
  std::string line;
  line.reserve(160);
  if (c.format == Format::kJson) {
    char ts[48];
    std::snprintf(ts, sizeof(ts), "%lld.%06lld", static_cast<long long>(secs.count()),
                  static_cast<long long>(usec.count()));
    line += "{\"ts\":";
    line += ts;
    line += ",\"caller\":" + quote(caller);
    line += ",\"msg\":" + quote(message);
    if (severity == Severity::kInfo) {
      line += ",\"v\":" + std::to_string(v);
    } else {
      line += severity == Severity::kError ? R"(,"level":"error")" : R"(,"level":"warning")";
    }
    if (err != nullptr) line += ",\"err\":" + quote(err->toString());
    for (const Field& f : fields) {
      line += "," + quote(f.key()) + ":" + (f.raw() ? f.value() : quote(f.value()));
    }
    line += "}\n";
  } else {
    const auto tt = static_cast<std::time_t>(secs.count());
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char head[64];
    const char level = severity == Severity::kInfo      ? 'I'
                       : severity == Severity::kWarning ? 'W'
                                                        : 'E';
    std::snprintf(head, sizeof(head), "%c%02d%02d %02d:%02d:%02d.%06lld %7d ", level, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(usec.count()), static_cast<int>(getpid()));
    line += head;
    line += caller + "] " + quote(message);
    if (err != nullptr) line += " err=" + quote(err->toString());
    for (const Field& f : fields) {
      line += " " + f.key() + "=" + (f.raw() ? f.value() : quote(f.value()));
    }
    line += '\n';
  }
  std::lock_guard lock(c.mu);
  *c.out << line << std::flush;
}

}  // namespace

void configure(Format format, int verbosity, std::ostream* out) {
  Config& c = config();
  std::lock_guard lock(c.mu);
  c.format = format;
  c.verbosity = verbosity;
  c.out = out != nullptr ? out : &std::cerr;
}

bool enabled(int level) {
  Config& c = config();
  std::lock_guard lock(c.mu);
  return level <= c.verbosity;
}

void info(std::string_view message, Fields fields, std::source_location loc) {
  write(Severity::kInfo, 0, message, nullptr, fields, loc);
}

void warning(std::string_view message, Fields fields, std::source_location loc) {
  write(Severity::kWarning, 0, message, nullptr, fields, loc);
}

void error(std::string_view message, const Status& err, Fields fields, std::source_location loc) {
  write(Severity::kError, 0, message, &err, fields, loc);
}

void debug(int level, std::string_view message, Fields fields, std::source_location loc) {
  if (enabled(level)) write(Severity::kInfo, level, message, nullptr, fields, loc);
}

std::optional<uint64_t> Throttle::allow(std::string_view key) {
  const Clock::TimePoint now = clock_.now();
  std::lock_guard lock(mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    keys_.emplace(std::string(key), State{now, 0});
    return 0;
  }
  State& state = it->second;
  if (now - state.last < interval_) {
    ++state.held;
    return std::nullopt;
  }
  const uint64_t held = state.held;
  state = State{now, 0};
  return held;
}

std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace rsc::log
