// Discovery of inventory endpoints in the cluster (pull mode): in the namespaces the operator
// bound each pulled driver to (--pull-driver), Services labelled with that driver and a port
// named kInventoryPortName, and the ready endpoints of their EndpointSlices that a Pod vouches
// for, become SourceSpecs for the Poller. discoveredSources() is the pure rule;
// SourceDiscovery keeps it current from Service and EndpointSlice informers and tells main the
// whole list whenever it changes. Threading contract: see SourceDiscovery.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "client/informer.h"
#include "client/kube_api.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/pull/source.h"

namespace rsc::controller::pull {

// The label the EndpointSlice controller puts on the slices of a Service.
inline constexpr char kServiceNameLabel[] = "kubernetes.io/service-name";
// Values of kScopeAnnotation.
inline constexpr char kScopeNode[] = "node";
inline constexpr char kScopeCluster[] = "cluster";

// The operator's declaration that `driver`'s inventory may be served from `namespace_`
// (--pull-driver=DRIVER=NAMESPACE[/SERVICEACCOUNT],...): only Services there that name the
// driver are discovered, and only endpoints whose targetRef Pod runs as `service_account`
// (when not empty). A driver bound nowhere is never discovered, whoever labels a Service.
struct PullBinding {
  std::string driver;
  std::string namespace_;
  std::string service_account;  // empty: any ServiceAccount of the namespace
  friend bool operator==(const PullBinding&, const PullBinding&) = default;
};

// Parses one --pull-driver value, "DRIVER=NAMESPACE[/SERVICEACCOUNT][,NAMESPACE[/SA]...]",
// into one binding per namespace. InvalidArgument naming the part that is wrong: a driver or
// namespace name that is not valid, an empty list, a namespace given twice.
StatusOr<std::vector<PullBinding>> parsePullDriver(std::string_view value);

struct DiscoveryOptions {
  // Who may serve which driver (--pull-driver); discovery reads these namespaces only.
  std::vector<PullBinding> bindings;
  // An endpoint was refused when it appeared (kUnbound or kUnverified): counted once per
  // endpoint and reason while it stays refused. Optional; called on the thread that computed
  // the list.
  std::function<void(IgnoredReason reason)> on_refused;

  // The namespaces of the bindings, sorted, each once.
  std::vector<std::string> namespaces() const;
  // The binding of `driver` in `ns`; nullptr when the driver is not bound there.
  const PullBinding* binding(std::string_view driver, std::string_view ns) const;
};

// Why a labelled Service or one of its endpoints is not pulled (DiscoveryResult::refused):
// - IgnoredReason::kUnbound: the Service names a driver that is not bound to its namespace;
// - IgnoredReason::kUnverified: the endpoint has no targetRef Pod that vouches for it: the Pod
//   does not exist in the Service's namespace, is being deleted, has another IP, runs on
//   another node than the EndpointSlice says or on none, or runs as another ServiceAccount
//   than the binding names.

// A labelled Service that was skipped, and why ("annotation ...: must start with '/'"), for
// the caller to log with the Service's name.
struct DiscoveryProblem {
  std::string namespace_;
  std::string service;
  std::string message;
  friend bool operator==(const DiscoveryProblem&, const DiscoveryProblem&) = default;
};

// A Service ("<namespace>/<service>") or an endpoint (a source id) that is refused.
struct DiscoveryRefusal {
  std::string id;
  std::string driver;
  IgnoredReason reason = IgnoredReason::kUnverified;  // kUnbound or kUnverified
  std::string message;                                // what is wrong, for the log
  friend bool operator==(const DiscoveryRefusal&, const DiscoveryRefusal&) = default;
};

struct DiscoveryResult {
  std::vector<SourceSpec> sources;         // sorted by id, ids unique
  std::vector<DiscoveryProblem> problems;  // sorted by namespace and Service name
  std::vector<DiscoveryRefusal> refused;   // sorted by id, ids unique
};

// The inventory sources the Services, EndpointSlices and Pods describe:
// - a Service counts when its kDriverLabel names a valid driver that is bound to the Service's
//   namespace and it has a port named kInventoryPortName; a valid driver bound elsewhere (or
//   nowhere) refuses the Service (IgnoredReason::kUnbound); a bad label or port is a problem;
//   Services of namespaces no binding names are ignored (discovery never reads them);
// - its EndpointSlices are those of its namespace labelled kServiceNameLabel=<its name>;
//   hand-made EndpointSlices must carry that label, and kDriverLabel too, because
//   SourceDiscovery's informers select EndpointSlices by it (the EndpointSlice controller
//   copies the Service's labels);
// - each address (IPv4 or IPv6; FQDN slices are ignored) of each endpoint that is ready (true
//   or unset) and not terminating, on the slice's port named kInventoryPortName, is one
//   source: id "<namespace>/<service>/<address>:<port>" (IPv6 in brackets), https when the
//   slice port's appProtocol (else the Service port's) is "https", path from kPathAnnotation
//   (default kDefaultInventoryPath), for https the CA from kCaAnnotation and the server name
//   "<service>.<namespace>.svc";
// - an address is a source only when the endpoint's targetRef names a Pod of the Service's
//   namespace that vouches for it: it exists (and has the targetRef's uid, when given), is not
//   being deleted, has that address among its IPs, runs on a node (the EndpointSlice's
//   nodeName, when given, must be that node) and, when the binding names one, as its
//   ServiceAccount; else the address is refused (IgnoredReason::kUnverified). What an EndpointSlice
//   says is never believed on its own: anyone who may write one may write anything there;
// - kScopeAnnotation "node" (the default) binds the source to its Pod's node, "cluster" to no
//   node. A bad path or scope skips the Service with a problem. An address:port listed twice
//   (two slices of one Service) is one source, taken from the slice whose name sorts first.
// Equal inputs, in any order, give equal results.
DiscoveryResult discoveredSources(const std::vector<client::Service>& services,
                                  const std::vector<client::EndpointSlice>& endpoint_slices,
                                  const std::vector<client::Pod>& pods,
                                  const DiscoveryOptions& options);

// Runs an Informer<Services> and an Informer<EndpointSlices> (label-selected by kDriverLabel)
// and an Informer<Pods> (their identity alone) per bound namespace, never a cluster-wide one,
// and calls on_change with discoveredSources() of their stores: once when all informers have
// synced (also when the list is empty), then after events that change the list (events that
// leave it equal call nothing). Problems are logged with the Service's namespace and
// name when they appear or change, rate-limited per Service; refusals are logged (rate-limited)
// and counted (on_refused) when they appear.
// Threading: informer events only mark the list dirty; one thread of the discovery's own waits
// for the first sync, computes the first list, then recomputes it after each batch of events
// (events that arrive during a recomputation cost one more, not one each). on_change runs on
// that thread, one call at a time; it must not call back into this object. start(), stop()
// and the accessors may be called from any thread.
class SourceDiscovery {
 public:
  using OnChange = std::function<void(std::vector<SourceSpec>)>;

  SourceDiscovery(client::KubeApi& api, Clock& clock, DiscoveryOptions options, OnChange on_change);
  // Stops the informers.
  ~SourceDiscovery();

  SourceDiscovery(const SourceDiscovery&) = delete;
  SourceDiscovery& operator=(const SourceDiscovery&) = delete;

  // Starts the informers, each on a thread of its own. Call at most once.
  void start();
  // Stops and joins every thread; on_change is not called after it returns.
  void stop();

  // True once every informer has synced and on_change has had the first list.
  bool hasSynced() const;
  // Blocks until hasSynced() or `stop` is requested; returns hasSynced().
  bool waitForSync(std::stop_token stop) const;
  // The list last passed to on_change (empty before the first).
  std::vector<SourceSpec> sources() const;

 private:
  // One bound namespace's informers.
  struct Watch {
    std::unique_ptr<client::Informer<client::Services>> services;
    std::unique_ptr<client::Informer<client::EndpointSlices>> endpoint_slices;
    std::unique_ptr<client::Informer<client::Pods>> pods;
  };

  // Recomputes the list from the stores and reports it when it changed or was never reported.
  void refresh();
  void logProblems(const std::vector<DiscoveryProblem>& problems);
  // Logs and counts the refusals that were not refused before.
  void reportRefusals(const std::vector<DiscoveryRefusal>& refused);

  const DiscoveryOptions options_;
  const OnChange on_change_;
  log::Throttle problem_log_;
  std::vector<Watch> watches_;

  // Serialises refreshes, so that on_change sees the lists in the order they were computed.
  std::mutex refresh_mu_;
  std::map<std::string, std::string> logged_problems_;       // "ns/name" -> message; refresh_mu_
  std::set<std::pair<std::string, IgnoredReason>> refused_;  // (id, reason); refresh_mu_
  log::Throttle refusal_log_;

  mutable std::mutex mu_;
  mutable std::condition_variable_any synced_cv_;
  bool informers_synced_ = false;  // guarded by mu_
  bool dirty_ = false;             // guarded by mu_: an event came since the last refresh
  mutable std::condition_variable_any dirty_cv_;
  bool reported_ = false;            // guarded by mu_: on_change had the first list
  bool stopped_ = false;             // guarded by mu_
  std::vector<SourceSpec> sources_;  // guarded by mu_: as last reported

  std::jthread sync_waiter_;
};

}  // namespace rsc::controller::pull
