// The /metrics response body: everything the registry and the process collector
// report, in the Prometheus text format 0.0.4. The HTTP servers (Boost.Beast)
// call serializeText per scrape and send it with kTextContentType; nothing here
// does I/O. Thread-safe: collection takes each source's own locks.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rsc::metrics {

// The Content-Type of a serializeText body.
inline constexpr std::string_view kTextContentType = "text/plain; version=0.0.4; charset=utf-8";

// Collects every live source, in order, and returns the text exposition.
// Sources that have expired are skipped. Families of the same name from
// different sources are merged into one (the text format allows a name once),
// keeping the first source's help; a later family of another type under a
// taken name is dropped.
std::string serializeText(const std::vector<std::weak_ptr<prometheus::Collectable>>& sources);

// Returns the text exposition of already collected families, merged as above.
std::string serializeText(std::vector<prometheus::MetricFamily> families);

}  // namespace rsc::metrics
