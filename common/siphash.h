// SipHash-2-4 with 128-bit output (Aumasson and Bernstein): a keyed hash for
// digests that a client must not be able to collide on purpose, as long as the
// key stays secret. The inventory API digests pushed bodies with it; the codec
// can digest devices with it (client/CODEC.md section 3.3).
// SipHashKey and Digest128 are plain values; a SipHasher128 is used by one
// thread at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rsc {

struct SipHashKey {
  uint64_t k0 = 0;  // key bytes 0..7, little-endian
  uint64_t k1 = 0;  // key bytes 8..15, little-endian

  // The key as the 16 bytes the SipHash paper writes it as.
  static SipHashKey fromBytes(const std::array<uint8_t, 16>& bytes);
  // A key from std::random_device, for one process: digests made with it are
  // compared only within that process.
  static SipHashKey random();
};

struct Digest128 {
  uint64_t lo = 0;  // output bytes 0..7, little-endian
  uint64_t hi = 0;  // output bytes 8..15, little-endian

  friend bool operator==(const Digest128&, const Digest128&) = default;
  // The 16 output bytes in order, as 32 lowercase hex digits (the form of the
  // paper's test vectors).
  std::string hex() const;
};

// Hashes a message given in pieces; the digest equals that of the pieces
// concatenated.
class SipHasher128 {
 public:
  explicit SipHasher128(const SipHashKey& key);

  void update(std::string_view bytes);
  // The digest of everything updated so far; the hasher is not changed.
  Digest128 finish() const;

 private:
  uint64_t v0_;
  uint64_t v1_;
  uint64_t v2_;
  uint64_t v3_;
  // Bytes of a word not yet complete, and the message length mod 2^64.
  std::array<uint8_t, 8> tail_{};
  size_t tail_size_ = 0;
  uint64_t length_ = 0;
};

// The digest of one message.
Digest128 sipHash128(const SipHashKey& key, std::string_view bytes);

}  // namespace rsc
