#include "metrics/build_info.h"

#include <gtest/gtest.h>

#include "metrics/registry.h"
#include "test/metrics/snapshot.h"

namespace rsc::metrics {
namespace {

TEST(BuildInfo, OneSeriesAtOneWithTheBuildLabels) {
  auto registry = newRegistry();
  BuildInfo info(*registry, "0.1.0", "0123abc", "gcc 12.2.0");
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.seriesCount("resourceslice_controller_build_info"), 1u);
  EXPECT_EQ(
      snap.value("resourceslice_controller_build_info",
                 {{"version", "0.1.0"}, {"git_commit", "0123abc"}, {"cpp_compiler", "gcc 12.2.0"}}),
      1.0);
}

TEST(BuildInfo, DefaultCompilerIsTheOneThatBuiltTheBinary) {
  const auto compiler = compilerDescription();
#if defined(__clang__)
  EXPECT_EQ(compiler.rfind("clang ", 0), 0u) << compiler;
#elif defined(__GNUC__)
  EXPECT_EQ(compiler, std::string("gcc ") + __VERSION__);
#endif
  auto registry = newRegistry();
  BuildInfo info(*registry, "0.1.0", "0123abc");
  EXPECT_EQ(Snapshot(*registry).value(
                "resourceslice_controller_build_info",
                {{"version", "0.1.0"}, {"git_commit", "0123abc"}, {"cpp_compiler", compiler}}),
            1.0);
}

}  // namespace
}  // namespace rsc::metrics
