// For the server tests: a blocking HTTP/1.1 client on one loopback connection
// (plain or TLS), raw byte access for malformed and slow requests, and a
// self-signed certificate made with the OpenSSL API. Every read has a socket
// timeout, so a broken server fails a test instead of hanging it.
// Not thread-safe: one client per thread.
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "controller/http/asio.h"

namespace rsc::controller::http {

struct TestResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercased names
  std::string body;
  bool keep_alive = false;
};

class TestHttpClient {
 public:
  // Connects to 127.0.0.1:port; with `tls`, also does the TLS handshake.
  explicit TestHttpClient(uint16_t port, asio::ssl::context* tls = nullptr) {
    namespace ip = asio::ip;
    ip::tcp::socket socket(ioc_);
    socket.connect({ip::make_address("127.0.0.1"), port});
    timeval timeout{5, 0};  // a safety net, never the synchronisation
    setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    if (tls != nullptr) {
      tls_.emplace(std::move(socket), *tls);
      tls_->set_verify_mode(asio::ssl::verify_peer);
      tls_->handshake(asio::ssl::stream_base::client);
    } else {
      plain_.emplace(std::move(socket));
    }
  }

  TestResponse send(const std::string& method, const std::string& target,
                    const std::string& body = "",
                    const std::map<std::string, std::string>& headers = {}) {
    namespace bhttp = beast::http;
    bhttp::request<bhttp::string_body> request;
    request.method_string(method);
    request.target(target);
    request.version(11);
    request.set(bhttp::field::host, "localhost");
    for (const auto& [name, value] : headers) request.set(name, value);
    request.body() = body;
    request.prepare_payload();
    if (tls_) {
      bhttp::write(*tls_, request);
    } else {
      bhttp::write(*plain_, request);
    }
    return read();
  }

  TestResponse read() {
    namespace bhttp = beast::http;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    if (tls_) {
      bhttp::read(*tls_, buffer_, parser);
    } else {
      bhttp::read(*plain_, buffer_, parser);
    }
    const auto& message = parser.get();
    TestResponse out;
    out.status = static_cast<int>(message.result_int());
    for (const auto& field : message) {
      std::string name(field.name_string().data(), field.name_string().size());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      out.headers[name] = std::string(field.value().data(), field.value().size());
    }
    out.body = message.body();
    out.keep_alive = message.keep_alive();
    return out;
  }

  void writeRaw(const std::string& bytes) {
    if (tls_) {
      asio::write(*tls_, asio::buffer(bytes));
    } else {
      asio::write(*plain_, asio::buffer(bytes));
    }
  }

  // True when the server closed the connection (the next read sees EOF or a
  // reset) rather than the read timing out.
  bool closedByPeer() {
    char byte = 0;
    boost::system::error_code ec;
    if (tls_) {
      tls_->read_some(asio::buffer(&byte, 1), ec);
    } else {
      plain_->read_some(asio::buffer(&byte, 1), ec);
    }
    return ec == asio::error::eof || ec == asio::error::connection_reset ||
           ec == asio::ssl::error::stream_truncated;
  }

  // The common name of the server's certificate (TLS only).
  std::string peerCommonName() {
    X509* cert = SSL_get1_peer_certificate(tls_->native_handle());
    if (cert == nullptr) return "";
    char name[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, name, sizeof(name));
    X509_free(cert);
    return name;
  }

 private:
  asio::io_context ioc_;
  std::optional<asio::ip::tcp::socket> plain_;
  std::optional<asio::ssl::stream<asio::ip::tcp::socket>> tls_;
  beast::flat_buffer buffer_;
};

// A self-signed certificate for localhost and 127.0.0.1, PEM-encoded.
struct TestCertificate {
  std::string cert_pem;
  std::string key_pem;

  static TestCertificate make(const std::string& common_name) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    X509* cert = X509_new();
    X509_set_version(cert, 2);
    static long serial = 1;
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                               0);
    X509_set_issuer_name(cert, name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
    X509_EXTENSION* san =
        X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
    X509_add_ext(cert, san, -1);
    X509_EXTENSION_free(san);
    X509_sign(cert, key, EVP_sha256());

    TestCertificate out;
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, cert);
    out.cert_pem = drain(bio);
    PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
    out.key_pem = drain(bio);
    BIO_free(bio);
    X509_free(cert);
    EVP_PKEY_free(key);
    return out;
  }

  void writeTo(const std::filesystem::path& cert_file,
               const std::filesystem::path& key_file) const {
    std::ofstream(cert_file, std::ios::trunc) << cert_pem;
    std::ofstream(key_file, std::ios::trunc) << key_pem;
  }

  // A client context that trusts this certificate.
  std::unique_ptr<asio::ssl::context> clientContext() const {
    auto context = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
    context->add_certificate_authority(asio::buffer(cert_pem));
    return context;
  }

 private:
  static std::string drain(BIO* bio) {
    char* data = nullptr;
    const long length = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<size_t>(length));
    (void)BIO_reset(bio);
    return out;
  }
};

// A temporary directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "rsc-inventory-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace rsc::controller::http
