#include "metrics/inventory_metrics.h"

#include <gtest/gtest.h>

#include <string>

#include "metrics/registry.h"
#include "test/metrics/snapshot.h"

namespace rsc::metrics {
namespace {

constexpr char kPushes[] = "resourceslice_controller_pushes_total";

TEST(InventoryMetrics, CountsPushesByDriverAndCode) {
  auto registry = newRegistry();
  InventoryMetrics metrics(*registry);
  metrics.push("gpu.example.com", 200);
  metrics.push("gpu.example.com", 200);
  metrics.push("gpu.example.com", 422);
  metrics.push("nic.example.com", 202);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kPushes, {{"driver", "gpu.example.com"}, {"code", "200"}}), 2.0);
  EXPECT_EQ(snap.value(kPushes, {{"driver", "gpu.example.com"}, {"code", "422"}}), 1.0);
  EXPECT_EQ(snap.value(kPushes, {{"driver", "nic.example.com"}, {"code", "202"}}), 1.0);
  EXPECT_EQ(snap.sum(kPushes, {}), 4.0);
}

TEST(InventoryMetrics, CountsPoolBodiesByPathFromZero) {
  constexpr char kBodies[] = "resourceslice_controller_push_bodies_total";
  auto registry = newRegistry();
  InventoryMetrics metrics(*registry, /*max_drivers=*/1);
  metrics.poolBody("gpu.example.com", /*unchanged=*/true);
  {
    const Snapshot snap(*registry);
    EXPECT_EQ(snap.value(kBodies, {{"driver", "gpu.example.com"}, {"path", "unchanged"}}), 1.0);
    EXPECT_EQ(snap.value(kBodies, {{"driver", "gpu.example.com"}, {"path", "decoded"}}), 0.0);
  }
  metrics.poolBody("gpu.example.com", /*unchanged=*/false);
  metrics.poolBody("gpu.example.com", /*unchanged=*/true);
  metrics.poolBody("nic.example.com", /*unchanged=*/false);
  metrics.poolBody("fpga.example.com", /*unchanged=*/false);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kBodies, {{"driver", "gpu.example.com"}, {"path", "unchanged"}}), 2.0);
  EXPECT_EQ(snap.value(kBodies, {{"driver", "gpu.example.com"}, {"path", "decoded"}}), 1.0);
  EXPECT_EQ(snap.value(kBodies, {{"driver", "_other"}, {"path", "decoded"}}), 2.0);
  EXPECT_EQ(snap.seriesCount(kBodies), 4u);
}

TEST(InventoryMetrics, CountsRefusalsByReasonFromZero) {
  constexpr char kRefusals[] = "resourceslice_controller_inventory_refusals_total";
  auto registry = newRegistry();
  InventoryMetrics metrics(*registry);
  {
    const Snapshot snap(*registry);
    EXPECT_EQ(snap.seriesCount(kRefusals), InventoryMetrics::kRefusalReasons.size() + 1);
    EXPECT_EQ(snap.value(kRefusals, {{"reason", "evicted"}}), 0.0);
  }
  metrics.refused("evicted");
  metrics.refused("evicted");
  metrics.refused("auth_review_rate");
  metrics.refused("no-such-reason");
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kRefusals, {{"reason", "evicted"}}), 2.0);
  EXPECT_EQ(snap.value(kRefusals, {{"reason", "auth_review_rate"}}), 1.0);
  EXPECT_EQ(snap.value(kRefusals, {{"reason", "other"}}), 1.0);
}

TEST(InventoryMetrics, FirstPushPreinitialisesTheApiCodes) {
  auto registry = newRegistry();
  InventoryMetrics metrics(*registry);
  metrics.push("gpu.example.com", 200);
  const Snapshot snap(*registry);
  for (const char* code :
       {"200", "202", "400", "401", "403", "404", "409", "413", "422", "429", "500", "503"}) {
    ASSERT_TRUE(snap.value(kPushes, {{"driver", "gpu.example.com"}, {"code", code}})) << code;
  }
  EXPECT_EQ(snap.value(kPushes, {{"driver", "gpu.example.com"}, {"code", "503"}}), 0.0);
  EXPECT_EQ(snap.seriesCount(kPushes), 12u);
}

TEST(InventoryMetrics, UnlistedCodeGetsItsOwnSeries) {
  auto registry = newRegistry();
  InventoryMetrics metrics(*registry);
  metrics.push("gpu.example.com", 429);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kPushes, {{"driver", "gpu.example.com"}, {"code", "429"}}), 1.0);
  EXPECT_EQ(snap.seriesCount(kPushes), 12u);
}

TEST(InventoryMetrics, DriversPastTheLimitShareOneSeries) {
  auto registry = newRegistry();
  InventoryMetrics metrics(*registry, /*max_drivers=*/2);
  metrics.push("a.example.com", 200);
  metrics.push("b.example.com", 200);
  for (int i = 0; i < 50; ++i) {
    metrics.push("invented-" + std::to_string(i), 401);
  }
  metrics.push("a.example.com", 200);  // a known driver keeps its own series
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kPushes, {{"driver", "a.example.com"}, {"code", "200"}}), 2.0);
  EXPECT_EQ(snap.value(kPushes, {{"driver", "_other"}, {"code", "401"}}), 50.0);
  EXPECT_FALSE(snap.value(kPushes, {{"driver", "invented-0"}, {"code", "401"}}));
  // Two drivers with their preinitialised codes, plus one overflow series.
  EXPECT_EQ(snap.seriesCount(kPushes), 2u * 12u + 1u);
}

TEST(InventoryMetrics, RefusedPushesShareOneSeriesOutsideTheLimit) {
  auto registry = newRegistry();
  InventoryMetrics metrics(*registry, /*max_drivers=*/1);
  for (int i = 0; i < 50; ++i) metrics.push("", 401);
  metrics.push("", 403);
  metrics.push("a.example.com", 202);
  const Snapshot snap(*registry);
  EXPECT_EQ(snap.value(kPushes, {{"driver", "_refused"}, {"code", "401"}}), 50.0);
  EXPECT_EQ(snap.value(kPushes, {{"driver", "_refused"}, {"code", "403"}}), 1.0);
  // The refused series take no slot of a driver.
  EXPECT_EQ(snap.value(kPushes, {{"driver", "a.example.com"}, {"code", "202"}}), 1.0);
}

}  // namespace
}  // namespace rsc::metrics
