#include "common/duration.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>

namespace rsc {
namespace {

struct Unit {
  std::string_view name;
  Clock::Duration length;
};

// Longest names first, so "ms" is not read as "m" followed by "s".
constexpr std::array<Unit, 4> kUnits{{
    {"ms", std::chrono::milliseconds(1)},
    {"s", std::chrono::seconds(1)},
    {"m", std::chrono::minutes(1)},
    {"h", std::chrono::hours(1)},
}};

bool isDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

StatusOr<Clock::Duration> parseDuration(std::string_view text, Clock::Duration largest_unit) {
  std::string units;
  for (const Unit& unit : kUnits) {
    if (unit.length > largest_unit) continue;
    units += units.empty() ? "" : ", ";
    units += unit.name;
  }
  const auto bad = [&] {
    return invalidArgument("must be a duration such as 30s, 1m30s or 500ms (units " + units +
                           "), not \"" + std::string(text) + "\"");
  };
  if (text == "0") return Clock::Duration::zero();
  if (text.empty()) return bad();

  // In nanoseconds, as a double: a sum of fractions of any unit, saturated below.
  double total = 0;
  std::string_view rest = text;
  while (!rest.empty()) {
    // A decimal number: digits, a point, digits, with a digit on either side.
    size_t i = 0;
    bool digits = false;
    while (i < rest.size() && isDigit(rest[i])) {
      ++i;
      digits = true;
    }
    if (i < rest.size() && rest[i] == '.') {
      ++i;
      while (i < rest.size() && isDigit(rest[i])) {
        ++i;
        digits = true;
      }
    }
    if (!digits) return bad();
    double number = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + i, number);
    if (ec != std::errc() || end != rest.data() + i) return bad();
    rest.remove_prefix(i);

    // Its unit.
    const Unit* found = nullptr;
    for (const Unit& unit : kUnits) {
      if (rest.starts_with(unit.name)) {
        found = &unit;
        break;
      }
    }
    if (found == nullptr || found->length > largest_unit) return bad();
    rest.remove_prefix(found->name.size());
    total += number * static_cast<double>(found->length.count());
  }

  constexpr auto kMax = static_cast<double>(std::numeric_limits<Clock::Duration::rep>::max());
  if (!(total < kMax)) return Clock::Duration::max();
  return Clock::Duration(static_cast<Clock::Duration::rep>(std::llround(total)));
}

}  // namespace rsc
