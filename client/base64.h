// Standard base64 (RFC 4648, with padding): kubeconfig "-data" fields and Secret values.
// Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace rsc::client {

// Decodes standard base64 with padding; whitespace is ignored (some tools
// wrap it). Returns nullopt for anything else.
std::optional<std::string> decodeBase64(std::string_view text);

// Encodes `data` as standard base64 with padding, on one line.
std::string encodeBase64(std::string_view data);

}  // namespace rsc::client
