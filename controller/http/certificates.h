// X.509 certificates the controller makes itself with OpenSSL: a CA and the serving
// certificates it signs (the inventory API's self-signed mode), a self-signed serving
// certificate (/metrics without certificate files, as controller-runtime does), and the
// validity of a PEM certificate (when to rotate). Used by main and CertificateSecret.
// Pure functions of their arguments (times come from the caller's Clock); thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "controller/http/http_server.h"

namespace rsc::controller::http {

// Certificates are valid from this long before they are made: clients'
// clocks may lag ours.
inline constexpr std::chrono::hours kCertificateBackdate{1};

struct CertificateRequest {
  std::string common_name;
  // Subject alternative names: DNS names, or IP addresses ("10.0.0.7", "::1").
  std::vector<std::string> names;
  // Valid from kCertificateBackdate before `not_before` until
  // `not_before + validity`.
  Clock::SystemTime not_before;
  Clock::Duration validity = std::chrono::hours(24 * 365);
};

// A new CA (P-256 key, basicConstraints CA:TRUE, keyCertSign) named
// request.common_name; request.names is ignored.
StatusOr<TlsKeyPair> makeCertificateAuthority(const CertificateRequest& request);

// A serving certificate (P-256 key, CA:FALSE, serverAuth) for request.names,
// signed by `ca` (a pair from makeCertificateAuthority), or by itself when
// `ca` is null. The chain in cert_pem is the leaf alone.
StatusOr<TlsKeyPair> issueServingCertificate(const CertificateRequest& request,
                                             const TlsKeyPair* ca);

// The validity of the first certificate of a PEM bundle.
struct Validity {
  Clock::SystemTime not_before;
  Clock::SystemTime not_after;
};
StatusOr<Validity> certificateValidity(std::string_view cert_pem);

// True when the first certificate of `cert_pem` is signed by the CA of
// `ca_pem` and the key of `key_pem` matches it: a stored pair is consistent.
bool certificateSignedBy(std::string_view cert_pem, std::string_view key_pem,
                         std::string_view ca_pem);

// The PEM bundle in the file at `path` (a CA bundle: --inventory-ca-file, --pull-ca-file).
// Unavailable when it cannot be read, InvalidArgument when it holds no PEM certificate.
StatusOr<std::string> readCertificateFile(const std::string& path);

}  // namespace rsc::controller::http
