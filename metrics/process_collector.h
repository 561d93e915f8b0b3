// ProcessCollector: the process_* metrics of client_golang's process collector
// (CPU time, memory, file descriptors, start time), read from /proc on every
// scrape; prometheus-cpp has none. main passes it to serializeText beside the
// registry. The /proc root is injectable so tests can feed a fake one.
// Thread-safe: Collect() keeps no state between calls besides a warn-once flag.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <atomic>
#include <filesystem>
#include <vector>

#include "common/status.h"

namespace rsc::metrics {

class ProcessCollector final : public prometheus::Collectable {
 public:
  struct Options {
    // Where procfs is mounted; the collector reads <root>/self/... and <root>/stat.
    std::filesystem::path proc_root = "/proc";
    // The unit of the CPU and start times in <root>/self/stat; 0 asks the
    // system (sysconf(_SC_CLK_TCK), 100 on Linux).
    long clock_ticks_per_second = 0;
    // The unit of the resident set size in <root>/self/stat; 0 asks the system.
    long page_size = 0;
  };

  ProcessCollector();
  explicit ProcessCollector(Options options);

  // Returns process_cpu_seconds_total, process_resident_memory_bytes,
  // process_virtual_memory_bytes, process_virtual_memory_max_bytes,
  // process_open_fds, process_max_fds and process_start_time_seconds.
  // A file that cannot be read or parsed drops only the metrics that need it
  // (their absence is what alerts see) and is logged once per collector.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  void warnOnce(const Status& error) const;

  const Options options_;
  mutable std::atomic<bool> warned_{false};
};

}  // namespace rsc::metrics
