// Plain HTTP request and response values, free of any socket or Beast type, so
// that request handlers are pure functions that tests call directly. HttpServer
// builds an HttpRequest from the wire and writes the HttpResponse back.
// Plain values: not synchronised.
#pragma once

#include <any>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace rsc::controller::http {

struct HttpRequest {
  std::string method;  // "GET", "PUT", ...
  std::string target;  // path and query, as sent: "/v1/drivers/x?wait=10s"
  // Header names are lowercased; repeated headers are joined with ", ".
  std::map<std::string, std::string> headers;
  std::string body;
  std::string remote_address;  // "127.0.0.1:51234", for logs
  std::string client_address;  // "127.0.0.1", the key of per-client limits
  // What the server's admission step decided from the headers (the
  // authenticated caller, say); empty when the server has none.
  std::any admission;

  // Returns the value of header `name` (any case), if present.
  std::optional<std::string_view> header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type;                                  // empty: no Content-Type header
  std::vector<std::pair<std::string, std::string>> headers;  // others, e.g. Allow
  std::string body;

  // Returns the value of header `name` (any case) among `headers`, if present.
  std::optional<std::string_view> header(std::string_view name) const;
};

// Returns a plain-text answer ("text/plain; charset=utf-8"), as the service's
// probes and /metrics give them.
HttpResponse textResponse(int status, std::string body);

// What the admission step decides about a request from its headers alone.
struct Admission {
  // Set: answer this and never read the body.
  std::optional<HttpResponse> refusal = std::nullopt;
  // The largest body accepted for this request (413 past it); at most the
  // server's max_request_bytes.
  size_t max_body_bytes = 0;
  // Given to the handler in HttpRequest::admission.
  std::any state = {};
};

// Splits a request target into its path and its raw query ("" when none).
std::pair<std::string_view, std::string_view> splitTarget(std::string_view target);

// Decodes %XX escapes. Returns nullopt for a malformed escape or an encoded
// NUL. '+' stays '+' (this is a path decoder, not a form decoder).
std::optional<std::string> percentDecode(std::string_view text);

// Parses "a=1&b=x%2Fy" into decoded pairs, in order. Returns nullopt when an
// escape is malformed.
std::optional<std::vector<std::pair<std::string, std::string>>> parseQuery(std::string_view query);

// Returns `text` with ASCII letters lowercased.
std::string asciiLower(std::string_view text);

}  // namespace rsc::controller::http
