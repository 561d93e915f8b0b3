// KubeApi: the controller's only way to talk to Kubernetes. Typed calls for
// the resources it uses; every call returns a Status or StatusOr and never
// throws. RestKubeApi (rest_kube_api.h) talks to a real API server;
// FakeKubeApi (test/fakes) is an in-memory one for unit tests.
// Implementations are thread-safe: any thread may call any method at any time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "client/objects.h"
#include "client/resource_slice.h"
#include "common/status.h"

namespace rsc::client {

// Query parameters of list, watch and delete-collection calls.
struct ListOptions {
  // Namespaced resources (Services, EndpointSlices, Pods): the namespace to list
  // or watch; empty: every namespace. Cluster-scoped resources ignore it.
  std::string namespace_;
  std::string label_selector;
  std::string field_selector;
  // Unset: a consistent read. "0": any cached state. Otherwise see
  // resource_version_match.
  std::optional<std::string> resource_version;
  std::string resource_version_match;  // "", "NotOlderThan" or "Exact"
  int64_t limit = 0;                   // page size; 0: no paging
  std::string continue_token;
  // Watch only: the server ends the stream after this many seconds.
  std::optional<int64_t> timeout_seconds;
  // Watch only.
  bool allow_watch_bookmarks = false;
  // Watch of ResourceSlices only (optional): the slices the caller holds, whose
  // states the watch reads up to their metadata (resourceSliceFromText).
  HeldSlice held_slice;
};

// Conditions under which a delete may happen (metav1.Preconditions).
struct Preconditions {
  std::optional<std::string> uid;
  std::optional<std::string> resource_version;
};

template <typename T>
struct ObjectList {
  std::vector<T> items;
  std::string resource_version;
  std::string continue_token;  // empty: this was the last page
  std::optional<int64_t> remaining_item_count;
};

using ResourceSliceList = ObjectList<ResourceSlice>;
using PartialObjectMetadataList = ObjectList<PartialObjectMetadata>;
using ServiceList = ObjectList<Service>;
using EndpointSliceList = ObjectList<EndpointSlice>;
using PodList = ObjectList<Pod>;

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

template <typename T>
struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // ADDED, MODIFIED, DELETED: the object (DELETED carries its last state).
  // BOOKMARK: only object.metadata.resource_version (and annotations) are set.
  T object;
  // ERROR: the metav1.Status of the event, mapped like any API error
  // (a 410 becomes StatusCode::kGone).
  Status error;
};

// Called for each event of a watch, on the watching thread. Returning false
// ends the watch.
template <typename T>
using WatchHandler = std::function<bool(const WatchEvent<T>&)>;

class KubeApi {
 public:
  virtual ~KubeApi() = default;

  // resource.k8s.io/v1 ResourceSlices (cluster-scoped).
  virtual StatusOr<ResourceSlice> getResourceSlice(const std::string& name) = 0;
  virtual StatusOr<ResourceSliceList> listResourceSlices(const ListOptions& options) = 0;
  // Watches until the server ends the stream (OK), the handler returns false
  // (OK), `stop` is requested (Cancelled), or an error happens. An ERROR event
  // is delivered to the handler, then the stream ends. The caller resumes
  // from the last resourceVersion it saw.
  virtual Status watchResourceSlices(const ListOptions& options,
                                     const WatchHandler<ResourceSlice>& handler,
                                     std::stop_token stop) = 0;
  // Uses metadata.generateName when metadata.name is empty.
  virtual StatusOr<ResourceSlice> createResourceSlice(const ResourceSlice& slice) = 0;
  // The same create with dryRun=All: validated, defaulted and answered as it
  // would be stored, and never stored (nothing reaches etcd, no watch event).
  // For learning what the server keeps of a slice.
  virtual StatusOr<ResourceSlice> dryRunCreateResourceSlice(const ResourceSlice& slice) = 0;
  // Requires metadata.resourceVersion: a stale one fails with kConflict.
  virtual StatusOr<ResourceSlice> updateResourceSlice(const ResourceSlice& slice) = 0;
  // A missing slice is NotFound; failed preconditions are kConflict.
  virtual Status deleteResourceSlice(const std::string& name,
                                     const Preconditions& preconditions) = 0;
  virtual Status deleteResourceSlices(const ListOptions& options) = 0;

  // coordination.k8s.io/v1 Leases.
  virtual StatusOr<Lease> getLease(const std::string& namespace_, const std::string& name) = 0;
  virtual StatusOr<Lease> createLease(const Lease& lease) = 0;
  virtual StatusOr<Lease> updateLease(const Lease& lease) = 0;

  // v1 Secrets and ConfigMaps (the inventory API's self-signed certificate
  // and its CA bundle). Updates require metadata.resourceVersion: a stale one
  // fails with kConflict; a create of an existing one with kAlreadyExists.
  virtual StatusOr<Secret> getSecret(const std::string& namespace_, const std::string& name) = 0;
  virtual StatusOr<Secret> createSecret(const Secret& secret) = 0;
  virtual StatusOr<Secret> updateSecret(const Secret& secret) = 0;
  virtual StatusOr<ConfigMap> getConfigMap(const std::string& namespace_,
                                           const std::string& name) = 0;
  virtual StatusOr<ConfigMap> createConfigMap(const ConfigMap& config_map) = 0;
  virtual StatusOr<ConfigMap> updateConfigMap(const ConfigMap& config_map) = 0;

  // GET /version: the release the API server runs.
  virtual StatusOr<ServerVersion> getServerVersion() = 0;

  // v1 Nodes.
  virtual StatusOr<Node> getNode(const std::string& name) = 0;
  // Every Node's metadata alone (meta.k8s.io/v1 PartialObjectMetadata), for
  // the Node cache: no specs and statuses cross the wire. The watch behaves as
  // watchResourceSlices does.
  virtual StatusOr<PartialObjectMetadataList> listNodeMetadata(const ListOptions& options) = 0;
  virtual Status watchNodeMetadata(const ListOptions& options,
                                   const WatchHandler<PartialObjectMetadata>& handler,
                                   std::stop_token stop) = 0;

  // v1 Services and discovery.k8s.io/v1 EndpointSlices of
  // options.namespace_ (empty: every namespace), for the discovery of
  // drivers' inventory endpoints (pull mode). The watches behave as
  // watchResourceSlices does.
  virtual StatusOr<ServiceList> listServices(const ListOptions& options) = 0;
  virtual Status watchServices(const ListOptions& options, const WatchHandler<Service>& handler,
                               std::stop_token stop) = 0;
  virtual StatusOr<EndpointSliceList> listEndpointSlices(const ListOptions& options) = 0;
  virtual Status watchEndpointSlices(const ListOptions& options,
                                     const WatchHandler<EndpointSlice>& handler,
                                     std::stop_token stop) = 0;
  // v1 Pods of options.namespace_, trimmed to their identity (client::Pod):
  // whom an endpoint's targetRef names, for pull-mode discovery.
  virtual StatusOr<PodList> listPods(const ListOptions& options) = 0;
  virtual Status watchPods(const ListOptions& options, const WatchHandler<Pod>& handler,
                           std::stop_token stop) = 0;

  // Reviews: the returned object carries the status the server filled in.
  virtual StatusOr<TokenReview> createTokenReview(const TokenReview& review) = 0;
  virtual StatusOr<SubjectAccessReview> createSubjectAccessReview(
      const SubjectAccessReview& review) = 0;

  // events.k8s.io/v1 Events. An Event about a cluster-scoped object (no
  // metadata.namespace, no regarding.namespace) goes to "default". The
  // answer carries the stored name and namespace, for patchEventSeries.
  virtual StatusOr<Event> createEvent(const Event& event) = 0;
  // Sets the series (count, lastObservedTime) of a stored Event, with a
  // JSON merge patch: a repeat of the Event, as client-go's recorder does.
  virtual StatusOr<Event> patchEventSeries(const std::string& namespace_, const std::string& name,
                                           const EventSeries& series) = 0;
};

}  // namespace rsc::client
