// BodyDigester: AES-128-GMAC tags of pushed bodies.
#include "controller/inventory/body_digest.h"

#include <gtest/gtest.h>

#include <string>

namespace rsc::controller::inventory {
namespace {

// Test Case 1 of the GCM specification (McGrew and Viega): the zero key, the
// zero 96-bit nonce, nothing to authenticate.
TEST(BodyDigester, IsTheGmacTagOfTheBody) {
  const BodyDigester zero_key(std::array<uint8_t, 16>{});
  EXPECT_EQ(zero_key.digest("").hex(), "58e2fccefa7e3061367f1d57a4e7455a");
}

TEST(BodyDigester, EqualBodiesAndOnlyThoseShareADigest) {
  const BodyDigester digester;
  std::string body(200'000, 'x');
  const Digest128 first = digester.digest(body);
  EXPECT_EQ(digester.digest(std::string(body)), first);
  // One bit anywhere, one byte more or less.
  for (const size_t at : {size_t{0}, size_t{15}, size_t{16}, body.size() / 2, body.size() - 1}) {
    std::string other = body;
    other[at] ^= 1;
    EXPECT_NE(digester.digest(other), first) << at;
  }
  EXPECT_NE(digester.digest(body + " "), first);
  EXPECT_NE(digester.digest(body.substr(1)), first);
  // Another process, another key.
  EXPECT_NE(BodyDigester().digest(body), first);
}

}  // namespace
}  // namespace rsc::controller::inventory
