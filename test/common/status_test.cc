#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace rsc {
namespace {

TEST(Status, DefaultIsOk) {
  const Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.toString(), "OK");
}

TEST(Status, WithContextPrefixesTheMessage) {
  const Status s = conflict("the object has been modified").withContext("update ResourceSlice x");
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.message(), "update ResourceSlice x: the object has been modified");
  EXPECT_EQ(s.toString(), "Conflict: update ResourceSlice x: the object has been modified");
}

TEST(Status, WithContextKeepsOkStatusesOk) {
  EXPECT_TRUE(okStatus().withContext("anything").ok());
  EXPECT_EQ(okStatus().withContext("anything").message(), "");
}

TEST(Status, KeepsReasonAndDetails) {
  const Status s(StatusCode::kUnprocessable, "invalid", {{"spec.devices[0].name", "required"}},
                 "Invalid");
  EXPECT_EQ(s.reason(), "Invalid");
  ASSERT_EQ(s.details().size(), 1U);
  EXPECT_EQ(s.details()[0].field, "spec.devices[0].name");
  EXPECT_EQ(s.withContext("create").details(), s.details());
}

TEST(StatusOr, HoldsValueOrError) {
  const StatusOr<int> v = 7;
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, 7);
  const StatusOr<int> e = notFound("no such pool");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kNotFound);
}

TEST(StatusOr, OkStatusWithoutValueBecomesInternalError) {
  const StatusOr<int> e = okStatus();
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInternal);
}

TEST(StatusOr, MovesOutMoveOnlyValues) {
  StatusOr<std::unique_ptr<int>> v = std::make_unique<int>(3);
  std::unique_ptr<int> p = std::move(v).value();
  EXPECT_EQ(*p, 3);
}

Status failsWhenNegative(int x) {
  if (x < 0) return invalidArgument("negative");
  return okStatus();
}

StatusOr<int> doubled(int x) {
  RETURN_IF_ERROR(failsWhenNegative(x));
  return 2 * x;
}

StatusOr<int> quadrupled(int x) {
  ASSIGN_OR_RETURN(const int twice, doubled(x));
  return 2 * twice;
}

TEST(StatusMacros, PropagateErrorsAndValues) {
  EXPECT_EQ(*quadrupled(3), 12);
  EXPECT_EQ(quadrupled(-1).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace rsc
