#include "client/json_nesting.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rsc::client {
namespace {

TEST(JsonNesting, CountsBracketsOutsideStringsOnly) {
  JsonNesting nesting;
  std::vector<size_t> depths;
  for (const char c : std::string(R"({"a":[1,"]}\"[{",{}]})")) {
    if (nesting.feed(c) != JsonNesting::Byte::kOther) depths.push_back(nesting.depth());
  }
  // { [ { } ] }: the brackets in the string (after an escaped quote) do not count.
  EXPECT_EQ(depths, (std::vector<size_t>{1, 2, 3, 2, 1, 0}));
}

TEST(JsonNesting, ACloseWithNothingOpenStaysAtZero) {
  JsonNesting nesting;
  EXPECT_EQ(nesting.feed(']'), JsonNesting::Byte::kClose);
  EXPECT_EQ(nesting.depth(), 0u);
  EXPECT_EQ(nesting.feed('['), JsonNesting::Byte::kOpen);
  EXPECT_EQ(nesting.depth(), 1u);
}

TEST(JsonDepthExceeds, ComparesTheDeepestPointWithTheLimit) {
  EXPECT_FALSE(jsonDepthExceeds("", 0));
  EXPECT_FALSE(jsonDepthExceeds("1", 0));
  EXPECT_TRUE(jsonDepthExceeds("[]", 0));
  EXPECT_FALSE(jsonDepthExceeds(R"([[{"a":[]}],[]])", 4));
  EXPECT_TRUE(jsonDepthExceeds(R"([[{"a":[[]]}],[]])", 4));
  EXPECT_FALSE(jsonDepthExceeds(R"(["[[[[[[", "\"[[[[["])", 1));
  // Unbalanced text is measured as far as it goes.
  EXPECT_TRUE(jsonDepthExceeds(std::string(30000, '['), 64));
  EXPECT_FALSE(jsonDepthExceeds(std::string(64, '['), 64));
}

}  // namespace
}  // namespace rsc::client
