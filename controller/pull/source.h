// SourceSpec: one inventory endpoint to pull from, as configured (--inventory-source) or as
// discovered from a labelled Service and its EndpointSlices (discovery.h). Plain data: the
// Poller builds the transport from it, so discovery needs no network and tests compare specs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "controller/pool/caller.h"

namespace rsc::controller::pull {

// The label that makes a Service (and the EndpointSlices the EndpointSlice controller copies
// it to) an inventory endpoint of the driver it names.
inline constexpr char kDriverLabel[] = "resourceslice.dra.k8s.io/driver";
// The name of the Service port (and EndpointSlice port) the inventory is served on. HTTPS when
// its appProtocol is "https", else HTTP.
inline constexpr char kInventoryPortName[] = "inventory";
// Service annotations: the path to GET (default kDefaultInventoryPath), the PEM bundle that
// signs the endpoints' serving certificates (default --pull-ca-file, else the system store),
// and the scope of each endpoint: "node" (the default: an endpoint publishes only pools of the
// node its EndpointSlice entry names, as a pod's token on the push API) or "cluster" (no node:
// node-local pools only with --allow-unbound-node-pools).
inline constexpr char kPathAnnotation[] = "resourceslice.dra.k8s.io/inventory-path";
inline constexpr char kCaAnnotation[] = "resourceslice.dra.k8s.io/inventory-ca";
inline constexpr char kScopeAnnotation[] = "resourceslice.dra.k8s.io/inventory-scope";

// Why a discovered source is not pulled; its name (ignoredReasonName) is the reason label of
// resourceslice_controller_pull_sources_ignored_total and of the log lines.
enum class IgnoredReason {
  kOverLimit,   // --pull-max-sources sources are pulled already (the poller)
  kInvalid,     // a URL or CA that cannot work (the poller)
  kUnbound,     // a Service naming a driver not bound to its namespace (discovery)
  kUnverified,  // an endpoint no Pod vouches for (discovery)
};
std::string_view ignoredReasonName(IgnoredReason reason);

struct SourceSpec {
  std::string driver;
  // Stable and unique among all sources: "flag/<driver>" for --inventory-source,
  // "<namespace>/<service>/<address>:<port>" for a discovered endpoint. A spec whose id is kept
  // across discovery updates keeps its state (ETag, last success, pools).
  std::string id;
  // What to GET: "https://10.1.2.3:8443/v1/inventory".
  std::string url;
  // Who the endpoint speaks as, for the push API's node restriction: unrestricted for a source
  // the operator configured; for a discovered endpoint the node of its EndpointSlice entry
  // (scope "node") or no node (scope "cluster", or no nodeName in the entry).
  pool::Caller caller;
  // PEM bundle for an https endpoint (the Service's annotation); empty: --pull-ca-file, else
  // the system's trust store.
  std::string ca_pem;
  // The name the endpoint's certificate is checked against when `url` names an address:
  // "<service>.<namespace>.svc" for a discovered endpoint; empty: the URL's host.
  std::string tls_server_name;

  friend bool operator==(const SourceSpec&, const SourceSpec&) = default;
};

}  // namespace rsc::controller::pull
