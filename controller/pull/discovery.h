// Discovery of inventory endpoints in the cluster (pull mode, issue 18): Services labelled with
// kDriverLabel and a port named kInventoryPortName, and the ready endpoints of their
// EndpointSlices, become SourceSpecs for the Poller. discoveredSources() is the pure rule;
// SourceDiscovery keeps it current from Service and EndpointSlice informers and tells main the
// whole list whenever it changes. Threading contract: see SourceDiscovery.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "client/informer.h"
#include "client/kube_api.h"
#include "common/clock.h"
#include "common/log.h"
#include "controller/pull/source.h"

namespace rsc::controller::pull {

// The label the EndpointSlice controller puts on the slices of a Service.
inline constexpr char kServiceNameLabel[] = "kubernetes.io/service-name";
// Values of kScopeAnnotation.
inline constexpr char kScopeNode[] = "node";
inline constexpr char kScopeCluster[] = "cluster";

struct DiscoveryOptions {
  // The namespaces whose Services count (--pull-namespace); empty: every namespace.
  std::vector<std::string> namespaces;
};

// A labelled Service that was skipped, and why ("annotation ...: must start with '/'"), for
// the caller to log with the Service's name.
struct DiscoveryProblem {
  std::string namespace_;
  std::string service;
  std::string message;
  friend bool operator==(const DiscoveryProblem&, const DiscoveryProblem&) = default;
};

struct DiscoveryResult {
  std::vector<SourceSpec> sources;         // sorted by id, ids unique
  std::vector<DiscoveryProblem> problems;  // sorted by namespace and Service name
};

// The inventory sources the Services and EndpointSlices describe:
// - a Service counts when its namespace is allowed, its kDriverLabel names a valid driver and
//   it has a port named kInventoryPortName; else it is skipped (reported unless the label is
//   missing or the namespace not allowed);
// - its EndpointSlices are those of its namespace labelled kServiceNameLabel=<its name>;
//   hand-made EndpointSlices must carry that label, and kDriverLabel too, because
//   SourceDiscovery's informers select EndpointSlices by it (the EndpointSlice controller
//   copies the Service's labels);
// - each address (IPv4 or IPv6; FQDN slices are ignored) of each endpoint that is ready (true
//   or unset) and not terminating, on the slice's port named kInventoryPortName, is one
//   source: id "<namespace>/<service>/<address>:<port>" (IPv6 in brackets), https when the
//   slice port's appProtocol (else the Service port's) is "https", path from kPathAnnotation
//   (default kDefaultInventoryPath), for https the CA from kCaAnnotation and the server name
//   "<service>.<namespace>.svc"; kScopeAnnotation "node" (the default) binds the source to the
//   endpoint's nodeName when it has one, "cluster" to no node. A bad path or scope skips the
//   Service with a problem. An address:port listed twice (two slices of one Service) is one
//   source, taken from the slice whose name sorts first.
// Equal inputs, in any order, give equal results.
DiscoveryResult discoveredSources(const std::vector<client::Service>& services,
                                  const std::vector<client::EndpointSlice>& endpoint_slices,
                                  const DiscoveryOptions& options);

// Runs an Informer<Services> and an Informer<EndpointSlices> (label-selected by kDriverLabel)
// per allowed namespace, or one cluster-wide pair when DiscoveryOptions::namespaces is empty,
// and calls on_change with discoveredSources() of their stores: once when all informers have
// synced (also when the list is empty), then after each event that changes the list (an event
// that leaves it equal calls nothing). Problems are logged with the Service's namespace and
// name when they appear or change, rate-limited per Service.
// Threading: on_change runs on an informer's thread or on the thread that waits for the first
// sync, one call at a time and in order of the lists' computation; it must not call back into
// this object. start(), stop() and the accessors may be called from any thread.
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
  // One namespace's informers ("" for all namespaces).
  struct Watch {
    std::unique_ptr<client::Informer<client::Services>> services;
    std::unique_ptr<client::Informer<client::EndpointSlices>> endpoint_slices;
  };

  // Recomputes the list from the stores and reports it when it changed or was never reported.
  void refresh();
  void logProblems(const std::vector<DiscoveryProblem>& problems);

  const DiscoveryOptions options_;
  const OnChange on_change_;
  log::Throttle problem_log_;
  std::vector<Watch> watches_;

  // Serialises refreshes, so that on_change sees the lists in the order they were computed.
  std::mutex refresh_mu_;
  std::map<std::string, std::string> logged_problems_;  // "ns/name" -> message; refresh_mu_

  mutable std::mutex mu_;
  mutable std::condition_variable_any synced_cv_;
  bool informers_synced_ = false;    // guarded by mu_: events refresh from now on
  bool reported_ = false;            // guarded by mu_: on_change had the first list
  bool stopped_ = false;             // guarded by mu_
  std::vector<SourceSpec> sources_;  // guarded by mu_: as last reported

  std::jthread sync_waiter_;
};

}  // namespace rsc::controller::pull
