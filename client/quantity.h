// Quantity: a Kubernetes resource.Quantity ("40Gi", "1500m", "1e3"), compared
// by value as the API server does, so that "1Gi" and "1024Mi" are equal and a
// server-normalised value never looks like a change. Immutable value type.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace rsc::client {

class Quantity {
 public:
  // The quantity "0".
  Quantity();

  // Parses the Kubernetes quantity grammar: a signed decimal number with an
  // optional binary (Ki..Ei), decimal (n, u, m, k, M, G, T, P, E) or exponent
  // (e3, E-2) suffix. Fails with InvalidArgument on anything else.
  static StatusOr<Quantity> parse(std::string_view text);

  // The text as given (what is written back to the API server).
  const std::string& text() const { return text_; }

  // Compares by value. Values are held exactly as sign, decimal digits and a
  // power-of-ten exponent (binary suffixes are expanded exactly), except where
  // the API server itself stores another value: below 10^-9 a value is
  // rounded away from zero ("0.1n" is "1n"), and a binary-suffixed value is
  // capped at 2^63-1 ("8Ei").
  friend bool operator==(const Quantity& a, const Quantity& b);
  friend std::strong_ordering operator<=>(const Quantity& a, const Quantity& b);

  // Returns the value rounded towards zero to an integer, saturating at the
  // int64 range (for limits checks and metrics).
  int64_t toInt64() const;

 private:
  std::string text_;
  bool negative_ = false;
  std::string digits_;    // no leading zeros; empty means zero
  int64_t exponent_ = 0;  // value = digits * 10^exponent, no trailing zeros in digits
};

}  // namespace rsc::client
