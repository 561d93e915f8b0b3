#include "metrics/registry.h"

#include <cmath>

namespace rsc::metrics {

std::shared_ptr<prometheus::Registry> newRegistry() {
  return std::make_shared<prometheus::Registry>(prometheus::Registry::InsertBehavior::Merge);
}

prometheus::Family<prometheus::Counter>& counterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Gauge>& gaugeFamily(prometheus::Registry& registry,
                                                   const std::string& name,
                                                   const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Histogram>& histogramFamily(prometheus::Registry& registry,
                                                           const std::string& name,
                                                           const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

std::vector<double> exponentialBuckets(double start, double factor, std::size_t count) {
  std::vector<double> bounds;
  bounds.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    bounds.push_back(start * std::pow(factor, static_cast<double>(i)));
  }
  return bounds;
}

}  // namespace rsc::metrics
