#include "metrics/rest_client_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "metrics/registry.h"
#include "test/metrics/snapshot.h"

namespace rsc::metrics {
namespace {

using std::chrono::milliseconds;

constexpr char kHost[] = "10.96.0.1:443";

TEST(RestClientMetrics, CountsRequestsByCodeMethodAndHost) {
  auto registry = newRegistry();
  RestClientMetrics metrics(*registry);
  metrics.observe("GET", kHost, 200, milliseconds(4));
  metrics.observe("GET", kHost, 200, milliseconds(30));
  metrics.observe("PUT", kHost, 409, milliseconds(12));
  metrics.observe("POST", kHost, RestClientMetrics::kNoResponse, milliseconds(2000));
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value("rest_client_requests_total",
                       {{"code", "200"}, {"method", "GET"}, {"host", kHost}}),
            2.0);
  EXPECT_EQ(snap.value("rest_client_requests_total",
                       {{"code", "409"}, {"method", "PUT"}, {"host", kHost}}),
            1.0);
  EXPECT_EQ(snap.value("rest_client_requests_total",
                       {{"code", "<error>"}, {"method", "POST"}, {"host", kHost}}),
            1.0);
  EXPECT_EQ(snap.seriesCount("rest_client_requests_total"), 3u);
}

TEST(RestClientMetrics, DurationsLandInClientGoBuckets) {
  auto registry = newRegistry();
  RestClientMetrics metrics(*registry);
  metrics.observe("GET", kHost, 200, milliseconds(4));    // [0, 0.005]
  metrics.observe("GET", kHost, 200, milliseconds(30));   // (0.025, 0.1]
  metrics.observe("GET", kHost, 500, milliseconds(100));  // on the 0.1 bound
  const auto duration = Snapshot(*registry).histogram("rest_client_request_duration_seconds",
                                                      {{"verb", "GET"}, {"host", kHost}});
  ASSERT_TRUE(duration.has_value());
  EXPECT_EQ(duration->sample_count, 3u);
  EXPECT_EQ(cumulativeCounts(*duration, {0.005, 0.025, 0.1}), (CumulativeCounts{1, 1, 3}));
}

TEST(RestClientMetrics, CountsExecPluginCallsByCodeAndStatus) {
  auto registry = newRegistry();
  RestClientMetrics metrics(*registry);
  metrics.observeExecPluginCall(0, "no_error");
  metrics.observeExecPluginCall(0, "no_error");
  metrics.observeExecPluginCall(-1, "plugin_timeout_error");
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value("rest_client_exec_plugin_call_total",
                       {{"code", "0"}, {"call_status", "no_error"}}),
            2.0);
  EXPECT_EQ(snap.value("rest_client_exec_plugin_call_total",
                       {{"code", "-1"}, {"call_status", "plugin_timeout_error"}}),
            1.0);
  EXPECT_EQ(snap.seriesCount("rest_client_exec_plugin_call_total"), 2u);
}

TEST(RestClientMetrics, BucketsAreClientGos) {
  const std::vector<double> want = {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60};
  EXPECT_EQ(RestClientMetrics::requestDurationBuckets(), want);
}

}  // namespace
}  // namespace rsc::metrics
