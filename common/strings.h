// Text helpers the libraries share, written once: Go's strings.Split, Fields,
// TrimSpace, ToLower and a whole-text integer parse, for the ASCII text of
// names, headers, paths and command lines; and how messages quote a value or
// show an excerpt of foreign text. Pure functions; safe from any thread. The
// views point into the text given.
#pragma once

#include <charconv>
#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rsc {

// The parts of `text` between each `sep`, empty ones included: "a,,b" gives
// a, "" and b; "" gives one empty part.
std::vector<std::string_view> split(std::string_view text, char sep);

// The words of `text` between runs of blanks and line ends; none empty.
std::vector<std::string_view> fields(std::string_view text);

// `text` without leading and trailing blanks and line ends.
std::string trimBlanks(std::string_view text);

// `text` with A-Z as a-z.
std::string asciiLower(std::string_view text);

// The whole of `text` as a decimal integer of type T: none when it is empty,
// has anything but digits after an optional '-', or does not fit in T.
template <std::integral T>
std::optional<T> parseWhole(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return value;
}

// `"text"`: how messages quote a name or a value.
std::string inQuotes(std::string_view text);

// Text the project did not write (an answer's body, a plugin's output) as
// messages show it: on one line (line ends and tabs as spaces), without
// surrounding blanks, cut to `max` bytes with "..." when cut.
std::string excerpt(std::string_view text, size_t max);

}  // namespace rsc
