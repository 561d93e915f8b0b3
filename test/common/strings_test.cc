#include "common/strings.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace rsc {
namespace {

using Views = std::vector<std::string_view>;

TEST(Strings, SplitKeepsEmptyParts) {
  EXPECT_EQ(split("a,,b", ','), (Views{"a", "", "b"}));
  EXPECT_EQ(split("", ','), (Views{""}));
  EXPECT_EQ(split(",", ','), (Views{"", ""}));
  EXPECT_EQ(split("/usr/bin:/bin", ':'), (Views{"/usr/bin", "/bin"}));
  EXPECT_EQ(split("v1/drivers/", '/'), (Views{"v1", "drivers", ""}));
}

TEST(Strings, FieldsAreTheWordsBetweenBlanks) {
  EXPECT_EQ(fields("  R 1\t\t2\n3 \r\n"), (Views{"R", "1", "2", "3"}));
  EXPECT_EQ(fields(""), Views{});
  EXPECT_EQ(fields(" \t\n"), Views{});
  EXPECT_EQ(fields("one"), Views{"one"});
}

TEST(Strings, TrimBlanksAndAsciiLower) {
  EXPECT_EQ(trimBlanks(" \t token\r\n"), "token");
  EXPECT_EQ(trimBlanks("a b"), "a b");
  EXPECT_EQ(trimBlanks(" \n "), "");
  EXPECT_EQ(asciiLower("Content-Type: GPU.Example.COM/x_1"), "content-type: gpu.example.com/x_1");
  EXPECT_EQ(asciiLower("\xC3\x89"), "\xC3\x89") << "bytes past ASCII are left as they are";
}

TEST(Strings, ParseWholeTakesTheWholeTextOrNothing) {
  EXPECT_EQ(parseWhole<int64_t>("12345"), 12345);
  EXPECT_EQ(parseWhole<int64_t>("-7"), -7);
  EXPECT_EQ(parseWhole<uint64_t>("18446744073709551615"), UINT64_MAX);
  for (const char* bad : {"", "+1", " 1", "1 ", "1x", "0x10", "1.0", "-"}) {
    EXPECT_EQ(parseWhole<int64_t>(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(parseWhole<int>("2147483648"), std::nullopt) << "does not fit";
  EXPECT_EQ(parseWhole<uint64_t>("-1"), std::nullopt);
}

TEST(Strings, ExcerptIsOneBoundedLine) {
  EXPECT_EQ(excerpt("  Bad\r\n\tgateway\n", 100), "Bad   gateway") << "each byte a space";
  EXPECT_EQ(excerpt("abcdef", 6), "abcdef");
  EXPECT_EQ(excerpt("abcdefg", 6), "abcdef...");
  EXPECT_EQ(excerpt("", 6), "");
}

}  // namespace
}  // namespace rsc
