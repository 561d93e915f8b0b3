// The pieces every metric struct in this folder shares: how a registry is made
// (no global one: main and each test own theirs), bucket layouts, and the
// conversion of Clock durations to the seconds Prometheus wants.
// Free functions only; all of them are thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"

namespace rsc::metrics {

// Returns a new, empty registry. The metric structs register their families
// into it and rely on its default merge behaviour: two structs naming the same
// family (two work queues, say) share it and differ only in their labels.
std::shared_ptr<prometheus::Registry> newRegistry();

// The family `name` of `registry`, described by `help`: registered by its
// first user, shared with the others. Every metric struct here makes its
// families through these.
prometheus::Family<prometheus::Counter>& counterFamily(prometheus::Registry& registry,
                                                       const std::string& name,
                                                       const std::string& help);
prometheus::Family<prometheus::Gauge>& gaugeFamily(prometheus::Registry& registry,
                                                   const std::string& name,
                                                   const std::string& help);
prometheus::Family<prometheus::Histogram>& histogramFamily(prometheus::Registry& registry,
                                                           const std::string& name,
                                                           const std::string& help);

// Returns `count` upper bounds start, start*factor, start*factor^2, ...
// (Prometheus' ExponentialBuckets). Each bound is computed from the start, not
// by repeated multiplication, so the fourth of 1e-8 * 10^i is 1e-05, not
// 9.999999999999999e-06.
std::vector<double> exponentialBuckets(double start, double factor, std::size_t count);

// Returns `d` in seconds, the base unit of every *_seconds metric.
inline double toSeconds(Clock::Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace rsc::metrics
