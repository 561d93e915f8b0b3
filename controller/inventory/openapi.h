// The OpenAPI 3.0 document of the inventory API, served at GET /openapi.json.
// Its source is controller/inventory/openapi.json, embedded at build time; a
// unit test keeps it in step with the handler's routes and JSON.
// Immutable; thread-safe.
#pragma once

#include <string_view>

namespace rsc::controller::inventory {

// Returns the document, a JSON text.
std::string_view openApiDocument();

}  // namespace rsc::controller::inventory
