// <utility> first: Boost 1.74's Asio uses std::exchange without including it.
#include "client/http_transport.h"

#include <cpprest/http_client.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pplx/threadpool.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <utility>

#include "client/credentials.h"
#include "client/openssl_ptr.h"
#include "client/url.h"
#include "common/log.h"
#include "common/strings.h"
#include "common/thread_name.h"

namespace rsc::client {
namespace {

using web::http::http_request;
using web::http::http_response;
using web::http::client::http_client;
using web::http::client::http_client_config;

// The pplx pool runs Asio handlers and task continuations only (reads,
// writes, TLS records); our callers block on their own threads, never on
// these, and Asio multiplexes every connection over them, so two are plenty
// (the library's default is 40).
constexpr size_t kPplxThreads = 2;
// A watch event larger than the decoder allows is an error anyway; this is
// only how much we copy out of cpprest's buffer per call.
constexpr size_t kStreamReadBytes = size_t{64} * 1024;

void initThreadPoolOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      crossplat::threadpool::initialize_with_threads(kPplxThreads);
      nameEveryThread(kPplxThreads, "api-client", [](auto task) {
        boost::asio::post(crossplat::threadpool::shared_instance().service(), std::move(task));
      });
    } catch (const std::exception&) {
      // Ignored: someone in this process used cpprestsdk first; its pool stays.
    }
  });
}

// Certificates and key parsed from PEM bytes (not files: they may come from
// kubeconfig "-data" fields), shared by every connection's SSL context.
struct TlsMaterial {
  // What verifies the server: the configured CA, or the system's trust store.
  // One store shared by every connection (X509_STORE is reference-counted
  // and may serve several SSL contexts at once).
  StorePtr trust;
  X509Ptr cert;
  std::vector<X509Ptr> chain;
  PkeyPtr key;
};

// cpprest's Asio client loads OpenSSL's default trust store (the system's CA
// bundle) into the SSL context of every new connection before our callback
// runs, and the callback then replaces that store. With OpenSSL 3 the load
// costs about 23 ms of CPU for Debian's 144 certificates, more when several
// connections open at once (its decoders contend on shared locks): a pool
// whose slices are written eight at a time spent more time loading it than
// writing. So the first transport notes where the default store is, points
// OpenSSL's default file at an empty one for the rest of the process, and
// the system store is loaded once, here, only if a transport uses it.
struct DefaultTrustPaths {
  std::string file;
  std::string dir;
};

constexpr char kEmptyTrustFile[] = "/dev/null";

const DefaultTrustPaths& defaultTrustPaths() {
  static const DefaultTrustPaths paths = [] {
    // The paths OpenSSL itself would use: the environment's, else its own.
    const char* file = std::getenv(X509_get_default_cert_file_env());
    const char* dir = std::getenv(X509_get_default_cert_dir_env());
    DefaultTrustPaths p{file != nullptr ? file : X509_get_default_cert_file(),
                        dir != nullptr ? dir : X509_get_default_cert_dir()};
    setenv(X509_get_default_cert_file_env(), kEmptyTrustFile, 1);
    return p;
  }();
  return paths;
}

// The system's trust store, loaded on first use and kept for the process.
X509_STORE* systemTrustStore() {
  static X509_STORE* const store = [] {
    const DefaultTrustPaths& paths = defaultTrustPaths();
    X509_STORE* s = X509_STORE_new();
    // A missing file or directory leaves the store without it, as with
    // OpenSSL's own default: verification then fails, naming the issuer.
    if (X509_LOOKUP* lookup = X509_STORE_add_lookup(s, X509_LOOKUP_file())) {
      X509_LOOKUP_load_file(lookup, paths.file.c_str(), X509_FILETYPE_PEM);
    }
    if (X509_LOOKUP* lookup = X509_STORE_add_lookup(s, X509_LOOKUP_hash_dir())) {
      X509_LOOKUP_add_dir(lookup, paths.dir.c_str(), X509_FILETYPE_PEM);
    }
    ERR_clear_error();
    return s;
  }();
  return store;
}

std::string takeOpensslError() {
  unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) {
    return "unknown OpenSSL error";
  }
  std::array<char, 256> buf{};
  ERR_error_string_n(code, buf.data(), buf.size());
  return buf.data();
}

BioPtr memoryBio(const std::string& bytes) {
  return BioPtr(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
}

StatusOr<std::vector<X509Ptr>> parseCertificates(const std::string& pem, const std::string& what) {
  ERR_clear_error();
  BioPtr bio = memoryBio(pem);
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  // Reading stops with "no start line" at the end of the data; anything else
  // is a broken certificate.
  unsigned long last = ERR_peek_last_error();
  if (last != 0 && ERR_GET_REASON(last) != PEM_R_NO_START_LINE) {
    return invalidArgument(what + ": " + takeOpensslError());
  }
  ERR_clear_error();
  if (certs.empty()) {
    return invalidArgument(what + ": no certificate in the PEM data");
  }
  return certs;
}

// Parses a client certificate (with its chain) and key into `tls`.
Status parseIdentity(const std::string& cert_pem, const std::string& key_pem, TlsMaterial& tls) {
  ASSIGN_OR_RETURN(auto certs, parseCertificates(cert_pem, "client certificate"));
  tls.cert = std::move(certs.front());
  tls.chain.clear();
  for (size_t i = 1; i < certs.size(); ++i) {
    tls.chain.push_back(std::move(certs[i]));
  }
  BioPtr bio = memoryBio(key_pem);
  // A password callback that gives none, so an encrypted key fails instead
  // of prompting on the terminal.
  pem_password_cb* no_password = [](char*, int, int, void*) { return 0; };
  tls.key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_password, nullptr));
  if (!tls.key) {
    return invalidArgument("client key: " + takeOpensslError());
  }
  if (X509_check_private_key(tls.cert.get(), tls.key.get()) != 1) {
    ERR_clear_error();
    return invalidArgument("client certificate and key do not match");
  }
  return okStatus();
}

StatusOr<std::shared_ptr<const TlsMaterial>> parseTls(const ClientConfig& config) {
  auto tls = std::make_shared<TlsMaterial>();
  if (!config.ca_pem.empty()) {
    // Trust exactly the configured CA, not the system store as well, as
    // kubectl does with certificate-authority.
    ASSIGN_OR_RETURN(auto ca, parseCertificates(config.ca_pem, "certificate authority"));
    tls->trust.reset(X509_STORE_new());
    for (const auto& cert : ca) {
      X509_STORE_add_cert(tls->trust.get(), cert.get());
    }
  } else if (!config.insecure_skip_tls_verify) {
    X509_STORE* system = systemTrustStore();
    X509_STORE_up_ref(system);
    tls->trust.reset(system);
  }
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return invalidArgument("client certificate and key: set both or neither");
  }
  if (!config.client_cert_pem.empty()) {
    RETURN_IF_ERROR(parseIdentity(config.client_cert_pem, config.client_key_pem, *tls));
  }
  return std::shared_ptr<const TlsMaterial>(std::move(tls));
}

// The TLS material new connections use. An exec plugin's client certificate
// replaces it; connections made before keep the one they were made with.
class TlsState {
 public:
  explicit TlsState(std::shared_ptr<const TlsMaterial> material) : material_(std::move(material)) {}

  std::shared_ptr<const TlsMaterial> material() const {
    std::lock_guard lock(mu_);
    return material_;
  }

  // Uses `identity` from now on. Returns true when it differs from the one
  // in use (so pooled connections should go).
  StatusOr<bool> use(const std::shared_ptr<const ClientIdentity>& identity) {
    std::lock_guard lock(mu_);
    if (identity == nullptr || identity == identity_) return false;
    auto tls = std::make_shared<TlsMaterial>();
    if (material_->trust) {
      X509_STORE_up_ref(material_->trust.get());
      tls->trust.reset(material_->trust.get());
    }
    Status parsed = parseIdentity(identity->cert_pem, identity->key_pem, *tls);
    if (!parsed.ok()) return std::move(parsed).withContext("exec credential plugin");
    material_ = std::move(tls);
    identity_ = identity;
    return true;
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const TlsMaterial> material_;
  std::shared_ptr<const ClientIdentity> identity_;
};

// proxy-url as cpprest takes it: the address without user:password, which
// go into the proxy's credentials (sent as Proxy-Authorization: Basic).
web::web_proxy proxyOf(const std::string& proxy_url) {
  web::uri uri(proxy_url);
  web::uri_builder address(uri);
  address.set_user_info("");
  web::web_proxy proxy(address.to_uri());
  const std::string& user_info = uri.user_info();
  if (!user_info.empty()) {
    const size_t colon = user_info.find(':');
    proxy.set_credentials(web::credentials(web::uri::decode(user_info.substr(0, colon)),
                                           colon == std::string::npos
                                               ? std::string()
                                               : web::uri::decode(user_info.substr(colon + 1))));
  }
  return proxy;
}

// Runs on a pplx thread for each new TLS connection.
void configureSslContext(const TlsMaterial& tls, boost::asio::ssl::context& context) {
  SSL_CTX* ctx = context.native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (tls.trust) {
    SSL_CTX_set1_cert_store(ctx, tls.trust.get());
  }
  if (tls.cert) {
    if (SSL_CTX_use_certificate(ctx, tls.cert.get()) != 1 ||
        SSL_CTX_use_PrivateKey(ctx, tls.key.get()) != 1) {
      log::warning("cannot set the client certificate", {{"error", takeOpensslError()}});
    }
    for (const auto& cert : tls.chain) {
      SSL_CTX_add1_chain_cert(ctx, cert.get());
    }
  }
}

// The server URL with its port written out: cpprest's CONNECT to a proxy
// names the port of the URL, and has none to name otherwise.
std::string withExplicitPort(const Url& server) {
  Url explicit_port = server;
  explicit_port.host = server.hostPort();
  return explicit_port.origin() + explicit_port.rest;
}

HttpResponse headOf(const http_response& response) {
  HttpResponse head;
  head.code = response.status_code();
  for (const auto& [name, value] : response.headers()) {
    head.headers[asciiLower(name)] = value;
  }
  return head;
}

std::string bodyOf(const http_response& response) {
  std::vector<unsigned char> bytes = response.extract_vector().get();
  return {bytes.begin(), bytes.end()};
}

// Up to `limit` bytes of the answer's body, read as it arrives; the rest is left unread.
std::string bodyPrefix(const http_response& response, size_t limit) {
  using Traits = concurrency::streams::streambuf<uint8_t>::traits;
  auto buffer = response.body().streambuf();
  std::string out;
  std::vector<uint8_t> bytes(std::min(limit, kStreamReadBytes));
  while (out.size() < limit) {
    if (buffer.getc().get() == Traits::eof()) break;
    const size_t available = std::max<size_t>(1, static_cast<size_t>(buffer.in_avail()));
    const size_t n =
        buffer.getn(bytes.data(), std::min({available, bytes.size(), limit - out.size()})).get();
    if (n == 0) break;
    out.append(reinterpret_cast<const char*>(bytes.data()), n);
  }
  return out;
}

// Classifies a failed exchange. cpprest reports connect failures (refused,
// unreachable) as EHOSTUNREACH and its idle timeout as ETIMEDOUT.
Status transportError(const std::string& host, const std::error_code& ec, const std::string& what) {
  const int value = ec.value();
  if (value == ETIMEDOUT) {
    return {StatusCode::kDeadlineExceeded,
            host + ": no answer in time: " + what,
            {},
            kReasonConnectionLost};
  }
  const bool not_sent = value == EHOSTUNREACH || value == ECONNREFUSED || value == ENETUNREACH ||
                        what.find("resolving address") != std::string::npos ||
                        what.find("SSL handshake") != std::string::npos ||
                        what.find("Failed to connect") != std::string::npos;
  return {StatusCode::kUnavailable,
          host + ": " + what,
          {},
          not_sent ? kReasonRequestNotSent : kReasonConnectionLost};
}

}  // namespace

struct CpprestTransport::Impl {
  Impl(const ClientConfig& config, const Url& server_url,
       std::shared_ptr<const TlsMaterial> tls_material, Clock& clock)
      : server(config.proxy_url.empty() ? config.server : withExplicitPort(server_url)),
        host_label(server_url.hostPort()),
        tls(std::make_shared<TlsState>(std::move(tls_material))),
        insecure(config.insecure_skip_tls_verify),
        follow_redirects(config.follow_redirects),
        tls_server_name(config.tls_server_name),
        proxy_url(config.proxy_url),
        user_agent(config.user_agent),
        credentials(CredentialSource::shared(config, clock)) {}

  http_client_config clientConfig(std::chrono::milliseconds timeout) const {
    http_client_config cfg;
    cfg.set_timeout(std::chrono::duration_cast<std::chrono::microseconds>(timeout));
    cfg.set_validate_certificates(!insecure);
    if (!follow_redirects) cfg.set_max_redirects(0);
    if (!proxy_url.empty()) {
      cfg.set_proxy(proxyOf(proxy_url));
    }
    std::shared_ptr<const TlsState> state = tls;
    cfg.set_ssl_context_callback([state](boost::asio::ssl::context& context) {
      configureSslContext(*state->material(), context);
    });
    return cfg;
  }

  // The credential for the next request; a new client certificate from an
  // exec plugin empties the keep-alive pool, so that it is used at once. A
  // plugin that fails is reported as a request that was not sent.
  StatusOr<Credential> credential() {
    StatusOr<Credential> c = credentials->get();
    if (!c.ok()) {
      return Status(StatusCode::kUnavailable, c.status().message(), {}, kReasonRequestNotSent);
    }
    StatusOr<bool> changed = tls->use(c->identity);
    if (!changed.ok()) {
      return Status(StatusCode::kUnavailable, changed.status().message(), {},
                    kReasonRequestNotSent);
    }
    if (*changed) {
      std::lock_guard lock(mu);
      clients.clear();
    }
    return c;
  }

  // One shared client (and so one keep-alive pool) per idle timeout; in
  // practice there is one.
  std::shared_ptr<http_client> pooledClient(std::chrono::milliseconds timeout) {
    std::lock_guard lock(mu);
    auto& client = clients[timeout.count()];
    if (!client) {
      client = std::make_shared<http_client>(server, clientConfig(timeout));
    }
    return client;
  }

  http_request buildRequest(const HttpRequest& request, const Credential& credential) {
    http_request out(request.method);
    out.set_request_uri(web::uri(request.path_and_query));
    std::string content_type = "application/json";
    bool has_accept = false;
    for (const auto& [name, value] : request.headers) {
      std::string lower = asciiLower(name);
      if (lower == "content-type") {
        content_type = value;
        continue;
      }
      if (lower == "accept") {
        has_accept = true;
      }
      out.headers().add(name, value);
    }
    if (!has_accept) {
      out.headers().add("Accept", "application/json");
    }
    out.headers().add("User-Agent", user_agent);
    // cpprest checks the certificate (and sends SNI) for the Host header's
    // name, which is how tls-server-name is honoured.
    if (!tls_server_name.empty()) {
      out.headers().add("Host", tls_server_name);
    }
    if (!credential.token.empty()) {
      out.headers().add("Authorization", "Bearer " + credential.token);
    }
    if (!request.body.empty()) {
      out.set_body(request.body, content_type);
    }
    return out;
  }

  const std::string server;
  const std::string host_label;
  const std::shared_ptr<TlsState> tls;
  const bool insecure;
  const bool follow_redirects;
  const std::string tls_server_name;
  const std::string proxy_url;
  const std::string user_agent;
  const std::shared_ptr<CredentialSource> credentials;
  std::mutex mu;
  std::map<int64_t, std::shared_ptr<http_client>> clients;
};

StatusOr<std::unique_ptr<CpprestTransport>> CpprestTransport::create(const ClientConfig& config,
                                                                     Clock& clock) {
  const StatusOr<Url> server = parseHttpUrl(config.server);
  if (!server.ok()) return invalidArgument("server " + server.status().message());
  defaultTrustPaths();
  ASSIGN_OR_RETURN(auto tls, parseTls(config));
  initThreadPoolOnce();
  auto impl = std::make_unique<Impl>(config, *server, std::move(tls), clock);
  try {
    impl->pooledClient(kDefaultRequestTimeout);
  } catch (const std::exception& e) {
    return invalidArgument("server \"" + config.server + "\": " + e.what());
  }
  // An exec plugin runs once now, so that one that cannot work (not
  // installed, broken output) fails at startup rather than at every request.
  if (config.exec) {
    StatusOr<Credential> first = impl->credentials->get();
    if (!first.ok()) return first.status();
  }
  return std::unique_ptr<CpprestTransport>(new CpprestTransport(std::move(impl)));
}

CpprestTransport::CpprestTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CpprestTransport::~CpprestTransport() = default;

std::string CpprestTransport::host() const { return impl_->host_label; }

StatusOr<HttpResponse> CpprestTransport::send(const HttpRequest& request) {
  if (request.stop.stop_requested()) {
    return cancelled(impl_->host_label + ": request stopped before it was sent");
  }
  pplx::cancellation_token_source cancel;
  std::stop_callback on_stop(request.stop, [&cancel] { cancel.cancel(); });
  StatusOr<HttpResponse> result = [&]() -> StatusOr<HttpResponse> {
    try {
      // A 401 may mean the token rotated under us or the plugin's
      // credential was revoked: refresh it and repeat once.
      for (int attempt = 0;; ++attempt) {
        ASSIGN_OR_RETURN(Credential credential, impl_->credential());
        auto client = impl_->pooledClient(request.timeout);
        http_response response =
            client->request(impl_->buildRequest(request, credential), cancel.get_token()).get();
        HttpResponse out = headOf(response);
        out.body = bodyOf(response);
        if (out.code == 401 && attempt == 0 &&
            impl_->credentials->refreshAfterUnauthorized(credential)) {
          continue;
        }
        return out;
      }
    } catch (const web::uri_exception& e) {
      // A path the caller built wrongly; repeating it cannot help.
      return invalidArgument("bad request path \"" + request.path_and_query + "\": " + e.what());
    } catch (const web::http::http_exception& e) {
      return transportError(impl_->host_label, e.error_code(), e.what());
    } catch (const pplx::task_canceled&) {
      return Status(StatusCode::kUnavailable, impl_->host_label + ": request cancelled", {},
                    kReasonConnectionLost);
    } catch (const std::exception& e) {
      return Status(StatusCode::kUnavailable, impl_->host_label + ": " + e.what(), {},
                    kReasonConnectionLost);
    }
  }();
  // However the exchange broke off, after a stop it was the stop that ended it.
  if (!result.ok() && result.status().code() != StatusCode::kInvalidArgument &&
      request.stop.stop_requested()) {
    return cancelled(impl_->host_label + ": request stopped");
  }
  return result;
}

StatusOr<HttpResponse> CpprestTransport::stream(
    const HttpRequest& request, const std::function<void(const HttpResponse&)>& on_head,
    const std::function<bool(std::string_view)>& on_chunk, std::stop_token stop) {
  pplx::cancellation_token_source cancel;
  // Cancelling the token closes the socket, even in the middle of the body.
  std::stop_callback on_stop(stop, [&cancel] { cancel.cancel(); });
  try {
    // A client of its own: a watch holds its connection for minutes, and its
    // idle timeout must exceed the gap between events.
    http_client client(impl_->server, impl_->clientConfig(request.timeout));
    http_response response;
    for (int attempt = 0;; ++attempt) {
      ASSIGN_OR_RETURN(Credential credential, impl_->credential());
      response = client.request(impl_->buildRequest(request, credential), cancel.get_token()).get();
      if (response.status_code() == 401 && attempt == 0 &&
          impl_->credentials->refreshAfterUnauthorized(credential)) {
        continue;
      }
      break;
    }
    HttpResponse head = headOf(response);
    if (on_head) {
      on_head(head);
    }
    if (head.code < 200 || head.code >= 300) {
      if (request.max_error_body_bytes == 0) {
        head.body = bodyOf(response);
      } else {
        head.body = bodyPrefix(response, request.max_error_body_bytes);
        // Whatever is left of it is not read: the connection goes with the client.
        cancel.cancel();
      }
      return head;
    }

    // The request task completed with the headers; the body arrives in
    // cpprest's producer/consumer buffer. getc() waits for one byte without
    // taking it, then whatever is buffered is taken at once (a getn for a
    // full buffer would wait until that much arrived).
    auto buffer = response.body().streambuf();
    std::vector<uint8_t> bytes(kStreamReadBytes);
    using Traits = concurrency::streams::streambuf<uint8_t>::traits;
    while (true) {
      if (buffer.getc().get() == Traits::eof()) {
        break;
      }
      size_t available = std::max<size_t>(1, static_cast<size_t>(buffer.in_avail()));
      size_t n = buffer.getn(bytes.data(), std::min(available, bytes.size())).get();
      if (n == 0) {
        break;
      }
      if (!on_chunk(std::string_view(reinterpret_cast<const char*>(bytes.data()), n))) {
        cancel.cancel();
        return head;
      }
    }
    // A broken connection also ends the buffer; only the response's
    // completion tells it from the server's end of the body.
    response.content_ready().get();
    if (stop.stop_requested()) {
      return cancelled("watch stopped");
    }
    return head;
  } catch (const web::uri_exception& e) {
    return invalidArgument("bad request path \"" + request.path_and_query + "\": " + e.what());
  } catch (const web::http::http_exception& e) {
    if (stop.stop_requested()) {
      return cancelled("watch stopped");
    }
    return transportError(impl_->host_label, e.error_code(), e.what());
  } catch (const pplx::task_canceled&) {
    if (stop.stop_requested()) {
      return cancelled("watch stopped");
    }
    return Status(StatusCode::kUnavailable, impl_->host_label + ": stream cancelled", {},
                  kReasonConnectionLost);
  } catch (const std::exception& e) {
    if (stop.stop_requested()) {
      return cancelled("watch stopped");
    }
    return Status(StatusCode::kUnavailable, impl_->host_label + ": " + e.what(), {},
                  kReasonConnectionLost);
  }
}

}  // namespace rsc::client
