#include "controller/http/certificates.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cctype>
#include <chrono>
#include <memory>
#include <string>

namespace rsc::controller::http {
namespace {

using std::chrono::hours;

// 2027-01-01T00:00:00Z.
const Clock::SystemTime kNow = std::chrono::system_clock::from_time_t(1798761600);

CertificateRequest request(const std::string& name, std::vector<std::string> names = {}) {
  CertificateRequest r;
  r.common_name = name;
  r.names = std::move(names);
  r.not_before = kNow;
  r.validity = hours(48);
  return r;
}

X509* readX509(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return cert;
}

// Verifies `leaf` for `host` at `at` against a store holding only `ca`, as a
// driver that trusts the published bundle does. Returns the OpenSSL error.
int verify(const std::string& leaf_pem, const std::string& ca_pem, const std::string& host,
           Clock::SystemTime at) {
  X509* leaf = readX509(leaf_pem);
  X509* ca = readX509(ca_pem);
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_SSL_SERVER);
  X509_VERIFY_PARAM_set_time(param, std::chrono::system_clock::to_time_t(at));
  if (host.find(':') != std::string::npos || std::isdigit(static_cast<unsigned char>(host[0]))) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
  }
  const int ok = X509_verify_cert(ctx);
  const int error = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  X509_free(ca);
  X509_free(leaf);
  return error;
}

TEST(Certificates, ServingCertificateChainsToItsCaForItsNamesOnly) {
  StatusOr<TlsKeyPair> ca = makeCertificateAuthority(request("test-ca"));
  ASSERT_TRUE(ca.ok()) << ca.status().toString();
  StatusOr<TlsKeyPair> leaf = issueServingCertificate(
      request("inventory", {"rsc.dra.svc", "rsc.dra.svc.cluster.local", "10.0.0.7"}), &*ca);
  ASSERT_TRUE(leaf.ok()) << leaf.status().toString();

  EXPECT_EQ(verify(leaf->cert_pem, ca->cert_pem, "rsc.dra.svc", kNow), X509_V_OK);
  EXPECT_EQ(verify(leaf->cert_pem, ca->cert_pem, "rsc.dra.svc.cluster.local", kNow), X509_V_OK);
  EXPECT_EQ(verify(leaf->cert_pem, ca->cert_pem, "10.0.0.7", kNow), X509_V_OK);
  EXPECT_EQ(verify(leaf->cert_pem, ca->cert_pem, "other.dra.svc", kNow),
            X509_V_ERR_HOSTNAME_MISMATCH);
  EXPECT_EQ(verify(leaf->cert_pem, ca->cert_pem, "10.0.0.8", kNow), X509_V_ERR_IP_ADDRESS_MISMATCH);
  // Backdated by an hour for lagging clocks, expired after its validity.
  EXPECT_EQ(verify(leaf->cert_pem, ca->cert_pem, "rsc.dra.svc", kNow - std::chrono::minutes(30)),
            X509_V_OK);
  EXPECT_EQ(verify(leaf->cert_pem, ca->cert_pem, "rsc.dra.svc", kNow + hours(49)),
            X509_V_ERR_CERT_HAS_EXPIRED);

  // Another CA does not vouch for it.
  StatusOr<TlsKeyPair> other = makeCertificateAuthority(request("other-ca"));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(verify(leaf->cert_pem, other->cert_pem, "rsc.dra.svc", kNow), X509_V_OK);

  EXPECT_TRUE(certificateSignedBy(leaf->cert_pem, leaf->key_pem, ca->cert_pem));
  EXPECT_FALSE(certificateSignedBy(leaf->cert_pem, leaf->key_pem, other->cert_pem));
  EXPECT_FALSE(certificateSignedBy(leaf->cert_pem, ca->key_pem, ca->cert_pem));
}

TEST(Certificates, SelfSignedServingCertificateVerifiesAgainstItself) {
  StatusOr<TlsKeyPair> self = issueServingCertificate(request("metrics", {"localhost"}), nullptr);
  ASSERT_TRUE(self.ok()) << self.status().toString();
  EXPECT_EQ(verify(self->cert_pem, self->cert_pem, "localhost", kNow), X509_V_OK);
  EXPECT_FALSE(issueServingCertificate(request("nameless"), nullptr).ok());
}

TEST(Certificates, ReadsValidity) {
  StatusOr<TlsKeyPair> ca = makeCertificateAuthority(request("test-ca"));
  ASSERT_TRUE(ca.ok());
  StatusOr<Validity> validity = certificateValidity(ca->cert_pem);
  ASSERT_TRUE(validity.ok()) << validity.status().toString();
  EXPECT_EQ(validity->not_before, kNow - hours(1));
  EXPECT_EQ(validity->not_after, kNow + hours(48));
  EXPECT_FALSE(certificateValidity("not a certificate").ok());
}

}  // namespace
}  // namespace rsc::controller::http
