// YAML text as JSON values, for the YAML the client reads (kubeconfigs). The
// text is parsed with yaml-cpp (block and flow style, block scalars, anchors
// and aliases, tags) and converted to nlohmann::json with the YAML 1.2 core
// schema for plain scalars, as kubectl's YAML-to-JSON step does; merge keys
// ("<<: *defaults") are applied. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

#include "client/objects.h"
#include "common/status.h"

namespace rsc::client {

// Aliases let a small text stand for a huge value (each alias repeats its
// anchor's subtree); a kubeconfig has a few hundred nodes, so a value past
// these bounds is refused rather than expanded.
inline constexpr size_t kMaxYamlNodes = 100'000;
inline constexpr int kMaxYamlDepth = 64;

// Parses one YAML document (or none: empty text is null). Errors name the
// line: "line 3, column 5: end of sequence flow not found", "line 2:
// duplicate key \"a\"", "more than one YAML document".
StatusOr<Json> yamlToJson(std::string_view text);

// Whether a string must be quoted to read back as a string: written plain, it
// is something else under the YAML 1.2 core schema (yamlToJson's reading:
// null, true, 12, 1e5, +.inf) or under YAML 1.1, which go-yaml v2, and so
// kubectl and many tools, read (yes, off, 0x1F, 0b101, 1_000, 1:20, .nan,
// 2026-12-01T10:00:00Z).
bool readsAsOtherThanString(std::string_view plain);

}  // namespace rsc::client
