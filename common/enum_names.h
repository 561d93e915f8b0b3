// EnumNames: one table of an enum's values and their names (metric labels, log
// and Event words), so that each name and the list of every value are written
// once. Used by metrics/, client/ and controller/ for their label enums.
// Immutable and constexpr: safe from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <string_view>
#include <utility>

namespace rsc {

template <typename E, std::size_t N>
class EnumNames {
 public:
  constexpr explicit EnumNames(std::array<std::pair<E, std::string_view>, N> names)
      : names_(names) {}

  // The name of `value`; "unknown" for a value the table lacks.
  constexpr std::string_view operator()(E value) const {
    for (const auto& [known, name] : names_) {
      if (known == value) return name;
    }
    return "unknown";
  }

  // Every value, in the table's order.
  constexpr std::array<E, N> values() const {
    std::array<E, N> values{};
    for (std::size_t i = 0; i < N; ++i) values[i] = names_[i].first;
    return values;
  }

 private:
  std::array<std::pair<E, std::string_view>, N> names_;
};

// enumNames<E>({{E::kA, "a"}, {E::kB, "b"}}): the table, its size counted.
template <typename E, std::size_t N>
constexpr EnumNames<E, N> enumNames(const std::pair<E, std::string_view> (&names)[N]) {
  return EnumNames<E, N>(std::to_array(names));
}

}  // namespace rsc
