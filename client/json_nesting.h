// JsonNesting: follows how deep JSON text nests, one byte at a time, skipping
// brackets inside strings. The watch decoder frames events with it, and the
// inventory API refuses deeply nested bodies with jsonDepthExceeds before the
// JSON library (which recurses once per level) sees them. It checks nesting
// only, not syntax. Not synchronised: one instance per text or stream.
#pragma once

#include <cstddef>
#include <string_view>

namespace rsc::client {

class JsonNesting {
 public:
  enum class Byte {
    kOther,  // inside a string, or a byte that is not a bracket
    kOpen,   // '{' or '[' outside a string: depth() went up by one
    kClose,  // '}' or ']' outside a string: depth() went down by one
  };

  // Accounts for the next byte of the text.
  Byte feed(char c);
  // How many objects and arrays are open. A closing bracket with none open
  // leaves it at 0 (syntax is the parser's business).
  size_t depth() const { return depth_; }

 private:
  size_t depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

// Returns whether `text` opens more than `max_depth` objects and arrays inside
// each other anywhere.
bool jsonDepthExceeds(std::string_view text, size_t max_depth);

}  // namespace rsc::client
