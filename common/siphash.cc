#include "common/siphash.h"

#include <bit>
#include <random>

namespace rsc {

namespace {

// The initial state: "somepseudorandomlygeneratedbytes" as four words.
constexpr uint64_t kInit0 = 0x736f6d6570736575ULL;
constexpr uint64_t kInit1 = 0x646f72616e646f6dULL;
constexpr uint64_t kInit2 = 0x6c7967656e657261ULL;
constexpr uint64_t kInit3 = 0x7465646279746573ULL;
// SipHash-2-4: two rounds per message word, four per output word.
constexpr int kCompressionRounds = 2;
constexpr int kFinalizationRounds = 4;

// Eight bytes as a little-endian word, whatever the host's byte order; the
// compiler makes one load of it on a little-endian host.
uint64_t loadLittleEndian(const uint8_t* p) {
  uint64_t word = 0;
  for (int i = 7; i >= 0; --i) word = (word << 8) | p[i];
  return word;
}

struct State {
  uint64_t v0;
  uint64_t v1;
  uint64_t v2;
  uint64_t v3;

  void round() {
    v0 += v1;
    v1 = std::rotl(v1, 13);
    v1 ^= v0;
    v0 = std::rotl(v0, 32);
    v2 += v3;
    v3 = std::rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = std::rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = std::rotl(v1, 17);
    v1 ^= v2;
    v2 = std::rotl(v2, 32);
  }

  void absorb(uint64_t word) {
    v3 ^= word;
    for (int i = 0; i < kCompressionRounds; ++i) round();
    v0 ^= word;
  }

  uint64_t squeeze() {
    for (int i = 0; i < kFinalizationRounds; ++i) round();
    return v0 ^ v1 ^ v2 ^ v3;
  }
};

char hexDigit(unsigned value) { return "0123456789abcdef"[value & 0xf]; }

}  // namespace

SipHashKey SipHashKey::fromBytes(const std::array<uint8_t, 16>& bytes) {
  return {loadLittleEndian(bytes.data()), loadLittleEndian(bytes.data() + 8)};
}

SipHashKey SipHashKey::random() {
  std::random_device device;
  const auto word = [&] {
    return (static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(device());
  };
  const uint64_t k0 = word();
  return {k0, word()};
}

std::string Digest128::hex() const {
  std::string out;
  out.reserve(32);
  for (const uint64_t word : {lo, hi}) {
    for (int byte = 0; byte < 8; ++byte) {
      const auto value = static_cast<unsigned>(word >> (8 * byte));
      out.push_back(hexDigit(value >> 4));
      out.push_back(hexDigit(value));
    }
  }
  return out;
}

SipHasher128::SipHasher128(const SipHashKey& key)
    : v0_(key.k0 ^ kInit0),
      // The 128-bit variant marks the state so that its first output word
      // differs from the 64-bit variant's output.
      v1_(key.k1 ^ kInit1 ^ 0xee),
      v2_(key.k0 ^ kInit2),
      v3_(key.k1 ^ kInit3) {}

void SipHasher128::update(std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  length_ += n;
  State s{v0_, v1_, v2_, v3_};
  // Complete a word begun by an earlier update.
  if (tail_size_ > 0) {
    while (tail_size_ < 8 && n > 0) {
      tail_[tail_size_++] = *p++;
      --n;
    }
    if (tail_size_ < 8) return;
    s.absorb(loadLittleEndian(tail_.data()));
    tail_size_ = 0;
  }
  // Whole words, then keep what is left for the next update or finish().
  for (; n >= 8; p += 8, n -= 8) s.absorb(loadLittleEndian(p));
  for (size_t i = 0; i < n; ++i) tail_[i] = p[i];
  tail_size_ = n;
  v0_ = s.v0;
  v1_ = s.v1;
  v2_ = s.v2;
  v3_ = s.v3;
}

Digest128 SipHasher128::finish() const {
  State s{v0_, v1_, v2_, v3_};
  // The last word: the remaining bytes, with the length's low byte on top.
  uint64_t last = (length_ & 0xff) << 56;
  for (size_t i = 0; i < tail_size_; ++i) last |= static_cast<uint64_t>(tail_[i]) << (8 * i);
  s.absorb(last);
  Digest128 digest;
  s.v2 ^= 0xee;
  digest.lo = s.squeeze();
  s.v1 ^= 0xdd;
  digest.hi = s.squeeze();
  return digest;
}

Digest128 sipHash128(const SipHashKey& key, std::string_view bytes) {
  SipHasher128 hasher(key);
  hasher.update(bytes);
  return hasher.finish();
}

}  // namespace rsc
