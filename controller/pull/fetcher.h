// InventoryFetcher: one GET of a driver's inventory endpoint (pull mode, issue 18), over the
// controller's own HttpTransport. The answer is the body of PUT /v1/drivers/{driver}, decoded
// and validated by the push API's decoder (controller/pool), so a pulled inventory passes exactly
// the checks of a pushed one; a bad answer is an error and yields no pools at all. The Poller
// calls it; one fetcher per source. Thread-compatible: one fetch() at a time.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "client/http_transport.h"
#include "common/clock.h"
#include "common/status.h"
#include "controller/pool/decode_budget.h"
#include "controller/pool/pool_json.h"
#include "controller/pull/source.h"
#include "controller/reconcile/desired_store.h"
#include "controller/reconcile/pool.h"

namespace rsc::controller::pull {

// The path asked for when a source's URL names none (the endpoint's contract, DESIGN.md 10).
inline constexpr char kDefaultInventoryPath[] = "/v1/inventory";
// The default of --pull-timeout: an endpoint serves a document it holds in memory; ten seconds
// is generous and still far below the default interval.
inline constexpr std::chrono::milliseconds kDefaultPullTimeout = std::chrono::seconds(10);

// Status::reason() of each way a fetch can fail; also the `result` label of
// resourceslice_controller_pull_fetches_total (with "ok" and "unchanged").
inline constexpr char kReasonUnreachable[] = "Unreachable";  // no answer, connection broke
inline constexpr char kReasonTimeout[] = "Timeout";          // past --pull-timeout
inline constexpr char kReasonHttpError[] = "HttpError";      // an answer other than 200 or 304
inline constexpr char kReasonRedirect[] = "Redirect";        // 3xx: never followed
inline constexpr char kReasonTooLarge[] = "TooLarge";        // body past --max-request-bytes
inline constexpr char kReasonInvalid[] = "Invalid";          // not the JSON of a driver's pools
inline constexpr char kReasonForbidden[] = "Forbidden";      // a pool the endpoint may not serve
using pool::kReasonBusy;  // no room in the decode budget in time: tried at the next interval

struct FetcherOptions {
  // Path and query to GET, already URL-encoded ("/v1/inventory").
  std::string path = kDefaultInventoryPath;
  // The driver whose inventory this is: checked as a push for it is (a partition type in the
  // driver's domain may be named bare by its devices).
  std::string driver;
  // The whole exchange, headers and body (--pull-timeout).
  Clock::Duration timeout = kDefaultPullTimeout;
  // The push API's limits (--max-request-bytes, --max-decoded-bytes): a pulled inventory is
  // bounded as a pushed one is.
  size_t max_body_bytes = pool::kDefaultMaxBodyBytes;
  size_t max_decoded_bytes = pool::kDefaultMaxDecodedBytes;
  // The budget shared with every push and fetch being decoded (--max-inflight-decoded-bytes),
  // and how long a body waits for room in it. Unset: decoded without one (tests).
  pool::DecodeBudget* decode_budget = nullptr;
  Clock::Duration decode_wait = pool::kDefaultDecodeWait;
  // Who the endpoint speaks as: the push API's node restriction applies to every pool of an
  // answer, and one refused pool refuses the whole answer (as a push of it would be refused).
  // A source the operator configured is unrestricted.
  pool::Caller caller = unrestrictedCaller();
  // --allow-unbound-node-pools: a caller bound to no node may publish node-local pools.
  bool allow_unbound_node_pools = false;

  static pool::Caller unrestrictedCaller() {
    pool::Caller caller;
    caller.unrestricted = true;
    return caller;
  }
};

struct FetchResult {
  // 304 Not Modified: the inventory is what the ETag named; `pools` is empty.
  bool unchanged = false;
  // The answer's ETag ("" when it sent none: the next request is unconditional).
  std::string etag;
  std::map<std::string, reconcile::Pool> pools;
};

class InventoryFetcher {
 public:
  // `transport` talks to the endpoint's server and must outlive the fetcher.
  InventoryFetcher(client::HttpTransport& transport, Clock& clock, FetcherOptions options);

  // GETs the inventory, with If-None-Match: `etag` when not empty. `server` is the API
  // server's release when known (the counter placement it accepts). Fails with a Status whose
  // reason is one of the kReason constants above and whose message says what was wrong.
  StatusOr<FetchResult> fetch(const std::string& etag,
                              const std::optional<reconcile::ServerRelease>& server,
                              std::stop_token stop = {});

 private:
  client::HttpTransport& transport_;
  Clock& clock_;
  const FetcherOptions options_;
};

// A source's URL split for the transport: "https://host:port" and the path and query
// (kDefaultInventoryPath when the URL has no path). InvalidArgument when it is not an http://
// or https:// URL with a host, or has a fragment or user info.
struct SourceUrl {
  std::string server;
  std::string path_and_query;
};
StatusOr<SourceUrl> parseSourceUrl(std::string_view url);

// How the controller authenticates itself to, and checks, HTTPS inventory endpoints.
struct SourceCredentials {
  // PEM bundle for endpoints whose spec names none (--pull-ca-file); empty: the system's store.
  std::string ca_pem;
  // A bearer token file (--pull-token-file), re-read as it rotates; sent to HTTPS endpoints
  // only, so that a token never crosses the network in clear text. Empty: no token.
  std::string token_file;
};

// The real transport to a source's server (CpprestTransport): none of the controller's API
// server credentials; for HTTPS the spec's CA (else `credentials.ca_pem`, else the system's
// store) checked against the spec's tls_server_name, and the token; redirects returned rather
// than followed.
StatusOr<std::shared_ptr<client::HttpTransport>> sourceTransport(
    const SourceUrl& url, const SourceSpec& spec, const SourceCredentials& credentials,
    Clock& clock);

}  // namespace rsc::controller::pull
