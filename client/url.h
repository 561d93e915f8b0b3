// URLs as the client takes them: the API server's (kubeconfig, in-cluster),
// an HTTP proxy's, and the inventory endpoints pulled from. Split once,
// here, into scheme, authority and the rest. Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace rsc::client {

struct Url {
  std::string scheme;                   // "https"
  std::optional<std::string> userinfo;  // before an '@' of the authority
  std::string host;                     // with its port as written: "10.0.0.1:6443", "[::1]"
  std::string rest;                     // path, query and fragment: "/prefix?x", ""

  // "host:port", with the scheme's port (443, else 80) when none is written.
  std::string hostPort() const;
  // "scheme://[userinfo@]host": the URL without its rest.
  std::string origin() const;
};

// Splits "scheme://authority[/?#rest]". Fails, quoting the text, when it has
// no "://"; the host may be empty.
StatusOr<Url> parseUrl(std::string_view text);

// As parseUrl, for an http:// or https:// URL with a host.
StatusOr<Url> parseHttpUrl(std::string_view text);

}  // namespace rsc::client
