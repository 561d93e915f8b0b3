#include "metrics/process_collector.h"

#include <prometheus/client_metric.h>
#include <prometheus/metric_type.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/strings.h"

namespace rsc::metrics {

namespace {

namespace fs = std::filesystem;

// What procfs readers in other languages report for an "unlimited" limit (the
// largest uint64), so dashboards dividing by process_max_fds behave the same.
constexpr double kUnlimited = 18446744073709551615.0;

// The fields of <root>/self/stat this collector needs, in their raw units.
struct ProcStat {
  std::uint64_t utime_ticks = 0;
  std::uint64_t stime_ticks = 0;
  std::uint64_t start_ticks = 0;  // since boot
  std::uint64_t vsize_bytes = 0;
  std::int64_t rss_pages = 0;
};

struct ProcLimits {
  double open_files = 0;
  double address_space = 0;
};

StatusOr<std::string> readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return unavailable("open " + path.string() + ": " + std::strerror(errno));
  }
  std::ostringstream content;
  content << in.rdbuf();
  if (in.bad()) {
    return unavailable("read " + path.string());
  }
  return std::move(content).str();
}

template <typename T>
StatusOr<T> parseNumber(std::string_view text, std::string_view what) {
  const std::optional<T> value = parseWhole<T>(text);
  if (!value) return invalidArgument(std::string(what) + ": not a number: " + inQuotes(text));
  return *value;
}

// <root>/self/stat is "pid (comm) state ppid ..."; comm may itself contain
// spaces and parentheses, so the fields are counted from the last ')'.
StatusOr<ProcStat> parseStat(std::string_view text) {
  const auto close = text.rfind(')');
  if (close == std::string_view::npos) {
    return invalidArgument("stat: no \")\" after the command");
  }
  const auto values = fields(text.substr(close + 1));
  // values[0] is field 3 of proc(5) (state), so field N is values[N - 3].
  constexpr std::size_t kUtime = 14 - 3, kStime = 15 - 3, kStartTime = 22 - 3, kVsize = 23 - 3,
                        kRss = 24 - 3;
  if (values.size() <= kRss) {
    return invalidArgument("stat: too few fields");
  }
  ProcStat stat;
  ASSIGN_OR_RETURN(stat.utime_ticks, parseNumber<std::uint64_t>(values[kUtime], "stat utime"));
  ASSIGN_OR_RETURN(stat.stime_ticks, parseNumber<std::uint64_t>(values[kStime], "stat stime"));
  ASSIGN_OR_RETURN(stat.start_ticks,
                   parseNumber<std::uint64_t>(values[kStartTime], "stat starttime"));
  ASSIGN_OR_RETURN(stat.vsize_bytes, parseNumber<std::uint64_t>(values[kVsize], "stat vsize"));
  ASSIGN_OR_RETURN(stat.rss_pages, parseNumber<std::int64_t>(values[kRss], "stat rss"));
  return stat;
}

// <root>/stat has a line "btime <seconds since the epoch>".
StatusOr<double> parseBootTime(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const auto words = fields(text.substr(pos, end - pos));
    if (words.size() == 2 && words[0] == "btime") {
      ASSIGN_OR_RETURN(const auto btime, parseNumber<std::uint64_t>(words[1], "stat btime"));
      return static_cast<double>(btime);
    }
    pos = end + 1;
  }
  return invalidArgument("stat: no btime line");
}

StatusOr<double> parseLimit(std::string_view value, std::string_view what) {
  if (value == "unlimited") {
    return kUnlimited;
  }
  ASSIGN_OR_RETURN(const auto limit, parseNumber<std::uint64_t>(value, what));
  return static_cast<double>(limit);
}

// <root>/self/limits is a table: "Max open files  1024  1048576  files". The
// first column is the name (with single spaces), the second the soft limit.
StatusOr<ProcLimits> parseLimits(std::string_view text) {
  constexpr std::string_view kOpenFiles = "Max open files";
  constexpr std::string_view kAddressSpace = "Max address space";
  std::optional<double> open_files;
  std::optional<double> address_space;
  std::size_t pos = 0;
  while (pos < text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos) {
      end = text.size();
    }
    const auto line = text.substr(pos, end - pos);
    pos = end + 1;
    for (const auto& [name, slot] :
         {std::pair{kOpenFiles, &open_files}, std::pair{kAddressSpace, &address_space}}) {
      if (!line.starts_with(name)) {
        continue;
      }
      const auto words = fields(line.substr(name.size()));
      if (words.empty()) {
        return invalidArgument("limits: no value for " + std::string(name));
      }
      ASSIGN_OR_RETURN(*slot, parseLimit(words[0], name));
    }
  }
  if (!open_files || !address_space) {
    return invalidArgument("limits: a line is missing");
  }
  return ProcLimits{*open_files, *address_space};
}

StatusOr<double> countOpenFds(const fs::path& dir) {
  std::error_code error;
  fs::directory_iterator it(dir, error);
  if (error) {
    return unavailable("list " + dir.string() + ": " + error.message());
  }
  std::uint64_t count = 0;
  // A failed increment leaves the iterator at the end, so the error is
  // checked after the loop.
  for (const fs::directory_iterator end; it != end; it.increment(error)) {
    ++count;
  }
  if (error) {
    return unavailable("list " + dir.string() + ": " + error.message());
  }
  return static_cast<double>(count);
}

prometheus::MetricFamily family(std::string name, std::string help, prometheus::MetricType type,
                                double value) {
  prometheus::ClientMetric metric;
  if (type == prometheus::MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  return {std::move(name), std::move(help), type, {std::move(metric)}};
}

long systemValue(long configured, int name) {
  if (configured > 0) {
    return configured;
  }
  const long value = ::sysconf(name);
  return value > 0 ? value : 0;
}

}  // namespace

ProcessCollector::ProcessCollector() : ProcessCollector(Options{}) {}

ProcessCollector::ProcessCollector(Options options) : options_(std::move(options)) {}

void ProcessCollector::warnOnce(const Status& error) const {
  if (warned_.exchange(true)) {
    return;
  }
  log::warning("process metrics are incomplete: cannot read /proc",
               {{"root", options_.proc_root.string()}, {"error", error.toString()}});
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  const fs::path self = options_.proc_root / "self";
  const auto ticks = static_cast<double>(systemValue(options_.clock_ticks_per_second, _SC_CLK_TCK));
  const auto page_size = static_cast<double>(systemValue(options_.page_size, _SC_PAGESIZE));
  std::vector<prometheus::MetricFamily> families;

  // CPU, memory and start time all come from one read of self/stat.
  auto stat = readFile(self / "stat");
  auto parsed = stat.ok() ? parseStat(*stat) : StatusOr<ProcStat>(stat.status());
  if (parsed.ok() && ticks > 0) {
    families.push_back(
        family("process_cpu_seconds_total",
               "User and system CPU time used by the process, in seconds.", MetricType::Counter,
               static_cast<double>(parsed->utime_ticks + parsed->stime_ticks) / ticks));
    families.push_back(family("process_resident_memory_bytes",
                              "Resident set size of the process, in bytes.", MetricType::Gauge,
                              static_cast<double>(parsed->rss_pages) * page_size));
    families.push_back(family("process_virtual_memory_bytes",
                              "Virtual memory size of the process, in bytes.", MetricType::Gauge,
                              static_cast<double>(parsed->vsize_bytes)));
    auto boot = readFile(options_.proc_root / "stat");
    auto btime = boot.ok() ? parseBootTime(*boot) : StatusOr<double>(boot.status());
    if (btime.ok()) {
      families.push_back(family("process_start_time_seconds",
                                "When the process started, in seconds since the Unix epoch.",
                                MetricType::Gauge,
                                *btime + static_cast<double>(parsed->start_ticks) / ticks));
    } else {
      warnOnce(btime.status());
    }
  } else if (!parsed.ok()) {
    warnOnce(parsed.status());
  } else {
    warnOnce(internalError("the clock tick rate is unknown"));
  }

  // File descriptors: the entries of self/fd against the soft limit.
  auto open_fds = countOpenFds(self / "fd");
  if (open_fds.ok()) {
    families.push_back(family("process_open_fds", "File descriptors the process has open.",
                              MetricType::Gauge, *open_fds));
  } else {
    warnOnce(open_fds.status());
  }
  auto limits_text = readFile(self / "limits");
  auto limits =
      limits_text.ok() ? parseLimits(*limits_text) : StatusOr<ProcLimits>(limits_text.status());
  if (limits.ok()) {
    families.push_back(family("process_max_fds",
                              "Soft limit on the file descriptors the process may open.",
                              MetricType::Gauge, limits->open_files));
    families.push_back(family("process_virtual_memory_max_bytes",
                              "Soft limit on the virtual memory size of the process, in bytes.",
                              MetricType::Gauge, limits->address_space));
  } else {
    warnOnce(limits.status());
  }
  return families;
}

}  // namespace rsc::metrics
