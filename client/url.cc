#include "client/url.h"

#include <algorithm>

#include "common/strings.h"

namespace rsc::client {

std::string Url::hostPort() const {
  // A port follows the last ':', and outside the brackets of an IPv6 address.
  const size_t colon = host.rfind(':');
  if (colon != std::string::npos && (host.front() != '[' || host.find(']') < colon)) return host;
  return host + (scheme == "https" ? ":443" : ":80");
}

std::string Url::origin() const {
  return scheme + "://" + (userinfo ? *userinfo + "@" : "") + host;
}

StatusOr<Url> parseUrl(std::string_view text) {
  const size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos)
    return invalidArgument(inQuotes(text) + " is not a URL");
  Url url;
  url.scheme = std::string(text.substr(0, scheme_end));
  const size_t start = scheme_end + 3;
  const size_t end = std::min(text.find_first_of("/?#", start), text.size());
  std::string_view authority = text.substr(start, end - start);
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    url.userinfo = std::string(authority.substr(0, at));
    authority.remove_prefix(at + 1);
  }
  url.host = std::string(authority);
  url.rest = std::string(text.substr(end));
  return url;
}

StatusOr<Url> parseHttpUrl(std::string_view text) {
  StatusOr<Url> url = parseUrl(text);
  if (!url.ok() || (url->scheme != "http" && url->scheme != "https")) {
    return invalidArgument(inQuotes(text) + " is not an http:// or https:// URL");
  }
  if (url->host.empty()) return invalidArgument(inQuotes(text) + " names no host");
  return url;
}

}  // namespace rsc::client
