// The paths at which two JSON documents differ: what a dry run reports as the
// fields an update changes. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rsc::client {

// Appends to `out` every path at which `want` and `have` differ, depth first:
// within each object or array, `want`'s members in order, then those only
// `have` holds. Paths extend `path` with
// ".key" for object members and "[i]" for array elements; arrays whose
// elements are all objects with a unique string "name" (devices, counter
// sets, counters) are matched by name instead, as "[name]", so that a device
// inserted in front does not make every later one differ. Values of different
// kinds, scalars and elements present on one side only differ as a whole.
void jsonDifferences(const nlohmann::json& want, const nlohmann::json& have,
                     const std::string& path, std::vector<std::string>& out);

}  // namespace rsc::client
