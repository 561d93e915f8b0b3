#include "controller/http/certificates.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include "client/openssl_ptr.h"

namespace rsc::controller::http {
namespace {

using Key = client::PkeyPtr;
using Cert = client::X509Ptr;
using Bio = client::BioPtr;

Status sslError(std::string_view what) {
  return internalError(std::string(what) + " failed (OpenSSL)");
}

std::string drain(BIO* bio) {
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio, &data);
  return length > 0 ? std::string(data, static_cast<size_t>(length)) : std::string();
}

// The first object of `pem`, read by `read` (a PEM_read_bio_* function);
// `what` names it when there is none.
template <typename T, typename Read>
StatusOr<std::unique_ptr<T, client::OpenSslFree>> readPem(std::string_view pem, Read read,
                                                          std::string_view what) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return sslError("BIO_new_mem_buf");
  std::unique_ptr<T, client::OpenSslFree> object(read(bio.get(), nullptr, nullptr, nullptr));
  if (!object) return invalidArgument("not a PEM " + std::string(what));
  return object;
}

StatusOr<Cert> readCert(std::string_view pem) {
  return readPem<X509>(pem, PEM_read_bio_X509, "certificate");
}

StatusOr<Key> readKey(std::string_view pem) {
  return readPem<EVP_PKEY>(pem, PEM_read_bio_PrivateKey, "private key");
}

Status addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) return invalidArgument("bad certificate extension \"" + value + "\"");
  const int added = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return added == 1 ? okStatus() : sslError("X509_add_ext");
}

bool isIpAddress(const std::string& name) {
  ASN1_OCTET_STRING* ip = a2i_IPADDRESS(name.c_str());
  if (ip == nullptr) return false;
  ASN1_OCTET_STRING_free(ip);
  return true;
}

// A certificate for `key`, signed by `issuer_key` under `issuer` (itself
// when null), with the extensions in `extensions`.
StatusOr<TlsKeyPair> sign(const CertificateRequest& request, const Key& key, X509* issuer,
                          EVP_PKEY* issuer_key,
                          const std::vector<std::pair<int, std::string>>& extensions) {
  Cert cert(X509_new());
  if (!cert) return sslError("X509_new");
  X509_set_version(cert.get(), 2);
  // A random 127-bit serial, as RFC 5280 asks of CAs.
  unsigned char serial_bytes[16];
  if (RAND_bytes(serial_bytes, sizeof(serial_bytes)) != 1) return sslError("RAND_bytes");
  serial_bytes[0] &= 0x7f;
  BIGNUM* serial = BN_bin2bn(serial_bytes, sizeof(serial_bytes), nullptr);
  if (serial == nullptr) return sslError("BN_bin2bn");
  const bool serial_set = BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get())) != nullptr;
  BN_free(serial);
  if (!serial_set) return sslError("BN_to_ASN1_INTEGER");

  const auto seconds = [](Clock::SystemTime t) {
    return static_cast<time_t>(
        std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count());
  };
  if (ASN1_TIME_set(X509_getm_notBefore(cert.get()),
                    seconds(request.not_before - kCertificateBackdate)) == nullptr ||
      ASN1_TIME_set(
          X509_getm_notAfter(cert.get()),
          seconds(request.not_before + std::chrono::duration_cast<Clock::SystemTime::duration>(
                                           request.validity))) == nullptr) {
    return sslError("ASN1_TIME_set");
  }
  if (X509_set_pubkey(cert.get(), key.get()) != 1) return sslError("X509_set_pubkey");
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(
          name, "CN", MBSTRING_UTF8,
          reinterpret_cast<const unsigned char*>(request.common_name.c_str()), -1, -1, 0) != 1) {
    return invalidArgument("bad common name \"" + request.common_name + "\"");
  }
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1) {
    return sslError("X509_set_issuer_name");
  }
  for (const auto& [nid, value] : extensions) {
    RETURN_IF_ERROR(addExtension(cert.get(), signer, nid, value));
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key.get(), EVP_sha256()) == 0) {
    return sslError("X509_sign");
  }

  TlsKeyPair out;
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert.get()) != 1) return sslError("PEM_write_bio_X509");
  out.cert_pem = drain(bio.get());
  bio.reset(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return sslError("PEM_write_bio_PrivateKey");
  }
  out.key_pem = drain(bio.get());
  return out;
}

StatusOr<Key> newKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return sslError("EVP_EC_gen");
  return key;
}

}  // namespace

StatusOr<TlsKeyPair> makeCertificateAuthority(const CertificateRequest& request) {
  ASSIGN_OR_RETURN(Key key, newKey());
  return sign(request, key, nullptr, nullptr,
              {{NID_basic_constraints, "critical,CA:TRUE"},
               {NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"},
               {NID_subject_key_identifier, "hash"}});
}

StatusOr<TlsKeyPair> issueServingCertificate(const CertificateRequest& request,
                                             const TlsKeyPair* ca) {
  if (request.names.empty()) return invalidArgument("a serving certificate needs a name");
  std::string san;
  for (const std::string& name : request.names) {
    if (!san.empty()) san += ",";
    san += (isIpAddress(name) ? "IP:" : "DNS:") + name;
  }
  std::vector<std::pair<int, std::string>> extensions = {
      {NID_basic_constraints, "critical,CA:FALSE"},
      {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
      {NID_ext_key_usage, "serverAuth"},
      {NID_subject_alt_name, san},
  };
  ASSIGN_OR_RETURN(Key key, newKey());
  if (ca == nullptr) return sign(request, key, nullptr, nullptr, extensions);
  ASSIGN_OR_RETURN(Cert ca_cert, readCert(ca->cert_pem));
  ASSIGN_OR_RETURN(Key ca_key, readKey(ca->key_pem));
  extensions.emplace_back(NID_authority_key_identifier, "keyid:always");
  return sign(request, key, ca_cert.get(), ca_key.get(), extensions);
}

StatusOr<Validity> certificateValidity(std::string_view cert_pem) {
  ASSIGN_OR_RETURN(Cert cert, readCert(cert_pem));
  const auto to_time = [](const ASN1_TIME* t) -> std::optional<Clock::SystemTime> {
    std::tm tm{};
    if (ASN1_TIME_to_tm(t, &tm) != 1) return std::nullopt;
    return std::chrono::system_clock::from_time_t(timegm(&tm));
  };
  const auto not_before = to_time(X509_get0_notBefore(cert.get()));
  const auto not_after = to_time(X509_get0_notAfter(cert.get()));
  if (!not_before || !not_after) return invalidArgument("certificate with a malformed validity");
  return Validity{*not_before, *not_after};
}

bool certificateSignedBy(std::string_view cert_pem, std::string_view key_pem,
                         std::string_view ca_pem) {
  StatusOr<Cert> cert = readCert(cert_pem);
  StatusOr<Key> key = readKey(key_pem);
  StatusOr<Cert> ca = readCert(ca_pem);
  if (!cert.ok() || !key.ok() || !ca.ok()) return false;
  if (X509_check_private_key(cert->get(), key->get()) != 1) return false;
  EVP_PKEY* ca_public = X509_get0_pubkey(ca->get());
  return ca_public != nullptr && X509_verify(cert->get(), ca_public) == 1;
}

StatusOr<std::string> readCertificateFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return unavailable("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return invalidArgument(path + " holds no PEM certificate");
  }
  return ss.str();
}

}  // namespace rsc::controller::http
