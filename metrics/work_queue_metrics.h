// WorkQueueMetrics: the seven metrics of one named work queue, under the names
// and buckets of Kubernetes component-base (workqueue_*{name}), so existing
// workqueue dashboards work unchanged. The WorkQueue calls it on add, get,
// done and rate-limited re-add; a periodic tick of the queue sets the two
// unfinished-work gauges. Thread-safe (prometheus-cpp metrics are atomic).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstddef>
#include <string_view>
#include <vector>

#include "common/clock.h"

namespace rsc::metrics {

class WorkQueueMetrics {
 public:
  // Registers the families in `registry`, which must outlive this object, and
  // creates the series of queue `name` at 0.
  WorkQueueMetrics(prometheus::Registry& registry, std::string_view name);
  WorkQueueMetrics(const WorkQueueMetrics&) = delete;
  WorkQueueMetrics& operator=(const WorkQueueMetrics&) = delete;

  // Current number of keys waiting (workqueue_depth).
  void setDepth(std::size_t depth);
  // A key was added (workqueue_adds_total); counted even when it collapses
  // into a key already waiting, as client-go does.
  void added();
  // A key was re-added with rate limiting (workqueue_retries_total).
  void retried();
  // Time a key waited between add and get (workqueue_queue_duration_seconds).
  void observeQueueDuration(Clock::Duration waited);
  // Time between get and done (workqueue_work_duration_seconds).
  void observeWorkDuration(Clock::Duration worked);
  // Sum of the running times of the keys being processed
  // (workqueue_unfinished_work_seconds): a stuck worker makes it grow.
  void setUnfinishedWork(Clock::Duration total);
  // Running time of the longest-running key (workqueue_longest_running_processor_seconds).
  void setLongestRunningProcessor(Clock::Duration longest);

  // Upper bounds of both duration histograms: 1e-8 * 10^i for i in 0..9
  // (10 ns to 10 s), as component-base registers them.
  static std::vector<double> durationBuckets();

 private:
  prometheus::Gauge& depth_;
  prometheus::Counter& adds_;
  prometheus::Counter& retries_;
  prometheus::Histogram& queue_duration_;
  prometheus::Histogram& work_duration_;
  prometheus::Gauge& unfinished_work_;
  prometheus::Gauge& longest_running_;
};

}  // namespace rsc::metrics
