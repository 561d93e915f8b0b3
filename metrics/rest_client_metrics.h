// RestClientMetrics: requests to the Kubernetes API server and runs of the
// kubeconfig's exec credential plugin, under client-go's names
// (rest_client_requests_total, rest_client_request_duration_seconds,
// rest_client_exec_plugin_call_total).
// client/ knows nothing of metrics; the controller's wiring gives the client a
// callback that calls observe() once per HTTP request, retries included.
// Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/clock.h"

namespace rsc::metrics {

class RestClientMetrics {
 public:
  // The `code` of a request that got no HTTP response (connection refused,
  // TLS failure, timeout), written as client-go writes it: "<error>".
  static constexpr int kNoResponse = 0;

  // Registers the families in `registry`, which must outlive this object.
  explicit RestClientMetrics(prometheus::Registry& registry);
  RestClientMetrics(const RestClientMetrics&) = delete;
  RestClientMetrics& operator=(const RestClientMetrics&) = delete;

  // Records one request: `verb` is the HTTP method ("GET", "PUT", ...), used
  // as both the method label of the counter and the verb label of the
  // histogram, as client-go does; `host` is the server's host:port; `code`
  // the HTTP status or kNoResponse. A watch's duration is the time to its
  // response headers, not the life of the stream.
  void observe(std::string_view verb, std::string_view host, int code, Clock::Duration duration);

  // Records one run of an exec credential plugin: its exit code (0 if and
  // only if it gave a credential) and how the call went (no_error,
  // plugin_execution_error, plugin_not_found_error, client_internal_error,
  // plugin_timeout_error, plugin_output_limit_error; client/config.h).
  void observeExecPluginCall(int code, std::string_view call_status);

  // Upper bounds of rest_client_request_duration_seconds: client-go's.
  static std::vector<double> requestDurationBuckets();

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& durations_;
  prometheus::Family<prometheus::Counter>& exec_plugin_calls_;

  // Series already created, so a request costs one map lookup instead of a
  // label-set hash and a histogram allocation inside prometheus-cpp. Series
  // are never removed, so the pointers stay valid after the lock is released.
  std::mutex mu_;
  std::map<std::tuple<std::string, std::string, int>, prometheus::Counter*, std::less<>>
      request_series_;  // guarded by mu_; key (method, host, code)
  std::map<std::tuple<std::string, std::string>, prometheus::Histogram*, std::less<>>
      duration_series_;  // guarded by mu_; key (verb, host)
};

}  // namespace rsc::metrics
