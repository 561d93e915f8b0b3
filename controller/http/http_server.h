// HttpServer: a small HTTP/1.1 server on Boost.Beast for any handler (the inventory API, the
// service's /metrics, /healthz and /readyz). It owns sockets, TLS, timeouts and limits; handlers
// see an HttpRequest and answer through a Responder, at once or later from any thread.
// Threading: one I/O thread of its own runs every socket and timer and calls the handler, which
// must not block; start() and stop() are called from other threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "controller/http/http.h"

namespace rsc::controller::http {

// Why the server refused a connection or a request itself; the label of the
// refusals metric.
enum class Refusal {
  kConnections,        // max_connections reached and nothing to evict
  kClientConnections,  // max_connections_per_client reached
  kEvicted,            // an idle or slow connection closed to make room
  kHeaderTimeout,      // headers (or the TLS handshake) too slow
  kBodyTimeout,        // body too slow
  kHeadersTooLarge,    // 431
  kBodyTooLarge,       // 413
  kInflightBodies,     // max_inflight_body_bytes reached
  kMalformed,          // 400 from the HTTP parser
};
std::string_view refusalName(Refusal refusal);

// A PEM certificate chain and its private key, held in memory.
struct TlsKeyPair {
  std::string cert_pem;
  std::string key_pem;
};

struct HttpServerOptions {
  // "host:port", ":port" (every interface) or "[::1]:port"; port 0 picks a
  // free port (see HttpServer::port()).
  std::string bind_address = ":0";
  // Larger bodies are answered 413. A full pool of 128-device slices is a few
  // MiB of JSON; 8 MiB leaves room for a whole driver.
  size_t max_request_bytes = 8 * 1024 * 1024;
  // Request line and headers together; answered 431 past it.
  size_t max_header_bytes = 64 * 1024;
  // Time allowed for a request's headers to arrive, counted from the
  // connection (or the request's first byte on a kept-alive one), and for
  // the TLS handshake. Slow-header clients are cut off after it.
  std::chrono::milliseconds header_timeout{10'000};
  // Time to read a body once its headers are in.
  std::chrono::milliseconds body_timeout{60'000};
  // A kept-alive connection waiting for its next request is closed after it.
  std::chrono::milliseconds idle_timeout{90'000};
  std::chrono::milliseconds write_timeout{60'000};
  // Past this many open connections, the one that has waited longest for a
  // request's headers (idle or slow) is closed to make room; when none is
  // waiting, the new connection is answered 503 and closed at once.
  size_t max_connections = 1024;
  // Connections from one client address past this are answered 503 at once,
  // so that one client cannot hold every slot.
  size_t max_connections_per_client = 64;
  // Bytes of request bodies being read or handled at once, over every
  // connection. A request whose body (its Content-Length, or its limit when
  // chunked) does not fit is answered 503 with Retry-After before any of it
  // is read, so that slow uploads cannot hold many times the body limit.
  size_t max_inflight_body_bytes = 32 * 1024 * 1024;
  // TLS when both are set (PEM files). The files are checked for changes on
  // new connections, at most once per tls_reload_interval, and re-read when
  // they changed (cert-manager and kubelet rotate them in place).
  std::string tls_cert_file = {};
  std::string tls_key_file = {};
  std::chrono::milliseconds tls_reload_interval{5'000};
  // TLS from memory instead of files (the certificates the controller makes
  // itself). Called on the I/O thread for each new connection, so it must be
  // cheap and must not block; it returns the pair to serve, and a pointer
  // other than the last one means a new pair (a rotation). A pair that does
  // not load is logged and the previous one kept. Not with tls_cert_file.
  std::function<std::shared_ptr<const TlsKeyPair>()> tls_key_pair = nullptr;
  // Paces the TLS file checks; RealClock when null.
  Clock* clock = nullptr;
  // Builds the answers the server gives itself (400, 413, 431, 500, 503);
  // plain text when unset.
  std::function<HttpResponse(int status, std::string_view message)> error_response = nullptr;
  // Names the server in logs ("inventory", "metrics").
  std::string name = "http";
  // Decides on each request from its method, target and headers, before the
  // body is read (authentication, say). Called on the I/O thread; it must not
  // block, and calls `decide` once, from any thread. Unset: every request is
  // admitted with max_request_bytes.
  std::function<void(const HttpRequest& head, std::function<void(Admission)> decide)> admit =
      nullptr;
  // Counts each refusal (for a metric); called on the I/O thread. The server
  // also logs refusals, at most one line per reason every 10 s.
  std::function<void(Refusal)> on_refused = nullptr;
};

class HttpServer {
 public:
  // Sends the answer to one request. Call it exactly once, from any thread;
  // calls after the connection closed are ignored.
  using Responder = std::function<void(HttpResponse)>;
  // Called on the I/O thread for each request.
  using Handler = std::function<void(HttpRequest, Responder)>;

  // Binds, loads the TLS files if any, and starts the I/O thread. Fails when
  // the address cannot be bound or the TLS files cannot be loaded.
  static StatusOr<std::unique_ptr<HttpServer>> start(HttpServerOptions options, Handler handler);

  // Stops (with the default grace) if still running.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The bound port (the real one when 0 was asked for).
  uint16_t port() const { return port_; }
  // The bound address, "127.0.0.1:8443".
  const std::string& address() const { return address_; }

  // Stops accepting, closes idle connections, lets requests in flight finish
  // for up to `grace` (then closes what is left), and joins the I/O thread.
  // Idempotent. Not from the I/O thread (a handler): it would wait for itself.
  void stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

  // The number of open connections; thread-safe, for tests and logs.
  size_t connectionCount() const;
  // For tests, which must not poll: block until connectionCount() == n, or
  // until stop() has closed the listening socket. False after a safety
  // timeout.
  bool waitForConnectionsForTest(size_t n) const;
  bool waitForStopAcceptingForTest() const;
  // How many times the TLS files were loaded (1 after start); for tests.
  size_t tlsLoadCount() const;
  // How many connections and requests the server refused itself; for tests.
  size_t refusalCount() const;

  // The server's state on its I/O thread (http_server.cc).
  class Impl;

 private:
  explicit HttpServer(std::shared_ptr<Impl> impl);

  std::shared_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::string address_;
  std::thread thread_;
  bool stopped_ = false;
};

// Splits "host:port", ":port" or "[v6]:port" into host ("" for any) and
// port. Fails with InvalidArgument on anything else.
StatusOr<std::pair<std::string, uint16_t>> parseBindAddress(std::string_view address);

}  // namespace rsc::controller::http
