#include "metrics/pull_metrics.h"

#include "metrics/registry.h"

namespace rsc::metrics {

std::vector<double> PullMetrics::fetchDurationBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

std::vector<double> PullMetrics::fetchDelayBuckets() {
  return {0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
}

PullMetrics::PullMetrics(prometheus::Registry& registry)
    : fetches_(counterFamily(registry, "resourceslice_controller_pull_fetches_total",
                             "Fetches of drivers' inventory endpoints (pull mode), by driver and "
                             "result: ok, unchanged, or why the fetch failed.")),
      duration_(histogramFamily(registry, "resourceslice_controller_pull_fetch_duration_seconds",
                                "Time one fetch of a driver's inventory endpoint took, decoding "
                                "included.")),
      last_success_(gaugeFamily(registry,
                                "resourceslice_controller_pull_last_success_timestamp_seconds",
                                "When a fetch of the driver's inventory endpoint last succeeded "
                                "(Unix time; 0: never).")),
      expired_(gaugeFamily(registry, "resourceslice_controller_pull_source_expired",
                           "How many of the driver's inventory sources have failed, or been gone "
                           "from discovery, for longer than --pull-grace, their pools withdrawn.")),
      sources_gauge_(gaugeFamily(registry, "resourceslice_controller_pull_sources",
                                 "The number of inventory sources (configured, or discovered "
                                 "endpoints) the driver's inventory is pulled from.")),
      ignored_(counterFamily(registry, "resourceslice_controller_pull_sources_ignored_total",
                             "Discovered inventory sources ignored, by reason: OverLimit "
                             "(--pull-max-sources reached), Invalid (a URL or TLS setting that "
                             "cannot work), Unbound (a Service naming a driver not bound to its "
                             "namespace by --pull-driver) or Unverified (an endpoint no Pod "
                             "vouches for).")),
      delay_(histogramFamily(registry, "resourceslice_controller_pull_fetch_delay_seconds",
                             "How late fetches of inventory sources started: from when a source "
                             "was due to when a worker took it (all --pull-concurrency workers "
                             "were busy).")
                 .Add({}, fetchDelayBuckets())),
      waiting_(gaugeFamily(registry, "resourceslice_controller_pull_fetches_waiting",
                           "Inventory sources that are due for a fetch and wait for a free "
                           "worker (--pull-concurrency).")
                   .Add({})) {
  for (std::string_view reason : kIgnoredReasons) {
    ignored_by_reason_[reason] = &ignored_.Add({{"reason", std::string(reason)}});
  }
}

PullMetrics::Source& PullMetrics::sourceLocked(const std::string& driver) {
  auto [it, added] = sources_.try_emplace(driver);
  Source& source = it->second;
  if (added) {
    for (std::string_view result : kResults) {
      source.fetches[result] = &fetches_.Add({{"driver", driver}, {"result", std::string(result)}});
    }
    source.fetches["other"] = &fetches_.Add({{"driver", driver}, {"result", "other"}});
    source.duration = &duration_.Add({{"driver", driver}}, fetchDurationBuckets());
    source.last_success = &last_success_.Add({{"driver", driver}});
    source.expired = &expired_.Add({{"driver", driver}});
    source.sources = &sources_gauge_.Add({{"driver", driver}});
  }
  return source;
}

void PullMetrics::setSources(const std::string& driver, size_t sources) {
  std::lock_guard lock(mu_);
  if (sources > 0) {
    sourceLocked(driver).sources->Set(static_cast<double>(sources));
    return;
  }
  auto it = sources_.find(driver);
  if (it == sources_.end()) return;
  Source& gone = it->second;
  for (auto& [result, counter] : gone.fetches) fetches_.Remove(counter);
  duration_.Remove(gone.duration);
  last_success_.Remove(gone.last_success);
  expired_.Remove(gone.expired);
  sources_gauge_.Remove(gone.sources);
  sources_.erase(it);
}

void PullMetrics::fetched(const std::string& driver, std::string_view result, double seconds) {
  std::lock_guard lock(mu_);
  Source& source = sourceLocked(driver);
  auto it = source.fetches.find(result);
  if (it == source.fetches.end()) it = source.fetches.find("other");
  it->second->Increment();
  source.duration->Observe(seconds);
}

void PullMetrics::succeeded(const std::string& driver, double unix_seconds) {
  std::lock_guard lock(mu_);
  sourceLocked(driver).last_success->Set(unix_seconds);
}

void PullMetrics::setExpired(const std::string& driver, size_t expired) {
  std::lock_guard lock(mu_);
  sourceLocked(driver).expired->Set(static_cast<double>(expired));
}

void PullMetrics::fetchDelayed(double seconds) { delay_.Observe(seconds); }

void PullMetrics::setWaiting(size_t waiting) { waiting_.Set(static_cast<double>(waiting)); }

void PullMetrics::ignored(std::string_view reason) {
  auto it = ignored_by_reason_.find(reason);
  if (it != ignored_by_reason_.end()) it->second->Increment();
}

}  // namespace rsc::metrics
