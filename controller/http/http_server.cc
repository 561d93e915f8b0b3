#include "controller/http/http_server.h"

#include <openssl/ssl.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "client/http_status.h"
#include "common/enum_names.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "controller/http/asio.h"

namespace rsc::controller::http {

namespace {

namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

// How long to wait before accepting again after accept() failed (out of file
// descriptors, say), so that the failure does not spin the I/O thread.
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
constexpr size_t kFirstReadBytes = 4096;
// How long a closing connection reads what the client still sends.
constexpr std::chrono::seconds kLingerTime{2};

std::string_view toStd(beast::string_view s) { return {s.data(), s.size()}; }
beast::string_view toBeast(std::string_view s) { return {s.data(), s.size()}; }

HttpResponse plainError(int status, std::string_view message) {
  HttpResponse response;
  response.status = status;
  response.content_type = "text/plain; charset=utf-8";
  response.body = std::string(message) + "\n";
  return response;
}

// The client's address without its port: the key of the per-client limit.
std::string hostText(const asio::ip::address& address) {
  // An IPv4 client of a dual-stack socket arrives as ::ffff:a.b.c.d.
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return address.to_v6().to_v4().to_string();
  }
  return address.to_string();
}

std::string endpointText(const tcp::endpoint& endpoint) {
  const asio::ip::address address = endpoint.address();
  std::string host = address.to_string();
  if (address.is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(endpoint.port());
}

// The identity of a file's current content as far as rotation goes.
struct FileStamp {
  std::filesystem::file_time_type mtime;
  uintmax_t size = 0;
  friend bool operator==(const FileStamp&, const FileStamp&) = default;
};

std::optional<FileStamp> stampOf(const std::string& path) {
  std::error_code ec;
  FileStamp stamp;
  stamp.mtime = std::filesystem::last_write_time(path, ec);
  if (ec) return std::nullopt;
  stamp.size = std::filesystem::file_size(path, ec);
  if (ec) return std::nullopt;
  return stamp;
}

// A server context with this project's protocol floor (TLS 1.2), its
// certificate and key set by `load` (from files or memory).
StatusOr<std::shared_ptr<ssl::context>> makeTlsContext(
    const std::function<Status(ssl::context&)>& load) {
  try {
    auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
    boost::system::error_code ec;
    // Asio's calls that take an error_code also return it; ec is what is read.
    (void)context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                                   ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                                   ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                               ec);
    if (ec) return internalError("configure TLS: " + ec.message());
    RETURN_IF_ERROR(load(*context));
    // A rotation caught between writing the certificate and the key leaves a
    // pair that does not match; refuse it and keep the old one.
    if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
      return invalidArgument("the TLS key does not match the certificate");
    }
    return context;
  } catch (const std::exception& e) {
    return internalError(std::string("configure TLS: ") + e.what());
  }
}

StatusOr<std::shared_ptr<ssl::context>> loadTlsContext(const std::string& cert_file,
                                                       const std::string& key_file) {
  auto context = makeTlsContext([&](ssl::context& c) {
    boost::system::error_code ec;
    (void)c.use_certificate_chain_file(cert_file, ec);
    if (ec) return invalidArgument("load TLS certificate " + cert_file + ": " + ec.message());
    (void)c.use_private_key_file(key_file, ssl::context::pem, ec);
    if (ec) return invalidArgument("load TLS key " + key_file + ": " + ec.message());
    return okStatus();
  });
  if (!context.ok()) {
    return Status(context.status().code(),
                  context.status().message() + " (" + cert_file + ", " + key_file + ")");
  }
  return context;
}

StatusOr<std::shared_ptr<ssl::context>> memoryTlsContext(const TlsKeyPair& pair) {
  return makeTlsContext([&](ssl::context& c) {
    boost::system::error_code ec;
    (void)c.use_certificate_chain(asio::buffer(pair.cert_pem), ec);
    if (ec) return invalidArgument("load TLS certificate: " + ec.message());
    (void)c.use_private_key(asio::buffer(pair.key_pem), ssl::context::pem, ec);
    if (ec) return invalidArgument("load TLS key: " + ec.message());
    return okStatus();
  });
}

}  // namespace

constexpr auto kRefusalNames = enumNames<Refusal>({
    {Refusal::kConnections, "connections"},
    {Refusal::kClientConnections, "client_connections"},
    {Refusal::kEvicted, "evicted"},
    {Refusal::kHeaderTimeout, "header_timeout"},
    {Refusal::kBodyTimeout, "body_timeout"},
    {Refusal::kHeadersTooLarge, "headers_too_large"},
    {Refusal::kBodyTooLarge, "body_too_large"},
    {Refusal::kInflightBodies, "inflight_bodies"},
    {Refusal::kMalformed, "malformed"},
});

std::string_view refusalName(Refusal refusal) { return kRefusalNames(refusal); }

StatusOr<std::pair<std::string, uint16_t>> parseBindAddress(std::string_view address) {
  const auto bad = [&] {
    return invalidArgument("bind address must be host:port, :port or [v6]:port, not \"" +
                           std::string(address) + "\"");
  };
  std::string_view host;
  std::string_view port;
  if (address.starts_with("[")) {
    const size_t close = address.find("]:");
    if (close == std::string_view::npos) return bad();
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return bad();
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad();
  }
  if (port.empty() || port.size() > 5) return bad();
  uint32_t value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad();
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return bad();
  return std::pair<std::string, uint16_t>(std::string(host), static_cast<uint16_t>(value));
}

// ---- Server state -----------------------------------------------------------

class ConnectionBase {
 public:
  virtual ~ConnectionBase() = default;
  virtual void start() = 0;
  // Closes the connection if it is waiting for a request; otherwise it closes
  // after the response in flight.
  virtual void closeIfIdle() = 0;
  virtual void forceClose() = 0;
  // True while the connection waits for a request or its headers: closing
  // it loses no admitted work, so it may make room for a new connection.
  virtual bool evictable() const = 0;
  // The client's address without port.
  virtual const std::string& client() const = 0;
};

// Everything the I/O thread owns. Members are touched only on the I/O thread,
// except the atomics and what start() sets up before the thread runs.
class HttpServer::Impl {
 public:
  Impl(HttpServerOptions options, Handler handler)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        ioc_(std::make_shared<asio::io_context>(1)),
        work_(asio::make_work_guard(*ioc_)),
        acceptor_(*ioc_),
        retry_timer_(*ioc_),
        grace_timer_(*ioc_),
        throttle_(options_.clock != nullptr ? *options_.clock : RealClock::instance()) {
    if (!options_.error_response) options_.error_response = plainError;
    if (options_.clock == nullptr) options_.clock = &RealClock::instance();
  }

  Status open();
  void run() { ioc_->run(); }
  void post(std::function<void()> f) { asio::post(*ioc_, std::move(f)); }
  void beginStop(std::chrono::milliseconds grace);

  // Called by connections.
  void remove(uint64_t id) {
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    auto client = per_client_.find(it->second->client());
    if (client != per_client_.end() && --client->second == 0) per_client_.erase(client);
    connections_.erase(it);
    countConnections();
    if (stopping_ && connections_.empty()) grace_timer_.cancel();
  }
  // Reserves `bytes` of the in-flight body budget; false when it does not fit.
  bool reserveBody(size_t bytes) {
    if (bytes > options_.max_inflight_body_bytes -
                    std::min(inflight_body_bytes_, options_.max_inflight_body_bytes)) {
      return false;
    }
    inflight_body_bytes_ += bytes;
    return true;
  }
  void releaseBody(size_t bytes) { inflight_body_bytes_ -= std::min(bytes, inflight_body_bytes_); }
  // Counts a refusal and logs it, at most one line per reason every 10 s.
  void refused(Refusal refusal, std::string_view remote) {
    ++refusals_;
    if (options_.on_refused) options_.on_refused(refusal);
    if (std::optional<uint64_t> held = throttle_.allow(refusalName(refusal))) {
      log::warning("Refused a connection or request",
                   {{"server", options_.name},
                    {"reason", refusalName(refusal)},
                    {"remote", remote},
                    {"connections", static_cast<int64_t>(connections_.size())},
                    {"alsoRefusedSinceLastLine", static_cast<int64_t>(*held)}});
    }
  }
  bool stopping() const { return stopping_; }
  // Publishes the number of open connections (connection_count_).
  void countConnections() {
    std::lock_guard lock(observed_mu_);
    connection_count_ = connections_.size();
    observed_cv_.notify_all();
  }
  const HttpServerOptions& options() const { return options_; }
  const Handler& handler() const { return handler_; }
  const std::shared_ptr<asio::io_context>& ioc() const { return ioc_; }

  std::atomic<size_t> connection_count_{0};
  // For the tests' waits: notified when connection_count_ or closed_ changes.
  std::mutex observed_mu_;
  std::condition_variable observed_cv_;
  bool closed_ = false;  // the acceptor is closed for good; guarded by observed_mu_
  std::atomic<size_t> tls_loads_{0};
  std::atomic<size_t> refusals_{0};
  tcp::endpoint bound_;

 private:
  void doAccept();
  void onAccept(const boost::system::error_code& ec, tcp::socket socket);
  void reject(tcp::socket socket, Refusal refusal, const std::string& client);
  // Closes the connection that has waited longest for a request's headers;
  // false when no connection is waiting.
  bool evictOne();
  // Returns the TLS context for a new connection, re-reading the files when
  // they changed (checked at most once per interval).
  std::shared_ptr<ssl::context> tlsContext();
  Status loadTls();

  HttpServerOptions options_;
  const Handler handler_;
  std::shared_ptr<asio::io_context> ioc_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  asio::steady_timer grace_timer_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  // By id, so the oldest connection comes first.
  std::map<uint64_t, std::shared_ptr<ConnectionBase>> connections_;
  std::map<std::string, size_t> per_client_;  // open connections by client address
  size_t inflight_body_bytes_ = 0;
  log::Throttle throttle_;

  bool tls_enabled_ = false;
  std::shared_ptr<ssl::context> tls_;
  std::optional<FileStamp> cert_stamp_;
  std::optional<FileStamp> key_stamp_;
  std::optional<Clock::TimePoint> tls_checked_at_;
  // The pair tls_ was made from, with options_.tls_key_pair.
  std::shared_ptr<const TlsKeyPair> tls_pair_;
};

// ---- Connections ------------------------------------------------------------

template <class Stream>
class Connection final : public ConnectionBase,
                         public std::enable_shared_from_this<Connection<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  Connection(HttpServer::Impl* server, uint64_t id, Stream stream,
             std::shared_ptr<ssl::context> tls, std::string client)
      : server_(server),
        id_(id),
        tls_(std::move(tls)),
        stream_(std::move(stream)),
        client_(std::move(client)) {
    boost::system::error_code ec;
    const tcp::endpoint remote = lowest().socket().remote_endpoint(ec);
    if (!ec) remote_ = endpointText(remote);
  }

  void start() override {
    if constexpr (kTls) {
      state_ = State::kIdle;
      lowest().expires_after(server_->options().header_timeout);
      stream_.async_handshake(ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) {
                                  log::debug(3, "TLS handshake failed",
                                             {{"remote", self->remote_}, {"error", ec.message()}});
                                  if (ec == beast::error::timeout) {
                                    self->server_->refused(Refusal::kHeaderTimeout, self->remote_);
                                  }
                                  self->close();
                                  return;
                                }
                                self->waitForRequest(true);
                              });
    } else {
      waitForRequest(true);
    }
  }

  void closeIfIdle() override {
    if (state_ == State::kIdle) close();
  }

  void forceClose() override { close(); }

  bool evictable() const override {
    return state_ == State::kIdle || (state_ == State::kReading && !reading_body_);
  }

  const std::string& client() const override { return client_; }

 private:
  // kReading covers headers, then (reading_body_) the body; kAdmitting waits
  // for the admission step between the two.
  enum class State { kIdle, kReading, kAdmitting, kHandling, kWriting, kClosed };

  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // Waits for the first byte of the next request: the idle timeout applies
  // between requests, the header timeout on a fresh connection.
  void waitForRequest(bool first) {
    if (state_ == State::kClosed) return;
    state_ = State::kIdle;
    if (server_->stopping()) {
      close();
      return;
    }
    if (buffer_.size() > 0) {
      readHeader();
      return;
    }
    lowest().expires_after(first ? server_->options().header_timeout
                                 : server_->options().idle_timeout);
    stream_.async_read_some(
        buffer_.prepare(kFirstReadBytes),
        [self = this->shared_from_this(), first](beast::error_code ec, size_t n) {
          if (ec) {
            // A kept-alive connection timing out is normal.
            if (first && ec == beast::error::timeout) {
              self->server_->refused(Refusal::kHeaderTimeout, self->remote_);
            }
            self->close();
            return;
          }
          self->buffer_.commit(n);
          self->readHeader();
        });
  }

  void readHeader() {
    state_ = State::kReading;
    reading_body_ = false;
    admission_.reset();
    parser_.emplace();
    parser_->header_limit(
        static_cast<uint32_t>(std::min<size_t>(server_->options().max_header_bytes, UINT32_MAX)));
    parser_->body_limit(server_->options().max_request_bytes);
    lowest().expires_after(server_->options().header_timeout);
    bhttp::async_read_header(
        stream_, buffer_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->onHeader(ec); });
  }

  void onHeader(beast::error_code ec) {
    if (ec == bhttp::error::header_limit) {
      server_->refused(Refusal::kHeadersTooLarge, remote_);
      sendError(431, "request headers too large");
      return;
    }
    // The parser compares a Content-Length with the limit as soon as the
    // headers are in, before any of the body is read.
    if (ec == bhttp::error::body_limit) {
      server_->refused(Refusal::kBodyTooLarge, remote_);
      sendError(413, "request body exceeds the limit of " +
                         std::to_string(server_->options().max_request_bytes) + " bytes");
      return;
    }
    if (ec == beast::error::timeout) {
      server_->refused(Refusal::kHeaderTimeout, remote_);
      close();
      return;
    }
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset) {
      close();
      return;
    }
    if (ec) {
      server_->refused(Refusal::kMalformed, remote_);
      sendError(400, "malformed request: " + ec.message());
      return;
    }
    admit();
  }

  // Asks the admission step about the request's headers before any of its
  // body is read.
  void admit() {
    ++sequence_;
    const auto& admit_hook = server_->options().admit;
    if (!admit_hook) {
      Admission admission;
      admission.max_body_bytes = server_->options().max_request_bytes;
      onAdmitted(sequence_, std::move(admission));
      return;
    }
    state_ = State::kAdmitting;
    // The admission step answers in its own time; the client waits for it.
    lowest().expires_never();
    std::function<void(Admission)> decide = [weak = this->weak_from_this(), ioc = server_->ioc(),
                                             sequence = sequence_](Admission admission) {
      asio::post(*ioc, [weak, sequence, admission = std::move(admission)]() mutable {
        if (auto self = weak.lock()) self->onAdmitted(sequence, std::move(admission));
      });
    };
    try {
      admit_hook(head(), std::move(decide));
    } catch (const std::exception& e) {
      log::error("HTTP admission threw", internalError(e.what()),
                 {{"server", server_->options().name}});
      sendError(500, "internal error");
    }
  }

  void onAdmitted(uint64_t sequence, Admission admission) {
    if (state_ != State::kAdmitting && !(state_ == State::kReading && !reading_body_)) return;
    if (sequence != sequence_) return;
    if (admission.refusal) {
      state_ = State::kHandling;
      head_request_ = false;
      keep_alive_ = false;
      sendResponse(sequence_, std::move(*admission.refusal), true);
      return;
    }
    body_limit_ = std::min(admission.max_body_bytes, server_->options().max_request_bytes);
    const auto length = parser().content_length();
    if (length && *length > body_limit_) {
      server_->refused(Refusal::kBodyTooLarge, remote_);
      sendError(413, "request body exceeds the limit of " + std::to_string(body_limit_) +
                         " bytes for this request");
      return;
    }
    // Reserve what the body may take before reading it: its length, or the
    // whole limit when it is chunked.
    const size_t need =
        parser().is_done() ? 0 : (length ? static_cast<size_t>(*length) : body_limit_);
    if (!server_->reserveBody(need)) {
      server_->refused(Refusal::kInflightBodies, remote_);
      sendError(503, "too many request bodies in flight; retry");
      return;
    }
    reserved_ = need;
    admission_ = std::move(admission.state);
    parser().body_limit(body_limit_);
    state_ = State::kReading;
    reading_body_ = true;
    const auto expect = parser().get()[bhttp::field::expect];
    if (beast::iequals(expect, "100-continue") && !parser().is_done()) {
      writeThen(std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_, 11),
                [](Connection& self, const auto&) { self.readBody(); });
      return;
    }
    readBody();
  }

  void readBody() {
    if (parser().is_done()) {
      onRequest();
      return;
    }
    lowest().expires_after(server_->options().body_timeout);
    bhttp::async_read(
        stream_, buffer_, parser(),
        [self = this->shared_from_this()](beast::error_code ec, size_t) {
          if (ec == bhttp::error::body_limit) {
            self->server_->refused(Refusal::kBodyTooLarge, self->remote_);
            self->sendError(413, "request body exceeds the limit of " +
                                     std::to_string(self->body_limit_) + " bytes for this request");
            return;
          }
          if (ec == bhttp::error::bad_chunk || ec == bhttp::error::bad_chunk_extension ||
              ec == bhttp::error::bad_transfer_encoding) {
            self->server_->refused(Refusal::kMalformed, self->remote_);
            self->sendError(400, "malformed request body: " + ec.message());
            return;
          }
          if (ec == beast::error::timeout) {
            self->server_->refused(Refusal::kBodyTimeout, self->remote_);
          }
          if (ec) {
            self->close();
            return;
          }
          self->onRequest();
        });
  }

  // The parser of the request being read: set by the read of its headers,
  // before anything here runs (an empty one is a programming error).
  bhttp::request_parser<bhttp::string_body>& parser() {
    if (!parser_.has_value()) std::abort();
    return *parser_;
  }

  // The request as far as its headers go.
  HttpRequest head() {
    const bhttp::request<bhttp::string_body>& message = parser().get();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    for (const auto& field : message) {
      std::string name = asciiLower(toStd(field.name_string()));
      auto [it, inserted] = request.headers.try_emplace(std::move(name), toStd(field.value()));
      if (!inserted) it->second += ", " + std::string(toStd(field.value()));
    }
    request.remote_address = remote_;
    request.client_address = client_;
    return request;
  }

  void onRequest() {
    state_ = State::kHandling;
    lowest().expires_never();
    HttpRequest request = head();
    bhttp::request<bhttp::string_body> message = parser().release();
    keep_alive_ = message.keep_alive();
    head_request_ = message.method() == bhttp::verb::head;
    request.body = std::move(message.body());
    request.admission = std::move(admission_);

    // The responder may outlive the connection and the server: it holds the
    // I/O context alive and finds the connection through a weak pointer.
    HttpServer::Responder responder = [weak = this->weak_from_this(), ioc = server_->ioc(),
                                       sequence = sequence_](HttpResponse response) {
      asio::post(*ioc, [weak, sequence, response = std::move(response)]() mutable {
        if (auto self = weak.lock()) self->sendResponse(sequence, std::move(response), false);
      });
    };
    try {
      server_->handler()(std::move(request), std::move(responder));
    } catch (const std::exception& e) {
      log::error("HTTP handler threw", internalError(e.what()),
                 {{"server", server_->options().name}});
      sendResponse(sequence_, server_->options().error_response(500, "internal error"), true);
    }
  }

  void sendError(int status, std::string_view message) {
    state_ = State::kHandling;
    head_request_ = false;
    ++sequence_;
    keep_alive_ = false;
    HttpResponse response = server_->options().error_response(status, message);
    if (status == 503 && !response.header("Retry-After")) {
      response.headers.emplace_back("Retry-After", "1");
    }
    sendResponse(sequence_, std::move(response), true);
  }

  // Gives back this request's share of the in-flight body budget.
  void releaseBody() {
    server_->releaseBody(reserved_);
    reserved_ = 0;
  }

  void sendResponse(uint64_t sequence, HttpResponse response, bool close_after) {
    // Only the first answer to the request in progress counts.
    if (state_ != State::kHandling || sequence != sequence_) return;
    state_ = State::kWriting;
    releaseBody();
    auto message = std::make_shared<bhttp::response<bhttp::string_body>>();
    message->version(11);
    message->result(static_cast<unsigned>(response.status));
    message->reason(toBeast(client::httpReasonPhrase(response.status)));
    if (!response.content_type.empty())
      message->set(bhttp::field::content_type, toBeast(response.content_type));
    for (const auto& [name, value] : response.headers)
      message->insert(toBeast(name), toBeast(value));
    message->body() = std::move(response.body);
    message->keep_alive(keep_alive_ && !close_after && !server_->stopping());
    message->prepare_payload();
    // A HEAD answer has the headers of the full answer and no body.
    if (head_request_) message->body().clear();
    writeThen(message, [](Connection& self, const auto& written) {
      if (!written.keep_alive()) {
        self.shutdown();
        return;
      }
      self.waitForRequest(false);
    });
  }

  // Writes `message` within the write timeout, then does `next` (with this
  // session and the message); a failed write closes the connection.
  template <typename Message, typename Next>
  void writeThen(const std::shared_ptr<Message>& message, Next next) {
    lowest().expires_after(server_->options().write_timeout);
    bhttp::async_write(
        stream_, *message,
        [self = this->shared_from_this(), message, next](beast::error_code ec, size_t) {
          if (ec) {
            self->close();
            return;
          }
          next(*self, *message);
        });
  }

  // Ends the connection politely: TLS close_notify, or a TCP half-close.
  void shutdown() {
    if constexpr (kTls) {
      lowest().expires_after(server_->options().header_timeout);
      stream_.async_shutdown(
          [self = this->shared_from_this()](beast::error_code) { self->close(); });
    } else {
      // Lingering close: a client still sending (a body refused with 413)
      // would get a reset on close() before it reads our answer, so read and
      // drop its input until it closes too, for a short while.
      beast::error_code ec;
      lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
      state_ = State::kWriting;
      lowest().expires_after(kLingerTime);
      drain();
    }
  }

  void drain() {
    lowest().async_read_some(asio::buffer(drain_buffer_),
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               if (ec) {
                                 self->close();
                                 return;
                               }
                               self->drain();
                             });
  }

  void close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    // The server's map may hold the last reference.
    auto self = this->shared_from_this();
    releaseBody();
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest().close();
    server_->remove(id_);
  }

  HttpServer::Impl* const server_;
  const uint64_t id_;
  // Kept alive while the stream uses it, across a reload of the files.
  const std::shared_ptr<ssl::context> tls_;
  Stream stream_;
  const std::string client_;
  std::string remote_;
  beast::flat_buffer buffer_;
  // The current request: its body limit, its share of the in-flight budget,
  // whether its body is being read, and what admission decided.
  size_t body_limit_ = 0;
  size_t reserved_ = 0;
  bool reading_body_ = false;
  std::any admission_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  State state_ = State::kIdle;
  bool keep_alive_ = true;
  // Counts requests, so that a late answer to an old one is ignored.
  uint64_t sequence_ = 0;
  bool head_request_ = false;
  std::array<char, 4096> drain_buffer_{};
};

// ---- Server -----------------------------------------------------------------

Status HttpServer::Impl::loadTls() {
  if (options_.tls_key_pair) {
    std::shared_ptr<const TlsKeyPair> pair = options_.tls_key_pair();
    if (pair == nullptr) return failedPrecondition("no TLS certificate yet");
    StatusOr<std::shared_ptr<ssl::context>> context = memoryTlsContext(*pair);
    // Not tried again until the pair changes.
    tls_pair_ = std::move(pair);
    if (!context.ok()) return context.status();
    tls_ = std::move(*context);
    ++tls_loads_;
    return okStatus();
  }
  StatusOr<std::shared_ptr<ssl::context>> context =
      loadTlsContext(options_.tls_cert_file, options_.tls_key_file);
  if (!context.ok()) return context.status();
  tls_ = std::move(*context);
  cert_stamp_ = stampOf(options_.tls_cert_file);
  key_stamp_ = stampOf(options_.tls_key_file);
  ++tls_loads_;
  return okStatus();
}

std::shared_ptr<ssl::context> HttpServer::Impl::tlsContext() {
  if (options_.tls_key_pair) {
    std::shared_ptr<const TlsKeyPair> pair = options_.tls_key_pair();
    if (pair == nullptr || pair == tls_pair_) return tls_;
    Status status = loadTls();
    if (status.ok()) {
      log::info("Loaded a new TLS certificate", {{"server", options_.name}});
    } else {
      log::error("Cannot load the new TLS certificate; keeping the previous one", status,
                 {{"server", options_.name}});
    }
    return tls_;
  }
  const Clock::TimePoint now = options_.clock->now();
  if (tls_checked_at_ && now - *tls_checked_at_ < options_.tls_reload_interval) return tls_;
  tls_checked_at_ = now;
  if (stampOf(options_.tls_cert_file) == cert_stamp_ &&
      stampOf(options_.tls_key_file) == key_stamp_) {
    return tls_;
  }
  Status status = loadTls();
  if (status.ok()) {
    log::info("Reloaded TLS certificate",
              {{"server", options_.name}, {"cert", options_.tls_cert_file}});
  } else {
    // Keep serving with the previous certificate; retried at the next check.
    log::error("Cannot reload TLS certificate; keeping the previous one", status,
               {{"server", options_.name}});
  }
  return tls_;
}

Status HttpServer::Impl::open() {
  if (options_.tls_cert_file.empty() != options_.tls_key_file.empty()) {
    return invalidArgument("TLS needs both a certificate file and a key file");
  }
  if (options_.tls_key_pair && !options_.tls_cert_file.empty()) {
    return invalidArgument("TLS from files or from memory, not both");
  }
  if (options_.max_connections == 0) return invalidArgument("max_connections must be positive");
  if (options_.max_connections_per_client == 0) {
    return invalidArgument("max_connections_per_client must be positive");
  }
  tls_enabled_ = !options_.tls_cert_file.empty() || options_.tls_key_pair != nullptr;
  if (tls_enabled_) {
    RETURN_IF_ERROR(loadTls());
    tls_checked_at_ = options_.clock->now();
  }

  ASSIGN_OR_RETURN(auto host_port, parseBindAddress(options_.bind_address));
  const auto& [host, port] = host_port;
  std::vector<tcp::endpoint> candidates;
  if (host.empty()) {
    // Every interface: dual-stack where IPv6 exists, else IPv4.
    candidates.emplace_back(asio::ip::address_v6::any(), port);
    candidates.emplace_back(asio::ip::address_v4::any(), port);
  } else {
    tcp::resolver resolver(*ioc_);
    boost::system::error_code ec;
    // No passive flag: getaddrinfo ignores it when a host is given.
    auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::numeric_service, ec);
    if (ec) return invalidArgument("resolve " + host + ": " + ec.message());
    for (const auto& entry : results) candidates.push_back(entry.endpoint());
  }

  std::string last_error = "no address";
  for (const tcp::endpoint& endpoint : candidates) {
    boost::system::error_code ec;
    (void)acceptor_.open(endpoint.protocol(), ec);
    if (ec) {
      last_error = ec.message();
      continue;
    }
    (void)acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (endpoint.address().is_v6()) (void)acceptor_.set_option(asio::ip::v6_only(false), ec);
    (void)acceptor_.bind(endpoint, ec);
    if (!ec) (void)acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) {
      bound_ = acceptor_.local_endpoint(ec);
      if (!ec) break;
    }
    last_error = ec.message();
    boost::system::error_code ignored;
    (void)acceptor_.close(ignored);
  }
  if (!acceptor_.is_open()) {
    return unavailable("bind " + options_.bind_address + ": " + last_error);
  }
  doAccept();
  return okStatus();
}

void HttpServer::Impl::doAccept() {
  acceptor_.async_accept(*ioc_, [this](const boost::system::error_code& ec, tcp::socket socket) {
    onAccept(ec, std::move(socket));
  });
}

void HttpServer::Impl::onAccept(const boost::system::error_code& ec, tcp::socket socket) {
  if (stopping_ || !acceptor_.is_open()) return;
  if (ec) {
    log::debug(1, "Accept failed", {{"server", options_.name}, {"error", ec.message()}});
    retry_timer_.expires_after(kAcceptRetryDelay);
    retry_timer_.async_wait([this](const boost::system::error_code& wait_ec) {
      if (!wait_ec && !stopping_) doAccept();
    });
    return;
  }
  boost::system::error_code remote_ec;
  const tcp::endpoint remote = socket.remote_endpoint(remote_ec);
  std::string client = remote_ec ? std::string() : hostText(remote.address());
  if (auto it = per_client_.find(client);
      it != per_client_.end() && it->second >= options_.max_connections_per_client) {
    reject(std::move(socket), Refusal::kClientConnections, client);
  } else if (connections_.size() >= options_.max_connections && !evictOne()) {
    reject(std::move(socket), Refusal::kConnections, client);
  } else {
    const uint64_t id = next_id_++;
    std::shared_ptr<ConnectionBase> connection;
    if (tls_enabled_) {
      std::shared_ptr<ssl::context> context = tlsContext();
      using TlsStream = beast::ssl_stream<beast::tcp_stream>;
      connection = std::make_shared<Connection<TlsStream>>(
          this, id, TlsStream(beast::tcp_stream(std::move(socket)), *context), context, client);
    } else {
      connection = std::make_shared<Connection<beast::tcp_stream>>(
          this, id, beast::tcp_stream(std::move(socket)), nullptr, client);
    }
    ++per_client_[client];
    connections_[id] = connection;
    countConnections();
    connection->start();
  }
  doAccept();
}

bool HttpServer::Impl::evictOne() {
  for (const auto& [id, connection] : connections_) {
    if (!connection->evictable()) continue;
    // close() removes it from the map; keep it alive until then.
    std::shared_ptr<ConnectionBase> victim = connection;
    refused(Refusal::kEvicted, victim->client());
    victim->forceClose();
    return true;
  }
  return false;
}

void HttpServer::Impl::reject(tcp::socket socket, Refusal refusal, const std::string& client) {
  refused(refusal, client);
  boost::system::error_code ec;
  if (!tls_enabled_) {
    // A short answer fits the empty send buffer of a fresh socket; the
    // non-blocking write never holds up the I/O thread.
    HttpResponse busy = options_.error_response(503, "too many connections; retry");
    bhttp::response<bhttp::string_body> message;
    message.version(11);
    message.result(503);
    message.reason(toBeast(client::httpReasonPhrase(503)));
    if (!busy.content_type.empty())
      message.set(bhttp::field::content_type, toBeast(busy.content_type));
    message.set(bhttp::field::retry_after, "1");
    message.body() = std::move(busy.body);
    message.keep_alive(false);
    message.prepare_payload();
    std::ostringstream out;
    out << message;
    const std::string text = out.str();
    (void)socket.non_blocking(true, ec);
    socket.write_some(asio::buffer(text), ec);
  }
  (void)socket.shutdown(tcp::socket::shutdown_both, ec);
  (void)socket.close(ec);
}

void HttpServer::Impl::beginStop(std::chrono::milliseconds grace) {
  if (stopping_) return;
  stopping_ = true;
  boost::system::error_code ec;
  (void)acceptor_.close(ec);
  {
    std::lock_guard lock(observed_mu_);
    closed_ = true;
    observed_cv_.notify_all();
  }
  retry_timer_.cancel();
  work_.reset();
  // Idle connections close now; the others after their response.
  std::vector<std::shared_ptr<ConnectionBase>> open;
  open.reserve(connections_.size());
  for (const auto& [id, connection] : connections_) open.push_back(connection);
  for (const auto& connection : open) connection->closeIfIdle();
  if (connections_.empty()) return;
  grace_timer_.expires_after(grace);
  grace_timer_.async_wait([this](const boost::system::error_code& wait_ec) {
    if (wait_ec) return;  // every connection closed in time
    std::vector<std::shared_ptr<ConnectionBase>> left;
    left.reserve(connections_.size());
    for (const auto& [id, connection] : connections_) left.push_back(connection);
    if (!left.empty()) {
      log::warning("Closing connections still busy at the end of the grace period",
                   {{"server", options_.name}, {"connections", static_cast<int64_t>(left.size())}});
    }
    for (const auto& connection : left) connection->forceClose();
  });
}

// ---- HttpServer -------------------------------------------------------------

HttpServer::HttpServer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::start(HttpServerOptions options,
                                                        Handler handler) {
  if (!handler) return invalidArgument("http server: handler is required");
  auto impl = std::make_shared<Impl>(std::move(options), std::move(handler));
  try {
    RETURN_IF_ERROR(impl->open());
  } catch (const std::exception& e) {
    return internalError(std::string("start HTTP server: ") + e.what());
  }
  std::unique_ptr<HttpServer> server(new HttpServer(impl));
  server->port_ = impl->bound_.port();
  server->address_ = endpointText(impl->bound_);
  server->thread_ = std::thread([impl] {
    setThreadName("http-" + impl->options().name);
    try {
      impl->run();
    } catch (const std::exception& e) {
      // Asio rethrows what a completion handler threw; none of ours throws.
      log::error("HTTP server I/O thread failed", internalError(e.what()),
                 {{"server", impl->options().name}});
    }
  });
  log::info("HTTP server listening", {{"server", impl->options().name},
                                      {"address", server->address_},
                                      {"tls", !impl->options().tls_cert_file.empty() ||
                                                  impl->options().tls_key_pair != nullptr}});
  return server;
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::stop(std::chrono::milliseconds grace) {
  if (stopped_) return;
  stopped_ = true;
  impl_->post([impl = impl_.get(), grace] { impl->beginStop(grace); });
  if (thread_.joinable()) thread_.join();
}

size_t HttpServer::connectionCount() const { return impl_->connection_count_; }

bool HttpServer::waitForConnectionsForTest(size_t n) const {
  std::unique_lock lock(impl_->observed_mu_);
  return impl_->observed_cv_.wait_for(lock, std::chrono::seconds(10),
                                      [&] { return impl_->connection_count_ == n; });
}

bool HttpServer::waitForStopAcceptingForTest() const {
  std::unique_lock lock(impl_->observed_mu_);
  return impl_->observed_cv_.wait_for(lock, std::chrono::seconds(10),
                                      [&] { return impl_->closed_; });
}

size_t HttpServer::tlsLoadCount() const { return impl_->tls_loads_; }

size_t HttpServer::refusalCount() const { return impl_->refusals_; }

}  // namespace rsc::controller::http
