#include "metrics/registry.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>

#include <chrono>
#include <vector>

#include "test/metrics/snapshot.h"

namespace rsc::metrics {
namespace {

TEST(Registry, ExponentialBucketsAreExactPowers) {
  const std::vector<double> want = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10};
  EXPECT_EQ(exponentialBuckets(1e-8, 10, 10), want);
  EXPECT_EQ(exponentialBuckets(0.5, 2, 4), (std::vector<double>{0.5, 1, 2, 4}));
  EXPECT_TRUE(exponentialBuckets(1, 2, 0).empty());
}

TEST(Registry, ToSecondsKeepsFractions) {
  EXPECT_EQ(toSeconds(std::chrono::milliseconds(5)), 0.005);
  EXPECT_EQ(toSeconds(std::chrono::seconds(90)), 90.0);
  EXPECT_EQ(toSeconds(std::chrono::nanoseconds(10)), 1e-8);
}

TEST(Registry, EachRegistryIsIndependent) {
  auto first = newRegistry();
  auto second = newRegistry();
  prometheus::BuildCounter().Name("x_total").Help("x").Register(*first).Add({}).Increment();
  EXPECT_EQ(Snapshot(*first).value("x_total", {}), 1.0);
  EXPECT_EQ(Snapshot(*second).family("x_total"), nullptr);
}

TEST(Registry, SameFamilyRegisteredTwiceIsShared) {
  auto registry = newRegistry();
  auto& a = prometheus::BuildCounter().Name("x_total").Help("x").Register(*registry);
  auto& b = prometheus::BuildCounter().Name("x_total").Help("x").Register(*registry);
  EXPECT_EQ(&a, &b);
}

}  // namespace
}  // namespace rsc::metrics
