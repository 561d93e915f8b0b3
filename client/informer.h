// Informer<R>: keeps a Store of one resource in step with the API server by
// list + watch (client-go's Reflector and SharedInformer, for one resource),
// and tells the controller what changed through event handlers. R names the
// resource (ResourceSlices, NodeMetadata, Services, EndpointSlices below);
// the list, watch, relist and backoff logic is shared.
// Threading: run() blocks on the calling thread (start() runs it on a thread
// the Informer owns); handlers are called on that thread, one at a time, after
// the store was updated, and must return quickly (enqueue a key, no API
// calls). The store, hasSynced(), waitForSync(), lastListError() and
// lastResourceVersion() are thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "client/kube_api.h"
#include "client/store.h"
#include "common/clock.h"
#include "common/status.h"

namespace rsc::client {

// A string literal as a template argument (the names of a resource below).
template <size_t N>
struct ResourceName {
  // Implicit, so that a literal can be written where a ResourceName goes.
  constexpr ResourceName(const char (&text)[N]) {  // NOLINT(google-explicit-constructor)
    std::copy_n(text, N, chars);
  }
  constexpr std::string_view view() const { return {chars, N - 1}; }
  char chars[N] = {};
};

// A resource an Informer can keep: its object type, its names (the plural
// resource for logs, a display name for errors) and the KubeApi calls that
// list and watch it.
template <typename T, ResourceName kResourceName, ResourceName kDisplayName,
          StatusOr<ObjectList<T>> (KubeApi::*kList)(const ListOptions&),
          Status (KubeApi::*kWatch)(const ListOptions&, const WatchHandler<T>&, std::stop_token)>
struct ApiResource {
  using Object = T;
  static constexpr std::string_view kResource = kResourceName.view();
  static constexpr std::string_view kName = kDisplayName.view();
  static StatusOr<ObjectList<Object>> list(KubeApi& api, const ListOptions& options) {
    return (api.*kList)(options);
  }
  static Status watch(KubeApi& api, const ListOptions& options, const WatchHandler<Object>& handler,
                      std::stop_token stop) {
    return (api.*kWatch)(options, handler, std::move(stop));
  }
};

using ResourceSlices = ApiResource<ResourceSlice, "resourceslices", "ResourceSlices",
                                   &KubeApi::listResourceSlices, &KubeApi::watchResourceSlices>;
// Nodes, their metadata alone: the Node cache.
using NodeMetadata = ApiResource<PartialObjectMetadata, "nodes", "Node metadata",
                                 &KubeApi::listNodeMetadata, &KubeApi::watchNodeMetadata>;
// v1 Services and discovery.k8s.io/v1 EndpointSlices: pull-mode discovery.
using Services =
    ApiResource<Service, "services", "Services", &KubeApi::listServices, &KubeApi::watchServices>;
using EndpointSlices = ApiResource<EndpointSlice, "endpointslices", "EndpointSlices",
                                   &KubeApi::listEndpointSlices, &KubeApi::watchEndpointSlices>;
// v1 Pods, their identity alone: whom pull-mode discovery's endpoints name.
using Pods = ApiResource<Pod, "pods", "Pods", &KubeApi::listPods, &KubeApi::watchPods>;

// Why a watch ended and another (or a relist) follows: the stream ended
// normally (e.g. its timeout), 410 Gone (a relist follows), or an error.
enum class WatchRestart { kClosed, kGone, kError };
// "closed", "gone" or "error", for logs and tests.
std::string_view watchRestartName(WatchRestart reason);

template <typename R>
struct InformerOptions {
  // Namespaced resources: the one namespace to keep; empty: every namespace.
  std::string namespace_;
  // Restrict what is watched (the controller selects its managed-by label).
  std::string label_selector;
  std::string field_selector;
  // Items per list page; client-go's pager default, small enough that one
  // page of full slices stays well below the API server's response limits.
  int64_t page_size = 500;
  // Each watch asks the server to end it after a random time in this range,
  // as client-go does, so that many clients do not reconnect in lockstep and
  // a silently dead connection is noticed.
  std::chrono::seconds min_watch_timeout{300};
  std::chrono::seconds max_watch_timeout{600};
  // Backoff after failed lists and watches: doubles from initial to max, each
  // delay stretched by a random factor in [1, 1 + jitter) and capped at max
  // (client-go's reflector: 800 ms to 30 s). Reset once a watch delivers an
  // event.
  Clock::Duration initial_backoff = std::chrono::milliseconds(800);
  Clock::Duration max_backoff = std::chrono::seconds(30);
  double backoff_jitter = 0.2;
  // The store's secondary index (see Store::byIndex).
  typename Store<typename R::Object>::IndexFunc index;
  // Applied to every object listed or watched, before it is stored and handed
  // to the handlers, to drop what nobody reads (client-go's TransformFunc):
  // the cache then keeps only the rest. May be empty. A ResourceSlice's spec it
  // must leave as it is: an event in a state the store holds takes its spec
  // from the store (ListOptions::held_slice).
  std::function<void(typename R::Object&)> transform;
  // Called on the informer's thread whenever a watch ends and another (or a
  // relist) follows. For metrics.
  std::function<void(WatchRestart reason)> on_watch_restart;
  // Seeds watch timeouts and backoff jitter; unset: random.
  std::optional<uint64_t> seed;
};

// Each may be empty. Objects passed are read-only snapshots.
template <typename R>
struct InformerHandlers {
  using Object = typename R::Object;
  std::function<void(const Object& added)> on_add;
  std::function<void(const Object& old, const Object& now)> on_update;
  // `last` is the last state known: from the DELETED event, or from the store
  // when a relist no longer has the object.
  std::function<void(const Object& last)> on_delete;
};

// Consistency contract: the store is eventually consistent with the server;
// for each object, handlers see its changes in order. A relist (after a 410)
// delivers only differences: objects gone become on_delete, changed ones
// on_update, new ones on_add. A watch that ends normally is resumed from the
// last resourceVersion seen (events, bookmarks), so nothing is delivered
// twice. Handlers report the watched state, not the store's assumptions.
template <typename R>
class Informer {
 public:
  using Object = typename R::Object;
  using Options = InformerOptions<R>;
  using Handlers = InformerHandlers<R>;

  // Returns an error for options that make no sense (page size or timeouts
  // not positive, min above max).
  static Status validate(const Options& options);
  // Validates `options` and builds an Informer.
  static StatusOr<std::unique_ptr<Informer>> create(KubeApi& api, Clock& clock, Options options,
                                                    Handlers handlers);

  // `options` must be valid (a programmer error otherwise: aborts).
  Informer(KubeApi& api, Clock& clock, Options options, Handlers handlers);
  // Stops and joins the thread of start(), if any.
  ~Informer();

  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Lists, then watches, relists and reconnects until `stop` is requested.
  // Call at most once, either directly or through start().
  void run(const std::stop_token& stop);
  // Runs run() on a thread of its own; stop() (or the destructor) ends it.
  void start();
  void stop();

  // True once the first full list is in the store and its handlers have been
  // called (and stays true).
  bool hasSynced() const;
  // Why the last list failed; OK once a list succeeded.
  Status lastListError() const;
  // Blocks until hasSynced() or `stop` is requested; returns hasSynced().
  bool waitForSync(std::stop_token stop) const;
  // The resourceVersion the next watch would start from ("" before the first
  // list).
  std::string lastResourceVersion() const;

  Store<Object>& store() { return store_; }
  const Store<Object>& store() const { return store_; }

 private:
  // How one watch ended.
  struct WatchResult {
    Status status;
    size_t events = 0;  // events delivered, bookmarks included
  };

  // Lists every page and replaces the store's content; delivers differences.
  Status listAndReplace(const std::stop_token& stop);
  WatchResult watchOnce(const std::stop_token& stop);
  void handleEvent(const WatchEvent<Object>& event);
  // Counts a failure and sleeps for the backoff, unless `free_first` and it is
  // the first failure in a row.
  void failed(const std::stop_token& stop, bool free_first);
  void setLastResourceVersion(const std::string& resource_version);
  void notifyRestart(WatchRestart reason) const;

  KubeApi& api_;
  Clock& clock_;
  const Options options_;
  const Handlers handlers_;
  Store<Object> store_;

  // Used by the run() thread only.
  std::mt19937_64 random_;
  int failures_ = 0;  // failures in a row since the last healthy watch

  mutable std::mutex mu_;
  mutable std::condition_variable_any synced_cv_;
  bool synced_ = false;                // guarded by mu_
  Status last_list_error_;             // guarded by mu_
  std::string last_resource_version_;  // guarded by mu_

  std::jthread thread_;
};

// The informers the controller runs; defined in informer.cc.
extern template class Informer<ResourceSlices>;
extern template class Informer<NodeMetadata>;
extern template class Informer<Services>;
extern template class Informer<EndpointSlices>;
extern template class Informer<Pods>;

}  // namespace rsc::client
