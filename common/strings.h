// Text helpers the libraries share, written once: Go's strings.Split, Fields,
// TrimSpace and ToLower, for the ASCII text of names, headers, paths and
// command lines. Pure functions; safe from any thread. The views point into
// the text given.
#pragma once

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

// `"text"`: how messages quote a name or a value.
std::string inQuotes(std::string_view text);

}  // namespace rsc
