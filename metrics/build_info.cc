#include "metrics/build_info.h"

#include <prometheus/gauge.h>

#include "metrics/registry.h"

namespace rsc::metrics {

std::string compilerDescription() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("gcc ") + __VERSION__;
#else
  return "unknown";
#endif
}

BuildInfo::BuildInfo(prometheus::Registry& registry, std::string_view version,
                     std::string_view git_commit, std::string_view cpp_compiler) {
  gaugeFamily(registry, "resourceslice_controller_build_info",
              "Always 1; the labels say which build of the controller is running.")
      .Add({{"version", std::string(version)},
            {"git_commit", std::string(git_commit)},
            {"cpp_compiler", std::string(cpp_compiler)}})
      .Set(1);
}

}  // namespace rsc::metrics
