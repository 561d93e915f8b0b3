#include "metrics/rest_client_metrics.h"

#include "metrics/registry.h"

namespace rsc::metrics {

namespace {

std::string codeLabel(int code) {
  return code == RestClientMetrics::kNoResponse ? "<error>" : std::to_string(code);
}

}  // namespace

std::vector<double> RestClientMetrics::requestDurationBuckets() {
  return {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60};
}

RestClientMetrics::RestClientMetrics(prometheus::Registry& registry)
    : requests_(counterFamily(registry, "rest_client_requests_total",
                              "HTTP requests to the API server, by status code, method and host.")),
      durations_(histogramFamily(registry, "rest_client_request_duration_seconds",
                                 "Latency of HTTP requests to the API server, by verb and host.")),
      exec_plugin_calls_(counterFamily(registry, "rest_client_exec_plugin_call_total",
                                       "Runs of the kubeconfig's exec credential plugin, by exit "
                                       "code (0 if and only if it gave a credential) and call "
                                       "status.")) {}

void RestClientMetrics::observeExecPluginCall(int code, std::string_view call_status) {
  // A plugin runs once per credential lifetime (minutes), so the label-set
  // lookup inside prometheus-cpp costs nothing worth caching.
  exec_plugin_calls_
      .Add({{"code", std::to_string(code)}, {"call_status", std::string(call_status)}})
      .Increment();
}

void RestClientMetrics::observe(std::string_view verb, std::string_view host, int code,
                                Clock::Duration duration) {
  prometheus::Counter* counter = nullptr;
  prometheus::Histogram* histogram = nullptr;
  {
    std::lock_guard lock(mu_);
    auto request_key = std::make_tuple(std::string(verb), std::string(host), code);
    auto request_it = request_series_.find(request_key);
    if (request_it == request_series_.end()) {
      auto& added = requests_.Add(
          {{"code", codeLabel(code)}, {"method", std::string(verb)}, {"host", std::string(host)}});
      request_it = request_series_.emplace(std::move(request_key), &added).first;
    }
    counter = request_it->second;

    auto duration_key = std::make_tuple(std::string(verb), std::string(host));
    auto duration_it = duration_series_.find(duration_key);
    if (duration_it == duration_series_.end()) {
      auto& added = durations_.Add({{"verb", std::string(verb)}, {"host", std::string(host)}},
                                   requestDurationBuckets());
      duration_it = duration_series_.emplace(std::move(duration_key), &added).first;
    }
    histogram = duration_it->second;
  }
  counter->Increment();
  histogram->Observe(toSeconds(duration));
}

}  // namespace rsc::metrics
