#include "controller/pool/decode_budget.h"

#include <gtest/gtest.h>

#include <thread>

#include "test/fakes/fake_clock.h"

namespace rsc::controller::pool {
namespace {

using testing::FakeClock;

constexpr size_t kMiB = size_t{1024} * 1024;

DecodeBudgetOptions options(FakeClock& clock, size_t max_bytes = 10 * kMiB) {
  DecodeBudgetOptions o;
  o.max_bytes = max_bytes;
  o.clock = &clock;
  return o;
}

TEST(DecodeBudgetTest, ReservationsAddUpToTheLimitAndAreReleasedWhenDestroyed) {
  FakeClock clock;
  DecodeBudget budget(options(clock));
  std::optional<DecodeBudget::Reservation> a = budget.reserve(6 * kMiB, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(budget.reserved(), 6 * kMiB);
  EXPECT_FALSE(budget.reserve(5 * kMiB, {})) << "6 + 5 MiB do not fit in 10";
  std::optional<DecodeBudget::Reservation> b = budget.reserve(4 * kMiB, {});
  ASSERT_TRUE(b);
  EXPECT_EQ(budget.reserved(), 10 * kMiB);
  {
    DecodeBudget::Reservation moved;
    if (b) moved = std::move(*b);
    EXPECT_EQ(budget.reserved(), 10 * kMiB) << "moved, and held once";
  }
  EXPECT_EQ(budget.reserved(), 6 * kMiB) << "released by the reservation it was moved to";
  a.reset();
  EXPECT_EQ(budget.reserved(), 0u);
}

TEST(DecodeBudgetTest, MoreThanTheWholeBudgetNeverFits) {
  FakeClock clock;
  DecodeBudget budget(options(clock));
  EXPECT_FALSE(budget.reserve(10 * kMiB + 1, std::chrono::hours(1)));
  EXPECT_EQ(budget.reserved(), 0u);
}

TEST(DecodeBudgetTest, AWaitingReservationTakesTheRoomReleasedForIt) {
  FakeClock clock;
  DecodeBudget budget(options(clock));
  std::optional<DecodeBudget::Reservation> held = budget.reserve(8 * kMiB, {});
  ASSERT_TRUE(held);
  std::optional<DecodeBudget::Reservation> waited;
  // The fake clock does not move: only the release can end this wait.
  std::thread waiter([&] { waited = budget.reserve(5 * kMiB, std::chrono::hours(1)); });
  held.reset();
  waiter.join();
  ASSERT_TRUE(waited);
  EXPECT_EQ(budget.reserved(), 5 * kMiB);
}

TEST(DecodeBudgetTest, LargeReleasesTrimTheHeapAtMostOncePerIntervalAndWhenTheLastIsDone) {
  FakeClock clock;
  DecodeBudget budget(options(clock));
  budget.reserve(1 * kMiB, {}).reset();
  EXPECT_EQ(budget.trims(), 0u) << "below kDefaultTrimAboveBytes";
  std::optional<DecodeBudget::Reservation> other = budget.reserve(1 * kMiB, {});
  budget.reserve(kDefaultTrimAboveBytes, {}).reset();
  EXPECT_EQ(budget.trims(), 1u);
  budget.reserve(kDefaultTrimAboveBytes, {}).reset();
  EXPECT_EQ(budget.trims(), 1u) << "within the interval while another decode goes on";
  clock.advance(kDefaultTrimInterval);
  budget.reserve(kDefaultTrimAboveBytes, {}).reset();
  EXPECT_EQ(budget.trims(), 2u) << "after the interval";
  budget.reserve(kDefaultTrimAboveBytes, {}).reset();
  EXPECT_EQ(budget.trims(), 2u);
  other.reset();
  EXPECT_EQ(budget.trims(), 3u) << "the last release trims what the burst left";
  other = budget.reserve(1 * kMiB, {});
  other.reset();
  EXPECT_EQ(budget.trims(), 3u) << "nothing large released since";
}

TEST(DecodeBudgetTest, ParsingReservesTheMeasuredCostUntilTheJsonIsGone) {
  FakeClock clock;
  const std::string body = R"({"devices": [{"name": "a"}, {"name": "b"}]})";
  const size_t cost = decodedJsonBytes(body);
  DecodeBudget budget(options(clock, cost));
  {
    StatusOr<BudgetedJson> parsed = parseJsonBodyWithin(&budget, body, cost, {});
    ASSERT_TRUE(parsed.ok()) << parsed.status().toString();
    EXPECT_EQ(parsed->json["devices"].size(), 2u);
    EXPECT_EQ(budget.reserved(), cost);
    StatusOr<BudgetedJson> busy = parseJsonBodyWithin(&budget, body, cost, {});
    ASSERT_FALSE(busy.ok());
    EXPECT_EQ(busy.status().reason(), kReasonBusy);
    EXPECT_EQ(busy.status().code(), StatusCode::kUnavailable);
  }
  EXPECT_EQ(budget.reserved(), 0u);
  // The limits of one body come first, and reserve nothing.
  StatusOr<BudgetedJson> large = parseJsonBodyWithin(&budget, body, cost - 1, {});
  ASSERT_FALSE(large.ok());
  EXPECT_EQ(large.status().code(), StatusCode::kTooLarge);
  StatusOr<BudgetedJson> bad = parseJsonBodyWithin(&budget, "{", cost, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(budget.reserved(), 0u);
}

}  // namespace
}  // namespace rsc::controller::pool
