// PullMetrics: what pull mode reports for each pulled driver, over all its inventory sources:
// how many sources it has, fetches by result, how long they took, when one last succeeded, and
// how many sources have failed (or been gone) for longer than --pull-grace (their pools
// withdrawn). Series are per driver, not per source: a DaemonSet's thousand endpoints are one
// driver. A driver's series exist from its first source, at 0, so rate() and absent-data
// alerts work from the start, and go with its last source. Two series are for the Poller's
// workers as a whole: how late fetches start (a source due while every --pull-concurrency
// worker is busy waits) and how many due sources wait now. Built once by main; the Poller's
// observer calls it. Thread-safe: the Poller's workers call it.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace rsc::metrics {

class PullMetrics {
 public:
  // The `result` label of resourceslice_controller_pull_fetches_total: "ok" (a 200 answer
  // applied), "unchanged" (304) and the fetcher's failure reasons.
  static constexpr std::array<std::string_view, 11> kResults = {
      "ok",       "unchanged", "Unreachable", "Timeout",  "HttpError", "Redirect",
      "TooLarge", "Invalid",   "Forbidden",   "Conflict", "Busy"};
  // The `reason` label of resourceslice_controller_pull_sources_ignored_total.
  static constexpr std::array<std::string_view, 4> kIgnoredReasons = {"OverLimit", "Invalid",
                                                                      "Unbound", "Unverified"};

  // Registers the families in `registry`, which must outlive this object.
  explicit PullMetrics(prometheus::Registry& registry);
  PullMetrics(const PullMetrics&) = delete;
  PullMetrics& operator=(const PullMetrics&) = delete;

  // `driver` is pulled from `sources` sources now: its series are created (at 0) with the
  // first and removed with the last, so discovered drivers that went do not stay as series.
  void setSources(const std::string& driver, size_t sources);
  // Counts one fetch of `driver`'s source with `result` (one of kResults; others count as
  // "other") that took `seconds`.
  void fetched(const std::string& driver, std::string_view result, double seconds);
  // Records a successful fetch (200 or 304) at `unix_seconds`.
  void succeeded(const std::string& driver, double unix_seconds);
  // How many of the driver's sources have failed for longer than the grace (their pools
  // withdrawn).
  void setExpired(const std::string& driver, size_t expired);
  // A discovered source was ignored, for one of kIgnoredReasons.
  void ignored(std::string_view reason);
  // A worker started a source's fetch `seconds` after it was due.
  void fetchDelayed(double seconds);
  // `waiting` sources are due and wait for a free worker.
  void setWaiting(size_t waiting);

  static std::vector<double> fetchDurationBuckets();
  static std::vector<double> fetchDelayBuckets();

 private:
  struct Source {
    std::map<std::string_view, prometheus::Counter*> fetches;
    prometheus::Histogram* duration = nullptr;
    prometheus::Gauge* last_success = nullptr;
    prometheus::Gauge* expired = nullptr;
    prometheus::Gauge* sources = nullptr;
  };
  Source& sourceLocked(const std::string& driver);

  prometheus::Family<prometheus::Counter>& fetches_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Gauge>& last_success_;
  prometheus::Family<prometheus::Gauge>& expired_;
  prometheus::Family<prometheus::Gauge>& sources_gauge_;
  prometheus::Family<prometheus::Counter>& ignored_;
  prometheus::Histogram& delay_;
  prometheus::Gauge& waiting_;
  std::map<std::string_view, prometheus::Counter*> ignored_by_reason_;
  std::mutex mu_;
  std::map<std::string, Source> sources_;  // guarded by mu_
};

}  // namespace rsc::metrics
