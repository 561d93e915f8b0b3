#include "metrics/work_queue_metrics.h"

#include <string>

#include "metrics/registry.h"

namespace rsc::metrics {

std::vector<double> WorkQueueMetrics::durationBuckets() { return exponentialBuckets(1e-8, 10, 10); }

WorkQueueMetrics::WorkQueueMetrics(prometheus::Registry& registry, std::string_view name)
    : depth_(gaugeFamily(registry, "workqueue_depth", "Number of keys waiting in the work queue.")
                 .Add({{"name", std::string(name)}})),
      adds_(counterFamily(registry, "workqueue_adds_total", "Keys added to the work queue.")
                .Add({{"name", std::string(name)}})),
      retries_(counterFamily(registry, "workqueue_retries_total",
                             "Keys re-added to the work queue after a failure.")
                   .Add({{"name", std::string(name)}})),
      queue_duration_(
          histogramFamily(registry, "workqueue_queue_duration_seconds",
                          "Time a key waits in the work queue before a worker takes it.")
              .Add({{"name", std::string(name)}}, durationBuckets())),
      work_duration_(histogramFamily(registry, "workqueue_work_duration_seconds",
                                     "Time a worker spends on one key.")
                         .Add({{"name", std::string(name)}}, durationBuckets())),
      unfinished_work_(
          gaugeFamily(registry, "workqueue_unfinished_work_seconds",
                      "Summed running time of the keys being worked on; a value that keeps "
                      "growing means a stuck worker.")
              .Add({{"name", std::string(name)}})),
      longest_running_(gaugeFamily(registry, "workqueue_longest_running_processor_seconds",
                                   "Running time of the key that has been worked on longest.")
                           .Add({{"name", std::string(name)}})) {}

void WorkQueueMetrics::setDepth(std::size_t depth) { depth_.Set(static_cast<double>(depth)); }

void WorkQueueMetrics::added() { adds_.Increment(); }

void WorkQueueMetrics::retried() { retries_.Increment(); }

void WorkQueueMetrics::observeQueueDuration(Clock::Duration waited) {
  queue_duration_.Observe(toSeconds(waited));
}

void WorkQueueMetrics::observeWorkDuration(Clock::Duration worked) {
  work_duration_.Observe(toSeconds(worked));
}

void WorkQueueMetrics::setUnfinishedWork(Clock::Duration total) {
  unfinished_work_.Set(toSeconds(total));
}

void WorkQueueMetrics::setLongestRunningProcessor(Clock::Duration longest) {
  longest_running_.Set(toSeconds(longest));
}

}  // namespace rsc::metrics
