// Caller: the identity behind a push or a pull, as the pool model's node restriction reads it.
// The inventory API's authenticators make one from a bearer token; pull mode makes one for each
// discovered endpoint. A plain value; knows nothing of tokens or HTTP.
#pragma once

#include <optional>
#include <string>

#include "client/objects.h"

namespace rsc::controller::pool {

// The identity behind a request.
struct Caller {
  client::UserInfo user;
  // The node the token is bound to, for tokens of pods: such a caller may
  // publish only pools with this nodeName. A caller without one (a central
  // driver component) may publish only pools that are not node-local.
  std::optional<std::string> node_name;
  // No node restriction at all (--auth=none).
  bool unrestricted = false;
  // How a refusal names the caller: "the token is bound to node ...".
  std::string subject = "the token";
  friend bool operator==(const Caller&, const Caller&) = default;
};

}  // namespace rsc::controller::pool
