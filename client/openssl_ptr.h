// Owners of OpenSSL objects, freed on every path: for the code that reads
// certificates and keys (client/http_transport.cc, the CA bundles and client
// certificates of kubeconfigs; controller/http/certificates.cc, the
// inventory API's own CA). Plain RAII, no shared state.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>

namespace rsc::client {

struct OpenSslFree {
  void operator()(X509* x) const { X509_free(x); }
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  void operator()(BIO* b) const { BIO_free(b); }
  void operator()(X509_STORE* s) const { X509_STORE_free(s); }
};
using X509Ptr = std::unique_ptr<X509, OpenSslFree>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslFree>;
using BioPtr = std::unique_ptr<BIO, OpenSslFree>;
using StorePtr = std::unique_ptr<X509_STORE, OpenSslFree>;

}  // namespace rsc::client
