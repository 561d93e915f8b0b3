#include "controller/pull/fetcher.h"

#include <utility>

#include "client/codec.h"
#include "client/url.h"
#include "common/strings.h"
#include "controller/pool/node_restriction.h"

namespace rsc::controller::pull {

namespace {

// Of an error answer only the start is shown; the rest is not even read.
constexpr size_t kMaxErrorBodyBytes = 4096;

Status fetchError(std::string_view reason, std::string message) {
  StatusCode code = StatusCode::kUnavailable;
  if (reason == kReasonTimeout) code = StatusCode::kDeadlineExceeded;
  if (reason == kReasonTooLarge) code = StatusCode::kTooLarge;
  if (reason == kReasonInvalid) code = StatusCode::kInvalidArgument;
  return {code, std::move(message), {}, std::string(reason)};
}

// The first line of an error answer's body, cut short: enough to tell a proxy's page from the
// endpoint's own message without copying a large body into logs and statuses.
std::string bodyExcerpt(const std::string& body) {
  constexpr size_t kMaxExcerpt = 200;
  return excerpt(std::string_view(body).substr(0, body.find('\n')), kMaxExcerpt);
}

}  // namespace

InventoryFetcher::InventoryFetcher(client::HttpTransport& transport, Clock& clock,
                                   FetcherOptions options)
    : transport_(transport), clock_(clock), options_(std::move(options)) {}

StatusOr<FetchResult> InventoryFetcher::fetch(const std::string& etag,
                                              const std::optional<reconcile::ServerRelease>& server,
                                              std::stop_token stop) {
  const std::string what = "GET " + transport_.host() + options_.path;
  client::HttpRequest request;
  request.path_and_query = options_.path;
  if (!etag.empty()) request.headers.emplace_back("If-None-Match", etag);
  request.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options_.timeout);
  request.stop = stop;
  request.max_error_body_bytes = kMaxErrorBodyBytes;

  // The answer, read as it arrives and given up at the size limit or the deadline: the
  // transport's own timeout only bounds the wait for each byte.
  const Clock::TimePoint deadline = clock_.now() + options_.timeout;
  std::string body;
  bool too_large = false;
  bool late = false;
  StatusOr<client::HttpResponse> head = transport_.stream(
      request, nullptr,
      [&](std::string_view chunk) {
        if (body.size() + chunk.size() > options_.max_body_bytes) {
          too_large = true;
          return false;
        }
        body.append(chunk);
        if (clock_.now() > deadline) {
          late = true;
          return false;
        }
        return true;
      },
      stop);
  if (!head.ok()) {
    const Status& s = head.status();
    const std::string_view reason =
        s.code() == StatusCode::kDeadlineExceeded ? kReasonTimeout : kReasonUnreachable;
    return fetchError(reason, what + ": " + s.message());
  }
  if (too_large) {
    return fetchError(kReasonTooLarge, what + ": the answer is larger than " +
                                           std::to_string(options_.max_body_bytes) +
                                           " bytes (--max-request-bytes)");
  }
  if (late) {
    return fetchError(kReasonTimeout, what + ": the answer took longer than --pull-timeout");
  }

  // The status code: 304 keeps what the ETag named; redirects are never followed (a source
  // names the endpoint itself, and a redirect could send the controller anywhere).
  const int code = head->code;
  if (code == 304) {
    FetchResult unchanged;
    unchanged.unchanged = true;
    const std::string new_etag = head->header("etag");
    unchanged.etag = new_etag.empty() ? etag : new_etag;
    return unchanged;
  }
  if (code >= 300 && code < 400) {
    const std::string location = head->header("location");
    return fetchError(kReasonRedirect,
                      what + ": answered " + std::to_string(code) + " (redirect" +
                          (location.empty() ? "" : " to " + inQuotes(location)) +
                          "), and redirects are not followed: name the final URL in the source");
  }
  if (code != 200) {
    std::string message = what + ": answered HTTP " + std::to_string(code);
    if (!head->body.empty()) message += ": " + bodyExcerpt(head->body);
    return fetchError(kReasonHttpError, message);
  }

  // The body: the JSON of PUT /v1/drivers/{driver}, with every check a push gets.
  StatusOr<pool::BudgetedJson> json = pool::parseJsonBodyWithin(
      options_.decode_budget, body, options_.max_decoded_bytes, options_.decode_wait);
  if (!json.ok()) {
    std::string_view reason = kReasonInvalid;
    if (json.status().code() == StatusCode::kTooLarge) reason = kReasonTooLarge;
    if (json.status().reason() == kReasonBusy) reason = kReasonBusy;
    return fetchError(reason, what + ": " + json.status().message());
  }
  body = std::string();  // the text is not needed past here
  pool::BodyProblems problems;
  FetchResult result;
  result.pools = pool::decodeDriverInventory(json->json, server, problems, options_.driver);
  json->json = pool::Json();
  if (Status bad = pool::problemsStatus(problems); !bad.ok()) {
    Status invalid = fetchError(kReasonInvalid, what + ": " + bad.message());
    return Status(invalid.code(), invalid.message(), bad.details(), invalid.reason());
  }
  // The node restriction, for every pool: one refused pool refuses the answer, as a push of it
  // would be refused.
  std::vector<FieldError> denied;
  pool::deniedPools(options_.caller, result.pools, options_.allow_unbound_node_pools, denied);
  if (!denied.empty()) {
    Status refused = pool::poolsNotAllowed(std::move(denied));
    return Status(refused.code(), what + ": " + refused.message(), refused.details(),
                  kReasonForbidden);
  }
  result.etag = head->header("etag");
  return result;
}

StatusOr<SourceUrl> parseSourceUrl(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return invalidArgument(inQuotes(url) + " " + std::string(why));
  };
  const StatusOr<client::Url> parsed = client::parseUrl(url);
  if (!parsed.ok()) return bad("is not a URL (http://host:port/path)");
  if (parsed->scheme != "http" && parsed->scheme != "https") {
    return bad("must start with http:// or https://");
  }
  if (parsed->userinfo) return bad("must not carry user information");
  if (parsed->host.empty()) return bad("has no host");
  if (parsed->rest.find('#') != std::string::npos) return bad("must not have a fragment");
  SourceUrl out;
  out.server = parsed->origin();
  out.path_and_query = parsed->rest;
  if (out.path_and_query.empty() || out.path_and_query.front() == '?') {
    out.path_and_query = kDefaultInventoryPath + out.path_and_query;
  }
  return out;
}

StatusOr<std::shared_ptr<client::HttpTransport>> sourceTransport(
    const SourceUrl& url, const SourceSpec& spec, const SourceCredentials& credentials,
    Clock& clock) {
  client::ClientConfig config;
  config.server = url.server;
  config.follow_redirects = false;
  if (url.server.starts_with("https://")) {
    config.ca_pem = spec.ca_pem.empty() ? credentials.ca_pem : spec.ca_pem;
    config.tls_server_name = spec.tls_server_name;
    config.token_file = credentials.token_file;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<client::CpprestTransport> transport,
                   client::CpprestTransport::create(config, clock));
  return std::shared_ptr<client::HttpTransport>(std::move(transport));
}

}  // namespace rsc::controller::pull
