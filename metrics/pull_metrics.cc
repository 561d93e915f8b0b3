#include "metrics/pull_metrics.h"

namespace rsc::metrics {

std::vector<double> PullMetrics::fetchDurationBuckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
}

PullMetrics::PullMetrics(prometheus::Registry& registry)
    : fetches_(prometheus::BuildCounter()
                   .Name("resourceslice_controller_pull_fetches_total")
                   .Help("Fetches of drivers' inventory endpoints (pull mode), by driver and "
                         "result: ok, unchanged, or why the fetch failed.")
                   .Register(registry)),
      duration_(prometheus::BuildHistogram()
                    .Name("resourceslice_controller_pull_fetch_duration_seconds")
                    .Help("Time one fetch of a driver's inventory endpoint took, decoding "
                          "included.")
                    .Register(registry)),
      last_success_(prometheus::BuildGauge()
                        .Name("resourceslice_controller_pull_last_success_timestamp_seconds")
                        .Help("When a fetch of the driver's inventory endpoint last succeeded "
                              "(Unix time; 0: never).")
                        .Register(registry)),
      expired_(prometheus::BuildGauge()
                   .Name("resourceslice_controller_pull_source_expired")
                   .Help("1 while the driver's inventory endpoint has failed for longer than "
                         "--pull-grace and its pools are withdrawn, else 0.")
                   .Register(registry)) {}

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
  }
  return source;
}

void PullMetrics::addSource(const std::string& driver) {
  std::lock_guard lock(mu_);
  sourceLocked(driver);
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

void PullMetrics::setExpired(const std::string& driver, bool expired) {
  std::lock_guard lock(mu_);
  sourceLocked(driver).expired->Set(expired ? 1 : 0);
}

}  // namespace rsc::metrics
