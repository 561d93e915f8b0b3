// LeaderForwarder: on a replica that does not lead, sends an inventory
// request on to the leader (whose URL the leader publishes in the Lease) and
// returns the leader's answer, so that a driver may push to any replica.
// The driver's own Authorization header goes along: the leader checks it.
// Thread-safe; forward() blocks its caller (an inventory worker thread).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "client/http_transport.h"
#include "common/clock.h"
#include "controller/inventory/http.h"

namespace rsc::controller {

struct LeaderForwarderOptions {
  Clock* clock = nullptr;
  // Returns the leader's inventory URL ("" while unknown).
  std::function<std::string()> leader_url;
  // Returns this replica's own URL, never forwarded to.
  std::string own_url;
  // PEM bundle that the leader's certificate must chain to (for https).
  std::string ca_pem;
  // The name the leader's certificate is checked against, if not its host.
  std::string tls_server_name;
};

class LeaderForwarder {
 public:
  explicit LeaderForwarder(LeaderForwarderOptions options) : options_(std::move(options)) {}

  // Returns the leader's answer, or nullopt when there is no leader to ask
  // or it cannot be reached (the caller answers 503).
  std::optional<inventory::HttpResponse> forward(const inventory::HttpRequest& request);

 private:
  LeaderForwarderOptions options_;
  std::mutex mu_;
  std::string url_;                                   // guarded by mu_
  std::shared_ptr<client::HttpTransport> transport_;  // guarded by mu_
};

}  // namespace rsc::controller
