#include "client/json_nesting.h"

namespace rsc::client {

JsonNesting::Byte JsonNesting::feed(char c) {
  if (in_string_) {
    if (escaped_) {
      escaped_ = false;
    } else if (c == '\\') {
      escaped_ = true;
    } else if (c == '"') {
      in_string_ = false;
    }
    return Byte::kOther;
  }
  switch (c) {
    case '"':
      in_string_ = true;
      return Byte::kOther;
    case '{':
    case '[':
      ++depth_;
      return Byte::kOpen;
    case '}':
    case ']':
      if (depth_ > 0) --depth_;
      return Byte::kClose;
    default:
      return Byte::kOther;
  }
}

bool jsonDepthExceeds(std::string_view text, size_t max_depth) {
  JsonNesting nesting;
  for (const char c : text) {
    if (nesting.feed(c) == JsonNesting::Byte::kOpen && nesting.depth() > max_depth) return true;
  }
  return false;
}

}  // namespace rsc::client
