#include "common/enum_names.h"

#include <gtest/gtest.h>

#include <array>

namespace rsc {
namespace {

enum class Color { kRed, kGreen, kBlue };

constexpr auto kColorNames = enumNames<Color>({
    {Color::kRed, "red"},
    {Color::kGreen, "green"},
});

TEST(EnumNames, NamesEachValueOfTheTable) {
  EXPECT_EQ(kColorNames(Color::kRed), "red");
  EXPECT_EQ(kColorNames(Color::kGreen), "green");
  static_assert(kColorNames(Color::kGreen) == "green");
}

TEST(EnumNames, AValueTheTableLacksIsUnknown) { EXPECT_EQ(kColorNames(Color::kBlue), "unknown"); }

TEST(EnumNames, ValuesAreEveryValueInTheTablesOrder) {
  constexpr std::array<Color, 2> values = kColorNames.values();
  EXPECT_EQ(values, (std::array{Color::kRed, Color::kGreen}));
}

}  // namespace
}  // namespace rsc
