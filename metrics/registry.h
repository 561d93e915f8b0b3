// The pieces every metric struct in this folder shares: how a registry is made
// (no global one: main and each test own theirs), bucket layouts, and the
// conversion of Clock durations to the seconds Prometheus wants.
// Free functions only; all of them are thread-safe.
#pragma once

#include <prometheus/registry.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "common/clock.h"

namespace rsc::metrics {

// Returns a new, empty registry. The metric structs register their families
// into it and rely on its default merge behaviour: two structs naming the same
// family (two work queues, say) share it and differ only in their labels.
std::shared_ptr<prometheus::Registry> newRegistry();

// Returns `count` upper bounds start, start*factor, start*factor^2, ...
// (Prometheus' ExponentialBuckets). Each bound is computed from the start, not
// by repeated multiplication, so the fourth of 1e-8 * 10^i is 1e-05, not
// 9.999999999999999e-06.
std::vector<double> exponentialBuckets(double start, double factor, std::size_t count);

// Returns `d` in seconds, the base unit of every *_seconds metric.
inline double toSeconds(Clock::Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace rsc::metrics
