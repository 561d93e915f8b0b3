// HttpTransport: the seam between RestKubeApi and the network. RestKubeApi
// builds paths, queries and bodies and interprets answers; a transport only
// moves bytes and reports what happened as a Status. CpprestTransport is the
// real one (TLS, bearer token, keep-alive, a dedicated connection per watch);
// unit tests use a fake. Implementations are thread-safe: many threads may
// send at once, and each stream() runs on its caller's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/config.h"
#include "common/clock.h"
#include "common/status.h"

namespace rsc::client {

// The API server ends an ordinary request after 60 s (--request-timeout), so
// waiting longer for a byte only hides a dead connection.
inline constexpr std::chrono::milliseconds kDefaultRequestTimeout = std::chrono::seconds(60);

// Status::reason() of a transport error where the request certainly did not
// reach the server (connection refused, host unreachable, name not resolved,
// TLS handshake failed): even a non-idempotent request may be repeated.
inline constexpr char kReasonRequestNotSent[] = "RequestNotSent";
// Status::reason() of other transport errors (connection lost, idle timeout):
// the server may or may not have acted on the request.
inline constexpr char kReasonConnectionLost[] = "ConnectionLost";

struct HttpRequest {
  std::string method = "GET";
  // Path and query, already URL-encoded: "/api/v1/nodes/a?x=y".
  std::string path_and_query;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // The longest wait for the next byte of the answer (an idle timeout, not a
  // deadline for the whole exchange).
  std::chrono::milliseconds timeout = kDefaultRequestTimeout;
  // send() gives up on the exchange once this is requested (kCancelled).
  std::stop_token stop;
  // stream() only: how much of a non-2xx answer's body is read (0: all of it); the rest is
  // left unread and the connection closed, so that a hostile server cannot make the caller
  // buffer an endless error page.
  size_t max_error_body_bytes = 0;
};

struct HttpResponse {
  int code = 0;
  // Names in lower case; repeated headers joined with ", ".
  std::map<std::string, std::string> headers;
  std::string body;

  // Returns the header named `lower_case_name`, or "" when absent.
  std::string header(const std::string& lower_case_name) const {
    auto it = headers.find(lower_case_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;

  // Sends a request and reads the whole answer. An HTTP error answer is a
  // response, not an error; a failed exchange is kUnavailable (reason
  // kReasonRequestNotSent or kReasonConnectionLost) or kDeadlineExceeded; a
  // malformed path is kInvalidArgument; a request whose `stop` was requested
  // is kCancelled.
  virtual StatusOr<HttpResponse> send(const HttpRequest& request) = 0;

  // Sends a request whose answer is a long stream (a watch). `on_head` (may be
  // empty) sees the status code and headers as soon as they arrive. A 2xx
  // body is passed to `on_chunk` as it arrives, in pieces of any size, until
  // the server ends it (returns the head), `on_chunk` returns false (returns
  // the head; the connection is closed), `stop` is requested (kCancelled) or
  // the connection fails (kUnavailable). Any other answer's body is read
  // whole into the returned response and `on_chunk` is not called.
  virtual StatusOr<HttpResponse> stream(const HttpRequest& request,
                                        const std::function<void(const HttpResponse&)>& on_head,
                                        const std::function<bool(std::string_view)>& on_chunk,
                                        std::stop_token stop) = 0;

  // "host:port" of the server, for the host label of request metrics.
  virtual std::string host() const = 0;
};

// The real transport, over cpprestsdk's http_client (Boost.Asio, OpenSSL).
// Ordinary requests share keep-alive connections; each stream() has its own
// client and connection, closed through a cancellation token when `stop` is
// requested. Every request authenticates with a CredentialSource (token,
// token file or exec plugin); a 401 refreshes the credential and repeats the
// request once. With a proxy_url, connections go through that HTTP proxy
// (CONNECT for https). The certificates and key are parsed once, at create(), and so
// is the system's trust store when no CA is configured: the first create()
// points OpenSSL's default CA file ($SSL_CERT_FILE) at an empty one for the
// rest of the process (and the processes it starts, which inherit the
// variable), because cpprest would otherwise load the system store again for
// every new connection (see http_transport.cc).
class CpprestTransport final : public HttpTransport {
 public:
  // Fails with InvalidArgument when the server URL, the CA, or the client
  // certificate and key cannot be used (naming which).
  static StatusOr<std::unique_ptr<CpprestTransport>> create(const ClientConfig& config,
                                                            Clock& clock);
  ~CpprestTransport() override;

  StatusOr<HttpResponse> send(const HttpRequest& request) override;
  StatusOr<HttpResponse> stream(const HttpRequest& request,
                                const std::function<void(const HttpResponse&)>& on_head,
                                const std::function<bool(std::string_view)>& on_chunk,
                                std::stop_token stop) override;
  std::string host() const override;

 private:
  struct Impl;

  explicit CpprestTransport(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

}  // namespace rsc::client
