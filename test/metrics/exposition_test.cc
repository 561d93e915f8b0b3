#include "metrics/exposition.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "metrics/build_info.h"
#include "metrics/controller_metrics.h"
#include "metrics/inventory_metrics.h"
#include "metrics/leader_election_metrics.h"
#include "metrics/process_collector.h"
#include "metrics/registry.h"
#include "metrics/rest_client_metrics.h"
#include "metrics/watch_metrics.h"
#include "metrics/work_queue_metrics.h"
#include "test/metrics/temp_dir.h"

namespace rsc::metrics {
namespace {

using std::chrono::milliseconds;
using testing::TempDir;

int countOf(const std::string& text, const std::string& needle) {
  int count = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++count;
  }
  return count;
}

// Every struct of this folder in one registry, driven a little, as main wires them.
struct AllMetrics {
  std::shared_ptr<prometheus::Registry> registry = newRegistry();
  ControllerMetrics controller{*registry};
  InventoryMetrics inventory{*registry};
  WatchMetrics watch{*registry};
  WorkQueueMetrics queue{*registry, "resourceslice"};
  RestClientMetrics rest{*registry};
  LeaderElectionMetrics leader{*registry, "resourceslice-controller"};
  BuildInfo build{*registry, "0.1.0", "0123abc"};
  std::shared_ptr<ProcessCollector> process = std::make_shared<ProcessCollector>();

  AllMetrics() {
    controller.setDriverCounts("gpu.example.com", {.pools = 2, .slices = 3, .devices = 130});
    controller.sliceWrite("gpu.example.com", WriteVerb::kCreate, WriteResult::kSuccess);
    controller.observePublishLatency("gpu.example.com", milliseconds(7));
    controller.observeReconcile(ReconcileResult::kSuccess, milliseconds(12));
    inventory.push("gpu.example.com", 200);
    watch.restarted(WatchedResource::kResourceSlices, WatchRestartReason::kExpired);
    queue.added();
    queue.observeQueueDuration(milliseconds(1));
    rest.observe("PUT", "10.96.0.1:443", 409, milliseconds(20));
    rest.observe("GET", "10.96.0.1:443", RestClientMetrics::kNoResponse, milliseconds(3));
    leader.setLeader(true);
  }

  std::string text() const { return serializeText({registry, process}); }
};

TEST(Exposition, ContentTypeIsTextFormat004) {
  EXPECT_EQ(kTextContentType, "text/plain; version=0.0.4; charset=utf-8");
}

TEST(Exposition, WritesTheContractLines) {
  const AllMetrics all;
  const std::string text = all.text();

  const std::string lines[] = {
      "# TYPE resourceslice_controller_slice_writes_total counter\n",
      "resourceslice_controller_slice_writes_total{driver=\"gpu.example.com\","
      "result=\"success\",verb=\"create\"} 1\n",
      "resourceslice_controller_slice_writes_total{driver=\"gpu.example.com\","
      "result=\"conflict\",verb=\"delete\"} 0\n",
      "resourceslice_controller_pools{driver=\"gpu.example.com\"} 2\n",
      "resourceslice_controller_devices{driver=\"gpu.example.com\"} 130\n",
      "# TYPE resourceslice_controller_publish_latency_seconds histogram\n",
      "resourceslice_controller_publish_latency_seconds_bucket{driver=\"gpu."
      "example.com\",le=\"0.005\"} 0\n",
      "resourceslice_controller_publish_latency_seconds_bucket{driver=\"gpu."
      "example.com\",le=\"0.01\"} 1\n",
      "resourceslice_controller_publish_latency_seconds_bucket{driver=\"gpu."
      "example.com\",le=\"+Inf\"} 1\n",
      "resourceslice_controller_publish_latency_seconds_count{driver=\"gpu."
      "example.com\"} 1\n",
      "controller_runtime_reconcile_total{controller=\"resourceslice\","
      "result=\"requeue_after\"} 0\n",
      "resourceslice_controller_pushes_total{code=\"200\",driver=\"gpu.example."
      "com\"} 1\n",
      "resourceslice_controller_watch_restarts_total{reason=\"expired\","
      "resource=\"resourceslices\"} 1\n",
      "workqueue_adds_total{name=\"resourceslice\"} 1\n",
      "workqueue_queue_duration_seconds_bucket{name=\"resourceslice\",le=\"1e-08\"} 0\n",
      "rest_client_requests_total{code=\"409\",host=\"10.96.0.1:443\","
      "method=\"PUT\"} 1\n",
      "rest_client_requests_total{code=\"<error>\",host=\"10.96.0.1:443\","
      "method=\"GET\"} 1\n",
      "leader_election_master_status{name=\"resourceslice-controller\"} 1\n",
      "resourceslice_controller_build_info{cpp_compiler=\"" + compilerDescription() +
          "\",git_commit=\"0123abc\",version=\"0.1.0\"} 1\n",
      "# TYPE process_cpu_seconds_total counter\n",
      "# TYPE process_resident_memory_bytes gauge\n",
  };
  for (const std::string& line : lines) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin:\n" << text;
  }
  // Each family is written once.
  EXPECT_EQ(countOf(text, "# TYPE workqueue_depth "), 1);
}

TEST(Exposition, ExpiredSourcesAreSkipped) {
  auto registry = newRegistry();
  gaugeFamily(*registry, "kept", "kept").Add({}).Set(1);
  std::weak_ptr<prometheus::Collectable> expired;
  {
    auto gone = newRegistry();
    gaugeFamily(*gone, "gone", "gone").Add({}).Set(1);
    expired = gone;
  }
  const std::string text = serializeText({registry, expired});
  EXPECT_NE(text.find("kept 1\n"), std::string::npos);
  EXPECT_EQ(text.find("gone"), std::string::npos);
}

TEST(Exposition, SameFamilyFromTwoSourcesIsWrittenOnce) {
  auto first = newRegistry();
  auto second = newRegistry();
  counterFamily(*first, "x_total", "x").Add({{"s", "1"}}).Increment();
  counterFamily(*second, "x_total", "x").Add({{"s", "2"}}).Increment(2);
  // A gauge under the same name cannot be written validly; it is dropped.
  auto third = newRegistry();
  gaugeFamily(*third, "x_total", "x").Add({{"s", "3"}}).Set(3);
  const std::string text = serializeText({first, second, third});
  EXPECT_EQ(countOf(text, "# TYPE x_total counter\n"), 1);
  EXPECT_EQ(countOf(text, "# HELP x_total"), 1);
  EXPECT_NE(text.find("x_total{s=\"1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("x_total{s=\"2\"} 2\n"), std::string::npos);
  EXPECT_EQ(text.find("s=\"3\""), std::string::npos);
}

TEST(Exposition, HelpAndLabelValuesAreEscaped) {
  auto registry = newRegistry();
  prometheus::BuildGauge()
      .Name("g")
      .Help("a\\b\nc")
      .Register(*registry)
      .Add({{"l", "q\"x\\y\nz"}})
      .Set(1);
  const std::string text = serializeText({registry});
  EXPECT_NE(text.find("# HELP g a\\\\b\\nc\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{l=\"q\\\"x\\\\y\\nz\"} 1\n"), std::string::npos) << text;
}

// promtool parses the text with Prometheus' own parser and lints names, types
// and help, so it catches what a hand-written check would miss.
TEST(Exposition, PromtoolFindsNoProblem) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no promtool";
  }
  const AllMetrics all;
  const TempDir dir;
  const auto input = dir.write("metrics.txt", all.text());
  const auto output = dir.path() / "promtool.out";
  const std::string command =
      "promtool check metrics < '" + input.string() + "' > '" + output.string() + "' 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(output);
  std::stringstream report;
  report << in.rdbuf();
  ASSERT_TRUE(WIFEXITED(status)) << command;
  EXPECT_EQ(WEXITSTATUS(status), 0) << report.str();
  EXPECT_EQ(report.str(), "");
}

// The same check must fail on a problem, or the test above proves nothing.
TEST(Exposition, PromtoolReportsAProblem) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "no promtool";
  }
  auto registry = newRegistry();
  // A counter without the _total suffix is a lint problem.
  prometheus::BuildCounter().Name("requests").Help("r").Register(*registry).Add({}).Increment();
  const TempDir dir;
  const auto input = dir.write("metrics.txt", serializeText({registry}));
  const std::string command = "promtool check metrics < '" + input.string() + "' >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace rsc::metrics
