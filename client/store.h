// Store<T>: an informer's cache of one resource's objects, by key (storeKey:
// the name, "namespace/name" for a namespaced object) and by a secondary index
// the user chooses (the controller indexes ResourceSlices by driver and pool),
// with a mutation cache so that the controller's own writes are visible at
// once, before the watch reports them. The Informer feeds it; any thread reads
// it. Instantiated for ResourceSlice, PartialObjectMetadata (the Node cache),
// Service and EndpointSlice (pull-mode discovery). Thread-safe: one mutex; objects are
// handed out as std::shared_ptr<const T> and must not be modified.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "client/objects.h"
#include "client/resource_slice.h"

namespace rsc::client {

// Two layers: what the list and watch reported ("watched"), and what the
// controller assumes it wrote ("assumed", the mutation cache). Readers see an
// assumed state until the watch reports an equal or newer version of that
// object. Versions are compared as integers here, as client-go's MutationCache
// does; where a resourceVersion is not an integer the watched version wins.
// Deletions win races: a DELETED event (or a relist without the object) at a
// version equal to or newer than an assumed write removes the object.
// T is an object with `metadata.name` and `metadata.resource_version`.
// Methods that take a `name` take the object's storeKey.
template <typename T>
class Store {
 public:
  using Ptr = std::shared_ptr<const T>;
  // Returns the index key of an object (for example "driver/pool").
  using IndexFunc = std::function<std::string(const T&)>;
  // One difference found when the store's content is replaced by a new list.
  struct Change {
    Ptr old;  // null for an added object
    Ptr now;  // null for a deleted object
  };

  // Without `index`, byIndex() returns nothing.
  explicit Store(IndexFunc index = nullptr);

  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Reads: the watched state overlaid with the assumed one.
  Ptr get(const std::string& name) const;
  std::vector<Ptr> list() const;                           // ordered by key
  std::vector<Ptr> byIndex(const std::string& key) const;  // ordered by key
  size_t size() const;

  // The mutation cache. Records `returned_by_server` (the object a create or
  // update returned) as the current state of its name.
  void assumeWritten(const T& returned_by_server);
  // Hides the object `name` (as currently seen) until the watch confirms the
  // deletion or reports a newer object of that name.
  void assumeDeleted(const std::string& name);
  // Number of assumptions not yet superseded by the watch.
  size_t pendingAssumptions() const;

  // Feeding, by the Informer's thread. applyUpsert keeps `object` itself (moved
  // in, not copied) and returns the previous watched state and the new one;
  // applyDelete returns the previous watched state (null if none).
  Change applyUpsert(T object);
  Ptr applyDelete(const T& last_state);
  // Replaces the watched state with a full list taken at `resource_version`
  // and returns the differences, ordered by name.
  std::vector<Change> replace(std::vector<T> items, const std::string& resource_version);

 private:
  struct Assumption {
    Ptr object;  // null: assumed deleted
    // The version of the write; for a deletion, of the object deleted.
    std::optional<int64_t> resource_version;
  };
  struct Entry {
    Ptr watched;
    std::optional<Assumption> assumed;
    Ptr visible;
    std::optional<std::string> index_key;  // of `visible`
  };

  // Drop the assumption of `entry` once the watched state supersedes it:
  // after the watched object changed, or after it went away at version
  // `deleted_at`.
  static void settleAfterUpsert(Entry& entry);
  static void settleAfterDelete(Entry& entry, std::optional<int64_t> deleted_at);
  // Recomputes what readers see of `name` and keeps the index in step.
  void refreshLocked(const std::string& name);

  const IndexFunc index_func_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  std::map<std::string, std::set<std::string>> index_;  // key -> names
};

// The key of an object in a Store: its name, or "namespace/name" when it has
// a namespace (client-go's MetaNamespaceKeyFunc), so that a cluster-wide
// cache of a namespaced resource keeps equal names of two namespaces apart.
std::string storeKey(const ObjectMeta& metadata);

// The stores the controller keeps; defined in store.cc.
extern template class Store<ResourceSlice>;
extern template class Store<PartialObjectMetadata>;
extern template class Store<Service>;
extern template class Store<EndpointSlice>;
extern template class Store<Pod>;

using ResourceSliceStore = Store<ResourceSlice>;
using SlicePtr = ResourceSliceStore::Ptr;

// Returns the resourceVersion as an integer, if it is one.
std::optional<int64_t> resourceVersionAsInt(const std::string& resource_version);

}  // namespace rsc::client
