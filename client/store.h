// ResourceSliceStore: the informer's cache of ResourceSlices, by name and by a
// secondary index the user chooses (the controller indexes by driver and
// pool), with a mutation cache so that the controller's own writes are visible
// at once, before the watch reports them. The Informer feeds it; any thread
// reads it. Thread-safe: one mutex; objects are handed out as
// std::shared_ptr<const ResourceSlice> and must not be modified.
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

#include "client/resource_slice.h"

namespace rsc::client {

using SlicePtr = std::shared_ptr<const ResourceSlice>;

// One difference found when the store's content is replaced by a new list.
struct StoreChange {
  SlicePtr old;  // null for an added slice
  SlicePtr now;  // null for a deleted slice
};

// Two layers: what the list and watch reported ("watched"), and what the
// controller assumes it wrote ("assumed", the mutation cache). Readers see an
// assumed state until the watch reports an equal or newer version of that
// object. Versions are compared as integers here, as client-go's MutationCache
// does; where a resourceVersion is not an integer the watched version wins.
// Deletions win races: a DELETED event (or a relist without the object) at a
// version equal to or newer than an assumed write removes the object.
class ResourceSliceStore {
 public:
  // Returns the index key of a slice (for example "driver/pool").
  using IndexFunc = std::function<std::string(const ResourceSlice&)>;

  // Without `index`, byIndex() returns nothing.
  explicit ResourceSliceStore(IndexFunc index = nullptr);

  ResourceSliceStore(const ResourceSliceStore&) = delete;
  ResourceSliceStore& operator=(const ResourceSliceStore&) = delete;

  // Reads: the watched state overlaid with the assumed one.
  SlicePtr get(const std::string& name) const;
  std::vector<SlicePtr> list() const;                           // ordered by name
  std::vector<SlicePtr> byIndex(const std::string& key) const;  // ordered by name
  size_t size() const;

  // The mutation cache. Records `returned_by_server` (the object a create or
  // update returned) as the current state of its name.
  void assumeWritten(const ResourceSlice& returned_by_server);
  // Hides the slice `name` (as currently seen) until the watch confirms the
  // deletion or reports a newer object of that name.
  void assumeDeleted(const std::string& name);
  // Number of assumptions not yet superseded by the watch.
  size_t pendingAssumptions() const;

  // Feeding, by the Informer's thread. Each returns the previous watched state
  // (null if none).
  SlicePtr applyUpsert(const ResourceSlice& slice);
  SlicePtr applyDelete(const ResourceSlice& last_state);
  // Replaces the watched state with a full list taken at `resource_version`
  // and returns the differences, ordered by name.
  std::vector<StoreChange> replace(std::vector<ResourceSlice> items,
                                   const std::string& resource_version);

 private:
  struct Assumption {
    SlicePtr object;  // null: assumed deleted
    // The version of the write; for a deletion, of the object deleted.
    std::optional<int64_t> resource_version;
  };
  struct Entry {
    SlicePtr watched;
    std::optional<Assumption> assumed;
    SlicePtr visible;
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

// Returns the resourceVersion as an integer, if it is one.
std::optional<int64_t> resourceVersionAsInt(const std::string& resource_version);

}  // namespace rsc::client
