// The JSON of the inventory API (DESIGN.md section 4): decoding and validating a pushed Pool or a
// driver's whole inventory into controller::Pool, and encoding statuses and errors. Validation
// applies the API server's own ResourceSlice v1 rules and limits, so what is accepted here can be
// written; every problem is reported with its field path, not only the first. Used by the
// inventory API's handler and pull mode's fetcher; knows nothing of HTTP routes or
// authentication. Pure functions; thread-safe.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/codec.h"
#include "client/inventory_api.h"
#include "common/status.h"
#include "controller/reconcile/desired_store.h"
#include "controller/reconcile/pool.h"
#include "controller/reconcile/preview.h"

namespace rsc::controller::pool {

using Json = nlohmann::json;

// A lease longer than a year is surely a unit mistake (milliseconds sent as
// seconds); the bound also keeps deadline arithmetic far from overflow.
inline constexpr int64_t kMaxLeaseSeconds = 365LL * 24 * 3600;
// A pushed generation above this is refused: the reconciler bumps from it and
// saturates at INT64_MAX rather than wrapping, and a pool must never get
// there in practice.
inline constexpr int64_t kMaxPushedGeneration = int64_t{1} << 62;
// JSON nesting deeper than this is refused before parsing: a Pool needs about
// ten levels, and the JSON library recurses once per level.
inline constexpr size_t kMaxJsonDepth = 64;

// The problems found in a request body, in document order. `malformed` are
// shape errors (HTTP 400): not JSON, wrong types, an unknown field anywhere
// (strict decoding). `invalid` are ResourceSlice validation failures (HTTP 422).
// Each list keeps at most kMaxProblemDetails entries and counts the others, so
// that an answer stays small whatever the body.
inline constexpr size_t kMaxProblemDetails = client::codec::kMaxProblemDetails;
struct BodyProblems {
  std::vector<FieldError> malformed;
  std::vector<FieldError> invalid;
  size_t malformed_omitted = 0;
  size_t invalid_omitted = 0;
  bool empty() const { return malformed.empty() && invalid.empty(); }
};

// The default of --max-decoded-bytes: what one request body may cost once decoded (the JSON tree
// and what the decoder builds from it, charged by measureJsonBody before anything is built, within
// 1.1-1.5 times what decoding really allocates: test/controller/pool/decode_cost_test.cc).
// A realistic pool is charged about 27 times its text (GPU-like devices with ten attributes), so
// 128 MiB admits a pool of about 4.8 MiB, some 6,000 such devices: far more than a node has, and
// many times the bench's largest pools (1,000 devices, under 1 MiB). A list of empty objects is
// charged about 176 times its text and is refused past ~760 KB. Two bodies of this size fit in
// kDefaultMaxInflightDecodedBytes at once.
inline constexpr size_t kDefaultMaxDecodedBytes = 128 * 1024 * 1024;
// The default of --max-request-bytes, the body limit of a pushed or pulled
// inventory: a full pool of 128-device slices is a few MiB of JSON; 8 MiB
// leaves room for a whole driver.
inline constexpr size_t kDefaultMaxBodyBytes = 8 * 1024 * 1024;

// Parses `body` as JSON after a first pass that refuses nesting beyond
// kMaxJsonDepth (InvalidArgument) and a document estimated to occupy more
// than `max_decoded_bytes` (TooLarge) without building anything. Never throws.
StatusOr<Json> parseJsonBody(std::string_view body,
                             size_t max_decoded_bytes = kDefaultMaxDecodedBytes);

// The first pass of parseJsonBody alone: the depth check, the syntax, and what the body costs
// decoded (the JSON tree and what decodePool or decodeDriverInventory builds from it), or
// TooLarge past `max_decoded_bytes`. For callers that reserve that cost before building.
StatusOr<size_t> measureJsonBody(std::string_view body,
                                 size_t max_decoded_bytes = kDefaultMaxDecodedBytes);
// The second pass: builds the tree of a body that measureJsonBody accepted. Never throws.
StatusOr<Json> parseMeasuredJsonBody(std::string_view body);

// The cost measureJsonBody compares with its limit, without a limit; for tests and sizing.
size_t decodedJsonBytes(std::string_view body);

// Decodes and validates one Pool object. `prefix` is the field path of the
// object ("" for a request body, "pools[\"node-a\"]" inside a driver body).
// Problems are appended to `problems`; the returned pool is meaningful only
// when none were added. Validation runs only when decoding found no shape
// errors, so that one typo does not cause a cascade of follow-up errors.
// `driver` (the pool's, when known) lets devices name the pool's partitionTypeAttribute bare when
// it is in the driver's domain, as the API server allows; without it only the full name counts.
reconcile::Pool decodePool(const Json& body, const std::string& prefix, BodyProblems& problems,
                           std::string_view driver = {});

// Adds to `problems.invalid` what the API server's counter placement cannot
// hold: with CounterPlacement::kWithConsumers (Kubernetes 1.34), each group of
// counter sets and the devices that consume them (counterGroupsOf) must fit
// one slice. `pool` is one decodePool returned without problems; `prefix` as
// there. A pool with driver-chosen slices is left to the API server.
void validateCounterPlacement(const reconcile::Pool& pool, const std::string& prefix,
                              const reconcile::ServerRelease& server, BodyProblems& problems);

// Decodes and validates the body of PUT /v1/drivers/{driver}:
// {"pools": {"<pool name>": Pool, ...}}, pool names included.
std::map<std::string, reconcile::Pool> decodeDriverPools(const Json& body, BodyProblems& problems,
                                                         std::string_view driver = {});

// Decodes and validates the body of PUT /v1/drivers/{driver} with every check that does not
// depend on the caller: decodeDriverPools, then, when `server` is known and nothing else is
// wrong, validateCounterPlacement for each pool. Shared by the handler and pull mode's fetcher,
// so that a pulled inventory passes exactly the checks of a pushed one.
std::map<std::string, reconcile::Pool> decodeDriverInventory(
    const Json& body, const std::optional<reconcile::ServerRelease>& server, BodyProblems& problems,
    std::string_view driver = {});

// Convenience for callers without a request: the pool, or InvalidArgument
// (shape errors) or Unprocessable (validation) with every problem as a detail.
StatusOr<reconcile::Pool> parsePool(std::string_view body);
StatusOr<std::map<std::string, reconcile::Pool>> parseDriverPools(std::string_view body);

// Returns the status of `problems` (OK when empty): InvalidArgument with the
// malformed ones when there are any, else Unprocessable with the invalid ones.
// When every malformed problem is an unknown field, the message is the API
// server's strict decoding error: "strict decoding error: unknown field
// \"devices[3].atributes\", ...".
Status problemsStatus(const BodyProblems& problems);

// The JSON of a PoolStatus (see openapi.json, schema PoolStatus). `desired` may
// be null (a pool being withdrawn). `phase_override` replaces the phase when
// not empty ("Withdrawn" for a finished DELETE).
Json poolStatusToJson(const reconcile::PoolStatus& status,
                      const std::shared_ptr<const reconcile::DesiredPool>& desired,
                      const std::string& leader, std::string_view phase_override = {});

// One pool's dry run as the API answers it (see openapi.json, schema PoolDryRun), and its JSON.
client::PoolDryRunJson poolPreviewWire(const reconcile::PoolPreview& preview);
Json poolPreviewToJson(const reconcile::PoolPreview& preview);

// The JSON of an error: {code, reason, message, details: [{field, message}]}.
Json errorToJson(int http_code, std::string_view reason, std::string_view message,
                 const std::vector<FieldError>& details);

// Serialises for a response body; invalid UTF-8 (from a URL, say) is replaced
// rather than thrown on.
std::string dumpJson(const Json& j);

}  // namespace rsc::controller::pool
