#include "test/metrics/snapshot.h"

#include <prometheus/metric_type.h>

#include <algorithm>
#include <utility>

namespace rsc::metrics {

namespace {

// Label order in a collected series is the map order of prometheus::Labels,
// but compare as sets so the result does not depend on that.
bool hasLabels(const prometheus::ClientMetric& metric, const prometheus::Labels& wanted) {
  return std::all_of(wanted.begin(), wanted.end(), [&](const auto& pair) {
    return std::any_of(metric.label.begin(), metric.label.end(), [&](const auto& label) {
      return label.name == pair.first && label.value == pair.second;
    });
  });
}

}  // namespace

Snapshot::Snapshot(const prometheus::Collectable& source) : families_(source.Collect()) {}

Snapshot::Snapshot(std::vector<prometheus::MetricFamily> families)
    : families_(std::move(families)) {}

const prometheus::MetricFamily* Snapshot::family(std::string_view name) const {
  for (const auto& family : families_) {
    if (family.name == name) {
      return &family;
    }
  }
  return nullptr;
}

const prometheus::ClientMetric* Snapshot::series(std::string_view name,
                                                 const prometheus::Labels& labels) const {
  const auto* found = family(name);
  if (found == nullptr) {
    return nullptr;
  }
  for (const auto& metric : found->metric) {
    if (metric.label.size() == labels.size() && hasLabels(metric, labels)) {
      return &metric;
    }
  }
  return nullptr;
}

std::size_t Snapshot::seriesCount(std::string_view name) const {
  const auto* found = family(name);
  return found == nullptr ? 0 : found->metric.size();
}

std::optional<double> Snapshot::value(std::string_view name,
                                      const prometheus::Labels& labels) const {
  const auto* metric = series(name, labels);
  if (metric == nullptr) {
    return std::nullopt;
  }
  switch (family(name)->type) {
    case prometheus::MetricType::Counter:
      return metric->counter.value;
    case prometheus::MetricType::Gauge:
      return metric->gauge.value;
    case prometheus::MetricType::Untyped:
      return metric->untyped.value;
    default:
      return std::nullopt;
  }
}

double Snapshot::sum(std::string_view name, const prometheus::Labels& subset) const {
  const auto* found = family(name);
  if (found == nullptr) {
    return 0;
  }
  double total = 0;
  for (const auto& metric : found->metric) {
    if (!hasLabels(metric, subset)) {
      continue;
    }
    switch (found->type) {
      case prometheus::MetricType::Counter:
        total += metric.counter.value;
        break;
      case prometheus::MetricType::Gauge:
        total += metric.gauge.value;
        break;
      case prometheus::MetricType::Untyped:
        total += metric.untyped.value;
        break;
      default:
        break;
    }
  }
  return total;
}

std::optional<prometheus::ClientMetric::Histogram> Snapshot::histogram(
    std::string_view name, const prometheus::Labels& labels) const {
  const auto* metric = series(name, labels);
  if (metric == nullptr || family(name)->type != prometheus::MetricType::Histogram) {
    return std::nullopt;
  }
  return metric->histogram;
}

std::optional<std::uint64_t> cumulativeCount(const prometheus::ClientMetric::Histogram& histogram,
                                             double upper_bound) {
  for (const auto& bucket : histogram.bucket) {
    if (bucket.upper_bound == upper_bound) {
      return bucket.cumulative_count;
    }
  }
  return std::nullopt;
}

CumulativeCounts cumulativeCounts(const prometheus::ClientMetric::Histogram& histogram,
                                  const std::vector<double>& upper_bounds) {
  CumulativeCounts counts;
  for (const double bound : upper_bounds) {
    counts.push_back(cumulativeCount(histogram, bound));
  }
  return counts;
}

}  // namespace rsc::metrics
