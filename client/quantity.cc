#include "client/quantity.h"

#include <cstddef>
#include <limits>
#include <string>
#include <utility>

namespace rsc::client {
namespace {

// The largest value the API server keeps for a binary-suffixed quantity:
// it caps "8Ei" and beyond at 2^63-1.
constexpr std::string_view kMaxInt64Digits = "9223372036854775807";

// The API server keeps no digit below 10^-9: it rounds a finer value away
// from zero ("0.1n" is stored as "1n"). Rounding the same way here keeps such
// a value from looking like a change after every write.
constexpr int64_t kSmallestExponent = -9;

// Exponents beyond int32 are refused rather than silently wrapped.
constexpr int64_t kMaxExponent = std::numeric_limits<int32_t>::max();

bool isDigit(char c) { return c >= '0' && c <= '9'; }

// The text shown in an error message, cut so that a huge input cannot make a
// huge message.
std::string quoted(std::string_view text) {
  constexpr size_t kMaxShown = 64;
  std::string out = "\"";
  out.append(text.substr(0, kMaxShown));
  if (text.size() > kMaxShown) {
    out.append("...");
  }
  out.push_back('"');
  return out;
}

Status parseError(std::string_view text, std::string_view why) {
  std::string message = "invalid quantity ";
  message.append(quoted(text)).append(": ").append(why);
  return invalidArgument(std::move(message));
}

// Multiplies a decimal digit string in place by a small factor.
void multiplyDigits(std::string& digits, uint32_t factor) {
  uint32_t carry = 0;
  for (size_t i = digits.size(); i-- > 0;) {
    char& digit = digits[i];
    uint32_t product = static_cast<uint32_t>(digit - '0') * factor + carry;
    digit = static_cast<char>('0' + product % 10);
    carry = product / 10;
  }
  std::string prefix;
  while (carry > 0) {
    prefix.push_back(static_cast<char>('0' + carry % 10));
    carry /= 10;
  }
  digits.insert(digits.begin(), prefix.rbegin(), prefix.rend());
}

// Adds one to a decimal digit string in place.
void incrementDigits(std::string& digits) {
  for (size_t i = digits.size(); i-- > 0;) {
    char& digit = digits[i];
    if (digit != '9') {
      ++digit;
      return;
    }
    digit = '0';
  }
  digits.insert(digits.begin(), '1');
}

// Compares |a| with |b|, each given as digits without leading or trailing
// zeros (empty for zero) and a power-of-ten exponent.
std::strong_ordering compareMagnitude(std::string_view a_digits, int64_t a_exponent,
                                      std::string_view b_digits, int64_t b_exponent) {
  if (a_digits.empty() || b_digits.empty()) {
    return !a_digits.empty() <=> !b_digits.empty();
  }
  // With no leading zeros, the position of the leading digit decides first.
  int64_t a_order = static_cast<int64_t>(a_digits.size()) + a_exponent;
  int64_t b_order = static_cast<int64_t>(b_digits.size()) + b_exponent;
  if (a_order != b_order) {
    return a_order <=> b_order;
  }
  // Same leading position: digit by digit; a longer string that shares the
  // other's prefix is larger, because its extra digits end in a non-zero.
  int c = a_digits.compare(b_digits);
  return c <=> 0;
}

struct Suffix {
  int64_t decimal_exponent = 0;
  int binary_power = 0;  // the value is multiplied by 1024^binary_power
};

// Interprets the suffix after the number; returns an empty message on success.
std::string_view interpretSuffix(std::string_view suffix, Suffix* out) {
  if (suffix.empty()) {
    return {};
  }
  if (suffix.size() == 1) {
    // The decimal SI suffixes and their powers of ten.
    constexpr std::pair<char, int64_t> kDecimal[] = {{'n', -9}, {'u', -6}, {'m', -3},
                                                     {'k', 3},  {'M', 6},  {'G', 9},
                                                     {'T', 12}, {'P', 15}, {'E', 18}};
    for (const auto& [letter, exponent] : kDecimal) {
      if (suffix[0] == letter) {
        out->decimal_exponent = exponent;
        return {};
      }
    }
    switch (suffix[0]) {
      case 'e':
        return "exponent has no digits";
      case '.':
        return "more than one decimal point";
      default:
        return "unknown suffix";
    }
  }
  if (suffix.size() == 2 && suffix[1] == 'i') {
    constexpr std::string_view kBinary = "KMGTPE";
    size_t at = kBinary.find(suffix[0]);
    if (at != std::string_view::npos) {
      out->binary_power = static_cast<int>(at) + 1;
      return {};
    }
  }
  if (suffix[0] == 'e' || suffix[0] == 'E') {
    std::string_view rest = suffix.substr(1);
    bool negative = false;
    if (rest.front() == '+' || rest.front() == '-') {
      negative = rest.front() == '-';
      rest.remove_prefix(1);
    }
    if (rest.empty()) {
      return "exponent has no digits";
    }
    int64_t exponent = 0;
    for (char c : rest) {
      if (!isDigit(c)) {
        return "exponent is not an integer";
      }
      exponent = exponent * 10 + (c - '0');
      if (exponent > kMaxExponent + 1) {
        return "exponent out of range";
      }
    }
    if (negative) {
      exponent = -exponent;
    }
    if (exponent > kMaxExponent || exponent < -kMaxExponent - 1) {
      return "exponent out of range";
    }
    out->decimal_exponent = exponent;
    return {};
  }
  if (suffix[0] == '.') {
    return "more than one decimal point";
  }
  return "unknown suffix";
}

}  // namespace

Quantity::Quantity() : text_("0") {}

StatusOr<Quantity> Quantity::parse(std::string_view text) {
  if (text.empty()) {
    return invalidArgument("invalid quantity \"\": empty");
  }

  // Sign, integer digits, fraction digits.
  size_t pos = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    ++pos;
  }
  size_t int_begin = pos;
  while (pos < text.size() && isDigit(text[pos])) {
    ++pos;
  }
  std::string_view int_part = text.substr(int_begin, pos - int_begin);
  std::string_view frac_part;
  if (pos < text.size() && text[pos] == '.') {
    size_t frac_begin = ++pos;
    while (pos < text.size() && isDigit(text[pos])) {
      ++pos;
    }
    frac_part = text.substr(frac_begin, pos - frac_begin);
  }
  if (int_part.empty() && frac_part.empty()) {
    return parseError(text, "expected a number before any suffix");
  }

  // The suffix scales the number.
  Suffix suffix;
  if (std::string_view why = interpretSuffix(text.substr(pos), &suffix); !why.empty()) {
    return parseError(text, why);
  }

  // digits * 10^exponent, exactly.
  Quantity q;
  q.text_ = std::string(text);
  size_t first = int_part.find_first_not_of('0');
  if (first == std::string_view::npos) {
    q.digits_.assign(frac_part);
  } else {
    q.digits_.reserve(int_part.size() - first + frac_part.size());
    q.digits_.assign(int_part.substr(first)).append(frac_part);
  }
  q.exponent_ = suffix.decimal_exponent - static_cast<int64_t>(frac_part.size());
  for (int i = 0; i < suffix.binary_power && !q.digits_.empty(); ++i) {
    multiplyDigits(q.digits_, 1024);
  }

  // Normalise: no leading zeros, trailing zeros moved into the exponent.
  size_t lead = q.digits_.find_first_not_of('0');
  if (lead == std::string::npos) {
    q.digits_.clear();
    q.exponent_ = 0;
    return q;  // zero, of either sign, is plain zero
  }
  q.digits_.erase(0, lead);
  size_t last = q.digits_.find_last_not_of('0');
  q.exponent_ += static_cast<int64_t>(q.digits_.size() - 1 - last);
  q.digits_.resize(last + 1);

  // Round below 10^-9 away from zero, as the API server stores it.
  if (q.exponent_ < kSmallestExponent) {
    int64_t drop = kSmallestExponent - q.exponent_;
    if (drop >= static_cast<int64_t>(q.digits_.size())) {
      q.digits_ = "1";
    } else {
      // The dropped digits end in a non-zero digit, so the rest is non-zero.
      q.digits_.resize(q.digits_.size() - static_cast<size_t>(drop));
      incrementDigits(q.digits_);
    }
    q.exponent_ = kSmallestExponent;
    // Rounding up may carry into trailing zeros ("19" becomes "20").
    size_t nonzero = q.digits_.find_last_not_of('0');
    q.exponent_ += static_cast<int64_t>(q.digits_.size() - 1 - nonzero);
    q.digits_.resize(nonzero + 1);
  }

  // Binary quantities are capped at 2^63-1, as the API server does.
  if (suffix.binary_power > 0) {
    if (std::is_gt(compareMagnitude(q.digits_, q.exponent_, kMaxInt64Digits, 0))) {
      q.digits_ = kMaxInt64Digits;
      q.exponent_ = 0;
    }
  }
  q.negative_ = negative;
  return q;
}

bool operator==(const Quantity& a, const Quantity& b) {
  return a.negative_ == b.negative_ && a.exponent_ == b.exponent_ && a.digits_ == b.digits_;
}

std::strong_ordering operator<=>(const Quantity& a, const Quantity& b) {
  // Signs first (zero is never negative), then magnitudes, reversed for
  // negatives.
  int a_sign = a.digits_.empty() ? 0 : (a.negative_ ? -1 : 1);
  int b_sign = b.digits_.empty() ? 0 : (b.negative_ ? -1 : 1);
  if (a_sign != b_sign) {
    return a_sign <=> b_sign;
  }
  if (a_sign == 0) {
    return std::strong_ordering::equal;
  }
  std::strong_ordering magnitude = compareMagnitude(a.digits_, a.exponent_, b.digits_, b.exponent_);
  if (a_sign > 0 || std::is_eq(magnitude)) {
    return magnitude;
  }
  return std::is_lt(magnitude) ? std::strong_ordering::greater : std::strong_ordering::less;
}

int64_t Quantity::toInt64() const {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  if (digits_.empty()) {
    return 0;
  }
  int64_t integer_digits = static_cast<int64_t>(digits_.size()) + exponent_;
  if (integer_digits <= 0) {
    return 0;  // |value| < 1
  }
  if (integer_digits > 19) {
    return negative_ ? kMin : kMax;
  }
  // At most 19 decimal digits: fits in uint64 without overflow.
  uint64_t magnitude = 0;
  for (int64_t i = 0; i < integer_digits; ++i) {
    char c = i < static_cast<int64_t>(digits_.size()) ? digits_[static_cast<size_t>(i)] : '0';
    magnitude = magnitude * 10 + static_cast<uint64_t>(c - '0');
  }
  if (negative_) {
    if (magnitude > static_cast<uint64_t>(kMax) + 1) {
      return kMin;
    }
    return magnitude == static_cast<uint64_t>(kMax) + 1 ? kMin : -static_cast<int64_t>(magnitude);
  }
  return magnitude > static_cast<uint64_t>(kMax) ? kMax : static_cast<int64_t>(magnitude);
}

}  // namespace rsc::client
