#include "controller/inventory/body_digest.h"

#include <openssl/evp.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>

namespace rsc::controller::inventory {

namespace {

// The cipher, fetched from the default provider once (an implicit fetch on
// every use would cost a look-up per body).
const EVP_CIPHER* gcmCipher() {
  static EVP_CIPHER* const cipher = EVP_CIPHER_fetch(nullptr, "AES-128-GCM", nullptr);
  return cipher;
}

struct ContextFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};

}  // namespace

BodyDigester::BodyDigester() : key_() {
  std::random_device device;
  for (size_t i = 0; i < key_.size(); i += 4) {
    const uint32_t word = device();
    std::memcpy(key_.data() + i, &word, 4);
  }
}

Digest128 BodyDigester::digest(std::string_view body) const {
  // One fixed nonce: the key is secret and never used to encrypt, and the tag
  // is compared only inside this process.
  static constexpr std::array<unsigned char, 12> kNonce{};
  // A context per thread, re-keyed for each body: the key schedule costs a
  // few hundred nanoseconds, and digesters do not share state.
  thread_local std::unique_ptr<EVP_CIPHER_CTX, ContextFree> ctx(EVP_CIPHER_CTX_new());
  const EVP_CIPHER* cipher = gcmCipher();
  if (ctx == nullptr || cipher == nullptr ||
      EVP_EncryptInit_ex(ctx.get(), cipher, nullptr, key_.data(), kNonce.data()) != 1) {
    // Only when the default provider has no AES-GCM, which a working OpenSSL 3 always has.
    throw std::runtime_error("OpenSSL offers no AES-128-GCM for body digests");
  }
  int unused = 0;
  // The body is authenticated data; updates take an int length.
  while (!body.empty()) {
    const size_t n = std::min<size_t>(body.size(), INT_MAX / 2);
    EVP_EncryptUpdate(ctx.get(), nullptr, &unused,
                      reinterpret_cast<const unsigned char*>(body.data()), static_cast<int>(n));
    body.remove_prefix(n);
  }
  std::array<unsigned char, 16> tag{};
  EVP_EncryptFinal_ex(ctx.get(), tag.data(), &unused);
  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag.size()), tag.data());
  Digest128 out;
  std::memcpy(&out.lo, tag.data(), 8);
  std::memcpy(&out.hi, tag.data() + 8, 8);
  return out;
}

}  // namespace rsc::controller::inventory
