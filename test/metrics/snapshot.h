// Snapshot (a test helper, in the metrics_snapshot library of test/): what a
// registry (or any Collectable) reports at one moment, with lookups by family
// name and exact label set. Tests read metric values back through it after
// driving the metric structs. A Snapshot is an immutable copy:
// build one per check, share it freely between threads.
#pragma once

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/labels.h>
#include <prometheus/metric_family.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace rsc::metrics {

class Snapshot {
 public:
  explicit Snapshot(const prometheus::Collectable& source);
  explicit Snapshot(std::vector<prometheus::MetricFamily> families);

  // On a temporary Snapshot this returns the families by value, so that
  // `for (auto& f : Snapshot(r).families())` does not iterate a dead object.
  const std::vector<prometheus::MetricFamily>& families() const& { return families_; }
  std::vector<prometheus::MetricFamily> families() && { return std::move(families_); }

  // Returns the family called `name`, or null.
  const prometheus::MetricFamily* family(std::string_view name) const;
  // Returns the series of family `name` whose labels are exactly `labels`, or null.
  const prometheus::ClientMetric* series(std::string_view name,
                                         const prometheus::Labels& labels) const;
  // Returns the number of series in family `name` (0 when it is absent).
  std::size_t seriesCount(std::string_view name) const;

  // Returns the value of a counter, gauge or untyped series; nullopt when the
  // series is absent or is a histogram or summary.
  std::optional<double> value(std::string_view name, const prometheus::Labels& labels) const;
  // Returns the sum of the values of every series of `name` whose labels
  // include all of `subset` (0 when none does).
  double sum(std::string_view name, const prometheus::Labels& subset) const;

  // Returns a histogram series; nullopt when absent or not a histogram.
  std::optional<prometheus::ClientMetric::Histogram> histogram(
      std::string_view name, const prometheus::Labels& labels) const;

 private:
  std::vector<prometheus::MetricFamily> families_;
};

// Returns the cumulative count of the bucket of `histogram` whose upper bound
// is `upper_bound`; nullopt when it has no such bucket.
std::optional<std::uint64_t> cumulativeCount(const prometheus::ClientMetric::Histogram& histogram,
                                             double upper_bound);

// The cumulative counts of `histogram` at each of `upper_bounds`, in their
// order (nullopt where it has no such bucket): a histogram's shape, checked
// in one comparison.
using CumulativeCounts = std::vector<std::optional<std::uint64_t>>;
CumulativeCounts cumulativeCounts(const prometheus::ClientMetric::Histogram& histogram,
                                  const std::vector<double>& upper_bounds);

}  // namespace rsc::metrics
