#include "client/store.h"

#include <algorithm>
#include <utility>

#include "common/strings.h"

namespace rsc::client {

std::optional<int64_t> resourceVersionAsInt(const std::string& resource_version) {
  const std::optional<int64_t> value = parseWhole<int64_t>(resource_version);
  if (!value || *value < 0) return std::nullopt;
  return value;
}

std::string storeKey(const ObjectMeta& metadata) {
  if (metadata.namespace_.empty()) {
    return metadata.name;
  }
  return metadata.namespace_ + "/" + metadata.name;
}

template <typename T>
Store<T>::Store(IndexFunc index) : index_func_(std::move(index)) {}

template <typename T>
typename Store<T>::Ptr Store<T>::get(const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second.visible;
}

template <typename T>
std::vector<typename Store<T>::Ptr> Store<T>::list() const {
  std::lock_guard lock(mu_);
  std::vector<Ptr> all;
  all.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) {
    if (entry.visible) {
      all.push_back(entry.visible);
    }
  }
  return all;
}

template <typename T>
std::vector<typename Store<T>::Ptr> Store<T>::byIndex(const std::string& key) const {
  std::lock_guard lock(mu_);
  std::vector<Ptr> found;
  const auto names = index_.find(key);
  if (names == index_.end()) {
    return found;
  }
  for (const auto& name : names->second) {
    found.push_back(entries_.at(name).visible);
  }
  return found;
}

template <typename T>
size_t Store<T>::size() const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(
      std::ranges::count_if(entries_, [](const auto& e) { return e.second.visible != nullptr; }));
}

template <typename T>
void Store<T>::assumeWritten(const T& returned_by_server) {
  const std::string name = storeKey(returned_by_server.metadata);
  const auto written_at = resourceVersionAsInt(returned_by_server.metadata.resource_version);
  std::lock_guard lock(mu_);
  Entry& entry = entries_[name];
  // The watch may already have delivered this write, or a newer state.
  if (entry.watched && written_at) {
    const auto watched_at = resourceVersionAsInt(entry.watched->metadata.resource_version);
    if (watched_at && *watched_at >= *written_at) {
      refreshLocked(name);
      return;
    }
  }
  // Writes may return out of order; keep the newest.
  if (entry.assumed && entry.assumed->resource_version && written_at &&
      *entry.assumed->resource_version > *written_at) {
    return;
  }
  entry.assumed = Assumption{std::make_shared<const T>(returned_by_server), written_at};
  refreshLocked(name);
}

template <typename T>
void Store<T>::assumeDeleted(const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(name);
  if (it == entries_.end() || !it->second.visible) {
    return;
  }
  Entry& entry = it->second;
  entry.assumed =
      Assumption{nullptr, resourceVersionAsInt(entry.visible->metadata.resource_version)};
  refreshLocked(name);
}

template <typename T>
size_t Store<T>::pendingAssumptions() const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(
      std::ranges::count_if(entries_, [](const auto& e) { return e.second.assumed.has_value(); }));
}

template <typename T>
typename Store<T>::Change Store<T>::applyUpsert(T object) {
  Ptr now = std::make_shared<const T>(std::move(object));
  const std::string name = storeKey(now->metadata);
  std::lock_guard lock(mu_);
  Entry& entry = entries_[name];
  Ptr previous = std::exchange(entry.watched, now);
  settleAfterUpsert(entry);
  refreshLocked(name);
  return {std::move(previous), std::move(now)};
}

template <typename T>
typename Store<T>::Ptr Store<T>::applyDelete(const T& last_state) {
  const std::string name = storeKey(last_state.metadata);
  std::lock_guard lock(mu_);
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    return nullptr;
  }
  Ptr previous = std::exchange(it->second.watched, nullptr);
  settleAfterDelete(it->second, resourceVersionAsInt(last_state.metadata.resource_version));
  refreshLocked(name);
  return previous;
}

template <typename T>
std::vector<typename Store<T>::Change> Store<T>::replace(std::vector<T> items,
                                                         const std::string& resource_version) {
  std::map<std::string, Ptr> listed;
  for (auto& item : items) {
    std::string name = storeKey(item.metadata);
    listed[std::move(name)] = std::make_shared<const T>(std::move(item));
  }
  const auto listed_at = resourceVersionAsInt(resource_version);

  std::lock_guard lock(mu_);
  std::vector<Change> changes;
  // Names the store knows but the list lacks: gone by the list's version.
  std::vector<std::string> names;
  for (const auto& [name, entry] : entries_) {
    if (!listed.contains(name)) {
      names.push_back(name);
    }
  }
  for (const auto& name : names) {
    Entry& entry = entries_.at(name);
    Ptr previous = std::exchange(entry.watched, nullptr);
    settleAfterDelete(entry, listed_at);
    refreshLocked(name);
    if (previous) {
      changes.push_back({std::move(previous), nullptr});
    }
  }
  // Names in the list: new or possibly changed.
  for (auto& [name, object] : listed) {
    Entry& entry = entries_[name];
    Ptr previous = std::exchange(entry.watched, object);
    settleAfterUpsert(entry);
    refreshLocked(name);
    if (!previous) {
      changes.push_back({nullptr, object});
    } else if (previous->metadata.resource_version != object->metadata.resource_version) {
      changes.push_back({std::move(previous), object});
    }
  }
  std::sort(changes.begin(), changes.end(), [](const Change& a, const Change& b) {
    const std::string name_a = storeKey((a.now ? a.now : a.old)->metadata);
    const std::string name_b = storeKey((b.now ? b.now : b.old)->metadata);
    return name_a < name_b;
  });
  return changes;
}

template <typename T>
void Store<T>::settleAfterUpsert(Entry& entry) {
  if (!entry.assumed || !entry.watched) {
    return;
  }
  const auto watched_at = resourceVersionAsInt(entry.watched->metadata.resource_version);
  const auto assumed_at = entry.assumed->resource_version;
  if (!watched_at || !assumed_at) {
    entry.assumed.reset();  // not comparable: trust the watch
    return;
  }
  // An assumed write is superseded by its own version or a newer one; an
  // assumed deletion only by a newer object (the deleted one may still be
  // reported before the DELETED event arrives).
  const bool superseded =
      entry.assumed->object ? *watched_at >= *assumed_at : *watched_at > *assumed_at;
  if (superseded) {
    entry.assumed.reset();
  }
}

template <typename T>
void Store<T>::settleAfterDelete(Entry& entry, std::optional<int64_t> deleted_at) {
  if (!entry.assumed) {
    return;
  }
  if (!entry.assumed->object) {
    entry.assumed.reset();  // the deletion we assumed happened
    return;
  }
  // A write newer than the deletion (a new object of the same name) stays.
  const auto assumed_at = entry.assumed->resource_version;
  if (!deleted_at || !assumed_at || *assumed_at <= *deleted_at) {
    entry.assumed.reset();
  }
}

template <typename T>
void Store<T>::refreshLocked(const std::string& name) {
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    return;
  }
  Entry& entry = it->second;
  entry.visible = entry.assumed ? entry.assumed->object : entry.watched;
  std::optional<std::string> key;
  if (entry.visible && index_func_) {
    key = index_func_(*entry.visible);
  }
  if (key != entry.index_key) {
    if (entry.index_key) {
      auto names = index_.find(*entry.index_key);
      names->second.erase(name);
      if (names->second.empty()) {
        index_.erase(names);
      }
    }
    if (key) {
      index_[*key].insert(name);
    }
    entry.index_key = std::move(key);
  }
  if (!entry.watched && !entry.assumed) {
    entries_.erase(it);
  }
}

template class Store<ResourceSlice>;
template class Store<PartialObjectMetadata>;
template class Store<Service>;
template class Store<EndpointSlice>;
template class Store<Pod>;

}  // namespace rsc::client
