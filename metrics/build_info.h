// BuildInfo: resourceslice_controller_build_info{version,git_commit,cpp_compiler} = 1,
// so dashboards can show which build runs where and join it onto other series.
// main creates it once at startup; it has no methods after that.
#pragma once

#include <prometheus/registry.h>

#include <string>
#include <string_view>

namespace rsc::metrics {

// Returns the compiler that built this binary, such as "gcc 12.2.0".
std::string compilerDescription();

class BuildInfo {
 public:
  // Registers the series in `registry`, which must outlive this object.
  BuildInfo(prometheus::Registry& registry, std::string_view version, std::string_view git_commit,
            std::string_view cpp_compiler = compilerDescription());
  BuildInfo(const BuildInfo&) = delete;
  BuildInfo& operator=(const BuildInfo&) = delete;
};

}  // namespace rsc::metrics
