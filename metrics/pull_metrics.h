// PullMetrics: what pull mode reports for each inventory source (one per driver): fetches by
// result, how long they took, when one last succeeded, and whether the source has failed for
// longer than --pull-grace (its pools withdrawn). Built once by main; the Poller's observer
// calls it. Series of a source exist from its registration, at 0, so rate() and absent-data
// alerts work from the start. Thread-safe: each source's poller thread calls it.
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
  static constexpr std::array<std::string_view, 8> kResults = {
      "ok", "unchanged", "Unreachable", "Timeout", "HttpError", "Redirect", "TooLarge", "Invalid"};

  // Registers the families in `registry`, which must outlive this object.
  explicit PullMetrics(prometheus::Registry& registry);
  PullMetrics(const PullMetrics&) = delete;
  PullMetrics& operator=(const PullMetrics&) = delete;

  // Creates the series of the source of `driver`, at 0. Sources are fixed at start (flags),
  // so the series are bounded by the command line.
  void addSource(const std::string& driver);
  // Counts one fetch of `driver`'s source with `result` (one of kResults; others count as
  // "other") that took `seconds`.
  void fetched(const std::string& driver, std::string_view result, double seconds);
  // Records a successful fetch (200 or 304) at `unix_seconds`.
  void succeeded(const std::string& driver, double unix_seconds);
  // Whether the source has failed for longer than the grace (its pools withdrawn).
  void setExpired(const std::string& driver, bool expired);

  static std::vector<double> fetchDurationBuckets();

 private:
  struct Source {
    std::map<std::string_view, prometheus::Counter*> fetches;
    prometheus::Histogram* duration = nullptr;
    prometheus::Gauge* last_success = nullptr;
    prometheus::Gauge* expired = nullptr;
  };
  Source& sourceLocked(const std::string& driver);

  prometheus::Family<prometheus::Counter>& fetches_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Gauge>& last_success_;
  prometheus::Family<prometheus::Gauge>& expired_;
  std::mutex mu_;
  std::map<std::string, Source> sources_;  // guarded by mu_
};

}  // namespace rsc::metrics
