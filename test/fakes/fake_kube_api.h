// FakeKubeApi: an in-memory KubeApi for unit tests of everything above
// client/, modelled on client-go's ObjectTracker, reactors and
// FakeControllerSource::ResetWatch. It keeps objects with a global
// resourceVersion, fans watch events out to blocking watches, records every
// call, and lets tests inject faults before the default behaviour.
// Thread-safe: any method may be called from any thread, also from reactors.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "client/kube_api.h"
#include "common/clock.h"
#include "common/status.h"
#include "test/fakes/blocked_threads.h"

namespace rsc::testing {

struct FakeKubeApiOptions {
  // Events kept for watches that start from an older resourceVersion; a watch
  // from before the oldest kept event gets an ERROR 410 event, like the API
  // server's watch cache.
  size_t watch_history = 1000;
  // Seeds generateName suffixes and UIDs, so that names are stable per test.
  uint64_t seed = 1;
  // When set, told how many watches wait for an event with none left to
  // deliver (their threads are blocked until the fake changes); must outlive
  // the fake.
  BlockedThreads* blocked = nullptr;
};

// What the fake emulates, for ResourceSlices: a global, monotonically
// increasing resourceVersion (integers as strings); uid, creationTimestamp
// (from the Clock) and generateName (5 random characters); metadata.generation
// starting at 1 and bumped when the spec changes; optimistic concurrency
// (stale resourceVersion -> kConflict); an update that changes nothing is a
// no-op (same resourceVersion, no event); immutable spec.driver and
// spec.nodeName; delete preconditions on uid and resourceVersion; label
// selectors (=, ==, !=, in, notin, exists, !exists) and the field selectors
// metadata.name, spec.nodeName, spec.driver; consistent pagination with limit
// and continue; watches from "" / "0" (synthetic ADDED events first) or from a
// resourceVersion (replayed from history), with selector-aware ADDED/DELETED
// when an object enters or leaves the selection.
//
// For Services, EndpointSlices and Pods: lists and watches of one namespace
// (ListOptions::namespace_) or of all, with label selectors (a field selector
// is refused) and the same resourceVersions, history, 410, selector-aware
// events and watch controls as ResourceSlices, of the objects tests put and
// remove (putService, removeService, putPod, ...). One page, no paging.
//
// For Nodes: getNode, and listNodeMetadata and watchNodeMetadata with the same
// resourceVersions, history, 410 and watch controls as ResourceSlices
// (addNode, editNode and removeNode are the changes they report); the
// metadata is the Node's whole ObjectMeta. Node lists and watches ignore
// selectors and paging (one page, every Node).
//
// What it does not emulate: schema validation, defaulting and dropped fields
// (use reactors), server-side apply and patches, finalizers and graceful
// deletion, owner references and garbage collection, resourceVersionMatch and
// lists at an older resourceVersion (every list reads the current state),
// watch timeouts (timeout_seconds is ignored: a watch ends only on
// resetWatches(), sendWatchError(), the stop token or the handler), periodic
// bookmarks (sendBookmark() sends one), authentication and authorization of
// callers. Unlike the real API server it rejects an update without
// metadata.resourceVersion, because the controller must never send one.
class FakeKubeApi final : public client::KubeApi {
 public:
  // One recorded call.
  struct Action {
    std::string verb;      // get, list, watch, create, update, delete, deletecollection
    std::string resource;  // resourceslices, leases, nodes, tokenreviews, ...
    std::string namespace_;
    std::string name;
    client::ListOptions options;  // list, watch and deletecollection
    bool dry_run = false;         // create with dryRun=All: not a write
  };

  // A call as a reactor sees it. A reactor may change the object (to default
  // or drop fields as a server would) or the options before the default
  // behaviour runs.
  struct Request {
    std::string verb;
    std::string resource;
    std::string namespace_;
    std::string name;
    client::ListOptions options;
    client::Preconditions preconditions;
    std::optional<client::ResourceSlice> slice;  // create and update of resourceslices
    std::optional<client::Lease> lease;          // create and update of leases
    bool dry_run = false;                        // create with dryRun=All
  };
  // Returns an error to make the call fail with it, or OK to go on.
  using Reactor = std::function<Status(Request&)>;

  explicit FakeKubeApi(Clock& clock, FakeKubeApiOptions options = {});
  ~FakeKubeApi() override;

  FakeKubeApi(const FakeKubeApi&) = delete;
  FakeKubeApi& operator=(const FakeKubeApi&) = delete;

  // client::KubeApi
  StatusOr<client::ResourceSlice> getResourceSlice(const std::string& name) override;
  StatusOr<client::ResourceSliceList> listResourceSlices(
      const client::ListOptions& options) override;
  Status watchResourceSlices(const client::ListOptions& options,
                             const client::WatchHandler<client::ResourceSlice>& handler,
                             std::stop_token stop) override;
  StatusOr<client::ResourceSlice> createResourceSlice(const client::ResourceSlice& slice) override;
  // Runs the create's reactors (Request::dry_run set) and answers what a
  // create would store, storing nothing: no resourceVersion, uid or event, and
  // a generated name ends in "dryrn" (no random suffix is drawn, so that the
  // names of later creates stay as they were).
  StatusOr<client::ResourceSlice> dryRunCreateResourceSlice(
      const client::ResourceSlice& slice) override;
  StatusOr<client::ResourceSlice> updateResourceSlice(const client::ResourceSlice& slice) override;
  Status deleteResourceSlice(const std::string& name,
                             const client::Preconditions& preconditions) override;
  Status deleteResourceSlices(const client::ListOptions& options) override;
  StatusOr<client::Lease> getLease(const std::string& ns, const std::string& name) override;
  StatusOr<client::Lease> createLease(const client::Lease& lease) override;
  StatusOr<client::Lease> updateLease(const client::Lease& lease) override;
  StatusOr<client::Secret> getSecret(const std::string& ns, const std::string& name) override;
  StatusOr<client::Secret> createSecret(const client::Secret& secret) override;
  StatusOr<client::Secret> updateSecret(const client::Secret& secret) override;
  StatusOr<client::ConfigMap> getConfigMap(const std::string& ns, const std::string& name) override;
  StatusOr<client::ConfigMap> createConfigMap(const client::ConfigMap& config_map) override;
  StatusOr<client::ConfigMap> updateConfigMap(const client::ConfigMap& config_map) override;
  StatusOr<client::ServerVersion> getServerVersion() override;
  StatusOr<client::Node> getNode(const std::string& name) override;
  StatusOr<client::PartialObjectMetadataList> listNodeMetadata(
      const client::ListOptions& options) override;
  Status watchNodeMetadata(const client::ListOptions& options,
                           const client::WatchHandler<client::PartialObjectMetadata>& handler,
                           std::stop_token stop) override;
  StatusOr<client::ServiceList> listServices(const client::ListOptions& options) override;
  Status watchServices(const client::ListOptions& options,
                       const client::WatchHandler<client::Service>& handler,
                       std::stop_token stop) override;
  StatusOr<client::EndpointSliceList> listEndpointSlices(
      const client::ListOptions& options) override;
  Status watchEndpointSlices(const client::ListOptions& options,
                             const client::WatchHandler<client::EndpointSlice>& handler,
                             std::stop_token stop) override;
  StatusOr<client::PodList> listPods(const client::ListOptions& options) override;
  Status watchPods(const client::ListOptions& options,
                   const client::WatchHandler<client::Pod>& handler, std::stop_token stop) override;
  StatusOr<client::TokenReview> createTokenReview(const client::TokenReview& review) override;
  StatusOr<client::SubjectAccessReview> createSubjectAccessReview(
      const client::SubjectAccessReview& review) override;
  // Like the server: a missing namespace is "default" (see KubeApi), a name
  // taken is AlreadyExists.
  StatusOr<client::Event> createEvent(const client::Event& event) override;
  StatusOr<client::Event> patchEventSeries(const std::string& ns, const std::string& name,
                                           const client::EventSeries& series) override;

  // Faults. Adds `reactor` in front of the others for calls matching `verb`
  // and `resource` ("*" matches any). Reactors run in order, newest first,
  // without the fake's lock held, after the call is recorded. One reactor
  // never runs for two calls at once (it may keep state without a lock).
  void prependReactor(std::string verb, std::string resource, Reactor reactor);
  void clearReactors();

  // The record of calls, in order; failed calls are recorded too.
  std::vector<Action> actions() const;
  void clearActions();
  size_t countActions(std::string_view verb, std::string_view resource) const;
  // Counts create, update, delete and deletecollection calls on `resource`.
  size_t countWrites(std::string_view resource = "resourceslices") const;
  // Makes slice writes (create, update, delete) wait, outside the fake's
  // other locks, until `n` of them are under way at once; then those go on
  // and later writes do not wait. A test sees writes overlap without
  // sleeping. A write that has waited 10 s goes on anyway (a safety net), so
  // code that never writes `n` at once fails the test instead of hanging it.
  void holdWritesUntilConcurrent(size_t n);
  // The most slice writes that were under way at once since
  // holdWritesUntilConcurrent().
  size_t maxConcurrentWrites() const;

  // Another writer's view, not recorded and without reactors: seeds objects
  // and makes foreign changes with the same semantics as the API calls.
  StatusOr<client::ResourceSlice> addResourceSlice(const client::ResourceSlice& slice);
  // Applies `edit` to the live slice and stores it unconditionally.
  StatusOr<client::ResourceSlice> editResourceSlice(
      const std::string& name, const std::function<void(client::ResourceSlice&)>& edit);
  Status removeResourceSlice(const std::string& name);

  // The stored state.
  std::vector<client::ResourceSlice> resourceSlices() const;  // by name
  std::optional<client::ResourceSlice> resourceSlice(const std::string& name) const;
  std::optional<client::Lease> lease(const std::string& ns, const std::string& name) const;
  std::vector<client::Event> events() const;
  // The resourceVersion of the newest write.
  std::string resourceVersion() const;

  // Watches, of ResourceSlices and of Nodes alike. Ends every open watch
  // normally, as a server timeout or a dropped connection would; pending
  // events are lost (the client resumes from the last resourceVersion it saw).
  void resetWatches();
  // Queues an ERROR event carrying `error` behind the pending events of every
  // open watch; each watch ends after delivering it.
  void sendWatchError(const Status& error);
  // Sends a BOOKMARK at the current resourceVersion to every open watch that
  // allows bookmarks.
  void sendBookmark();
  // Forgets the watch history and all continue tokens, as etcd compaction
  // does: later watches from an older resourceVersion get an ERROR 410 event
  // and continue tokens fail with 410 Expired.
  void compact();
  // Open watches of `resource` ("resourceslices", "nodes", "services" or
  // "endpointslices").
  size_t activeWatches(std::string_view resource = "resourceslices") const;
  // The number of watches of `resource` that got past their reactors and
  // were registered.
  size_t watchesStarted(std::string_view resource = "resourceslices") const;
  // Blocks until activeWatches(resource) == n or watchesStarted(resource) >=
  // n. The timeout is a safety net for tests in real time, never the
  // synchronisation. Returns false on timeout.
  bool waitForActiveWatches(size_t n, std::string_view resource = "resourceslices",
                            std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  bool waitForWatchesStarted(size_t n, std::string_view resource = "resourceslices",
                             std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;
  // Blocks until every open watch has handed each event queued for it so far
  // to its handler and the handler has returned: what the fake has written is
  // then known to every watcher. Returns false on timeout (a safety net).
  bool waitForWatchesDelivered(std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  // Nodes: each change moves the resourceVersion and is reported to Node
  // watches.
  client::Node addNode(const std::string& name);
  // Applies `edit` to the stored Node (a label, say); returns it.
  StatusOr<client::Node> editNode(const std::string& name,
                                  const std::function<void(client::Node&)>& edit);
  void removeNode(const std::string& name);

  // Services, EndpointSlices and Pods, as another writer (the EndpointSlice
  // controller, a user, the kubelet) changes them: not recorded, no reactors. put creates
  // the object (metadata.namespace_ and name required; uid, creationTimestamp
  // and resourceVersion are set) or replaces the stored one unconditionally;
  // a put that changes nothing is a no-op (same resourceVersion, no event).
  // remove of a missing object is NotFound.
  StatusOr<client::Service> putService(client::Service service);
  Status removeService(const std::string& ns, const std::string& name);
  StatusOr<client::EndpointSlice> putEndpointSlice(client::EndpointSlice slice);
  Status removeEndpointSlice(const std::string& ns, const std::string& name);
  StatusOr<client::Pod> putPod(client::Pod pod);
  Status removePod(const std::string& ns, const std::string& name);

  // Reviews are answered by these functions; by default tokens are not
  // authenticated and access is not allowed.
  void setTokenReviewer(std::function<client::TokenReview(const client::TokenReview&)> reviewer);
  void setAccessReviewer(
      std::function<client::SubjectAccessReview(const client::SubjectAccessReview&)> reviewer);

  // What getServerVersion answers; by default the newest supported release.
  void setServerVersion(client::ServerVersion version);

 private:
  struct Watcher;
  struct NodeWatcher;
  // One change of an object, for watches that start from an older
  // resourceVersion.
  template <typename T>
  struct ObjectHistoryEntry {
    uint64_t resource_version = 0;
    client::WatchEventType type = client::WatchEventType::kAdded;
    std::optional<T> old;  // MODIFIED: the previous state (Node watches need none)
    T object;
  };
  using HistoryEntry = ObjectHistoryEntry<client::ResourceSlice>;
  using NodeHistoryEntry = ObjectHistoryEntry<client::PartialObjectMetadata>;
  template <typename T>
  struct ObjectWatcher;  // one open watch of a WatchedObjects; in the .cc
  // A namespaced kind that tests change and the code under test lists and
  // watches (Services, EndpointSlices, Pods). `resource` names it in requests and
  // activeWatches(), `what` in errors.
  template <typename T>
  struct WatchedObjects {
    std::string_view resource;
    std::string_view what;
    std::map<std::pair<std::string, std::string>, T> objects;  // by (namespace, name)
    std::deque<ObjectHistoryEntry<T>> history;
    uint64_t history_floor = 0;  // as history_floor_
    std::vector<std::shared_ptr<ObjectWatcher<T>>> watchers;
    size_t watches_started = 0;
  };
  struct Snapshot {
    std::vector<client::ResourceSlice> items;
    std::string resource_version;
  };

  // Records the call and runs the matching reactors on `request`.
  Status invoke(Request& request);
  std::string nextResourceVersionLocked();
  std::string generateSuffixLocked(size_t length);
  std::string newUidLocked();
  // A namespaced kind the fake keeps (Leases, Secrets, ConfigMaps): `resource`
  // names it in requests ("leases"), `kind` in errors
  // ("leases.coordination.k8s.io"); `request_object`, when set, is the
  // Request field through which reactors see and change a written object.
  template <typename T>
  struct NamespacedObjects {
    std::string_view resource;
    std::string_view kind;
    std::optional<T> Request::*request_object = nullptr;
    std::map<std::pair<std::string, std::string>, T> objects;
  };
  // Get, create and update of a namespaced object: the call is recorded and
  // its reactors run, then the API server's name, namespace and
  // resourceVersion rules apply.
  template <typename T>
  StatusOr<T> getNamespaced(NamespacedObjects<T>& store, const std::string& ns,
                            const std::string& name);
  template <typename T>
  StatusOr<T> createNamespaced(NamespacedObjects<T>& store, T created);
  template <typename T>
  StatusOr<T> updateNamespaced(NamespacedObjects<T>& store, T updated);
  // Records a create or update of `object` and runs its reactors, which may
  // change `object`.
  template <typename T>
  Status invokeWrite(std::string verb, NamespacedObjects<T>& store, T& object);
  template <typename T>
  StatusOr<client::ObjectList<T>> listWatched(WatchedObjects<T>& store,
                                              const client::ListOptions& options);
  template <typename T>
  Status watchWatched(WatchedObjects<T>& store, const client::ListOptions& options,
                      const client::WatchHandler<T>& handler, std::stop_token stop);
  template <typename T>
  StatusOr<T> putWatched(WatchedObjects<T>& store, T object);
  template <typename T>
  Status removeWatched(WatchedObjects<T>& store, const std::string& ns, const std::string& name);
  // The open watches of `resource`, and how many were started.
  size_t activeWatchesLocked(std::string_view resource) const;
  size_t watchesStartedLocked(std::string_view resource) const;
  StatusOr<client::ResourceSlice> createSliceLocked(client::ResourceSlice slice);
  StatusOr<client::ResourceSlice> updateSliceLocked(client::ResourceSlice slice,
                                                    bool require_resource_version);
  Status deleteSliceLocked(const std::string& name, const client::Preconditions& preconditions);
  // Records a change of `object` (from `old`, for a MODIFIED) at the current
  // resourceVersion: offers it to `watchers` and appends it to `history`,
  // which keeps options_.watch_history entries, all those after `floor`.
  template <typename T, typename W>
  void publishLocked(std::deque<ObjectHistoryEntry<T>>& history, uint64_t& floor,
                     const std::vector<std::shared_ptr<W>>& watchers, client::WatchEventType type,
                     const std::type_identity_t<T>* old, const T& object);
  void publishNodeLocked(client::WatchEventType type, const client::Node& node);
  // Create of a review: the call is recorded and its reactors run, then
  // `reviewer` answers; without one, `review` comes back with `refuse` applied.
  template <typename T>
  StatusOr<T> answerReview(std::string resource, std::function<T(const T&)> FakeKubeApi::*reviewer,
                           const T& review, std::type_identity_t<void (*)(T&)> refuse);
  // Wakes every waiter after a change, and reports the blocked watches.
  void notifyLocked();
  // Tells options_.blocked how many watches wait with nothing to deliver.
  void reportBlockedLocked();
  // Applies `f` to every open watch, of ResourceSlices and of Nodes.
  template <typename F>
  void forEachWatcherLocked(F f) const;
  // Delivers the events of `watcher` (registered in `registry`) to `handler`
  // until the watch ends; called with `lock` held, returns with it held.
  template <typename W, typename T>
  Status serveWatchLocked(std::unique_lock<std::mutex>& lock,
                          std::vector<std::shared_ptr<W>>& registry,
                          const std::shared_ptr<W>& watcher, const client::WatchHandler<T>& handler,
                          const std::stop_token& stop, std::string_view what);

  Clock& clock_;
  const FakeKubeApiOptions options_;

  mutable std::mutex mu_;
  // One condition for all waiters: watches wait for events, tests for watches.
  mutable std::condition_variable_any cv_;
  std::mt19937_64 random_;
  client::ServerVersion server_version_ = {"1", "37", "v1.37.2"};  // guarded by mu_
  uint64_t resource_version_;
  std::map<std::string, client::ResourceSlice> slices_;
  NamespacedObjects<client::Lease> leases_{
      "leases", "leases.coordination.k8s.io", &Request::lease, {}};
  NamespacedObjects<client::Secret> secrets_{"secrets", "secrets", nullptr, {}};
  NamespacedObjects<client::ConfigMap> config_maps_{"configmaps", "configmaps", nullptr, {}};
  std::map<std::string, client::Node> nodes_;
  WatchedObjects<client::Service> services_{"services", "Services", {}, {}, 0, {}, 0};
  WatchedObjects<client::EndpointSlice> endpoint_slices_{
      "endpointslices", "EndpointSlices", {}, {}, 0, {}, 0};
  WatchedObjects<client::Pod> pods_{"pods", "Pods", {}, {}, 0, {}, 0};
  std::vector<client::Event> events_;
  std::deque<HistoryEntry> history_;
  // Every event after this resourceVersion is in history_.
  uint64_t history_floor_;
  std::map<uint64_t, Snapshot> snapshots_;  // continue tokens
  uint64_t next_snapshot_ = 1;
  std::vector<std::shared_ptr<Watcher>> watchers_;
  size_t watches_started_ = 0;
  std::deque<NodeHistoryEntry> node_history_;
  uint64_t node_history_floor_;  // as history_floor_, for node_history_
  std::vector<std::shared_ptr<NodeWatcher>> node_watchers_;
  size_t node_watches_started_ = 0;
  std::vector<Action> actions_;
  struct RegisteredReactor {
    std::string verb;
    std::string resource;
    Reactor reactor;
    // A reactor never runs twice at once, so that it may keep state without
    // a lock while the code under test calls from several threads.
    std::shared_ptr<std::mutex> running = std::make_shared<std::mutex>();
  };
  std::vector<RegisteredReactor> reactors_;  // newest first
  // holdWritesUntilConcurrent(): its own lock, so that held writes block
  // nothing else.
  mutable std::mutex writes_mu_;
  std::condition_variable writes_cv_;
  bool counting_writes_ = false;     // guarded by writes_mu_
  size_t hold_writes_until_ = 0;     // 0: no hold; guarded by writes_mu_
  size_t writes_in_flight_ = 0;      // guarded by writes_mu_
  size_t max_writes_in_flight_ = 0;  // guarded by writes_mu_
  std::function<client::TokenReview(const client::TokenReview&)> token_reviewer_;
  std::function<client::SubjectAccessReview(const client::SubjectAccessReview&)> access_reviewer_;
};

}  // namespace rsc::testing
