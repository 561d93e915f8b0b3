#include "client/url.h"

#include <gtest/gtest.h>

#include <string_view>
#include <utility>
#include <vector>

namespace rsc::client {
namespace {

TEST(Url, SplitsSchemeAuthorityAndRest) {
  StatusOr<Url> url = parseUrl("https://u:p@10.0.0.1:6443/prefix/api?x=1#f");
  ASSERT_TRUE(url.ok()) << url.status().message();
  EXPECT_EQ(url->scheme, "https");
  EXPECT_EQ(url->userinfo, "u:p");
  EXPECT_EQ(url->host, "10.0.0.1:6443");
  EXPECT_EQ(url->rest, "/prefix/api?x=1#f");
  EXPECT_EQ(url->origin(), "https://u:p@10.0.0.1:6443");

  url = parseUrl("http://[::1]:9000?x=1");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "[::1]:9000");
  EXPECT_EQ(url->rest, "?x=1");
  EXPECT_EQ(url->userinfo, std::nullopt);

  url = parseUrl("socks5://@");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->scheme, "socks5");
  EXPECT_EQ(url->userinfo, "");
  EXPECT_EQ(url->host, "");
}

TEST(Url, HostPortWritesTheSchemesPort) {
  const std::vector<std::pair<std::string_view, std::string_view>> cases = {
      {"https://kubernetes.default.svc", "kubernetes.default.svc:443"},
      {"http://proxy/x", "proxy:80"},
      {"https://10.0.0.1:6443/prefix", "10.0.0.1:6443"},
      {"https://[fd00::1]", "[fd00::1]:443"},
      {"https://[fd00::1]:6443", "[fd00::1]:6443"},
      {"https://user@host", "host:443"},  // no user information
  };
  for (const auto& [text, want] : cases) EXPECT_EQ(parseUrl(text)->hostPort(), want) << text;
}

TEST(Url, RefusalsQuoteTheText) {
  EXPECT_EQ(parseUrl("driver:9000").status().message(), "\"driver:9000\" is not a URL");
  EXPECT_EQ(parseHttpUrl("ftp://x").status().message(),
            "\"ftp://x\" is not an http:// or https:// URL");
  EXPECT_EQ(parseHttpUrl("x").status().message(), "\"x\" is not an http:// or https:// URL");
  EXPECT_EQ(parseHttpUrl("https:///x").status().message(), "\"https:///x\" names no host");
  EXPECT_TRUE(parseHttpUrl("https://x").ok());
}

}  // namespace
}  // namespace rsc::client
