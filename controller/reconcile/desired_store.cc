#include "controller/reconcile/desired_store.h"

#include <algorithm>

namespace rsc::controller {

std::string_view poolPhaseName(PoolPhase phase) {
  switch (phase) {
    case PoolPhase::kPending:
      return "Pending";
    case PoolPhase::kPublished:
      return "Published";
    case PoolPhase::kFailed:
      return "Failed";
    case PoolPhase::kWithdrawing:
      return "Withdrawing";
  }
  return "Unknown";
}

bool DesiredStore::putLocked(const PoolKey& key, Pool pool, uint64_t* version) {
  const Clock::TimePoint now = clock_.now();
  auto desired = std::make_shared<DesiredPool>();
  desired->key = key;
  desired->pushed_at = now;
  desired->pushed_wall = clock_.systemNow();
  desired->lease_deadline = pool.lease.count() > 0 ? now + pool.lease : Clock::TimePoint::max();

  auto it = pools_.find(key);
  const bool changed = it == pools_.end() || !(it->second->pool == pool);
  if (changed) {
    desired->version = next_version_++;
  } else {
    // Same content: keep the version (and the time the content was first
    // pushed, which publish latency counts from), renew the lease.
    desired->version = it->second->version;
    desired->pushed_at = it->second->pushed_at;
  }
  desired->pool = std::move(pool);
  *version = desired->version;

  PoolStatus& status = statuses_[key];
  status.key = key;
  status.desired_version = desired->version;
  status.last_push = desired->pushed_wall;
  if (changed && status.phase != PoolPhase::kFailed) status.phase = PoolPhase::kPending;
  if (status.phase == PoolPhase::kWithdrawing) status.phase = PoolPhase::kPending;
  if (it != pools_.end()) unindexNodeLocked(key, *it->second);
  if (desired->pool.selection.node_name) by_node_[*desired->pool.selection.node_name].insert(key);
  pools_[key] = std::move(desired);
  return changed;
}

void DesiredStore::unindexNodeLocked(const PoolKey& key, const DesiredPool& desired) {
  if (!desired.pool.selection.node_name) return;
  auto node = by_node_.find(*desired.pool.selection.node_name);
  if (node == by_node_.end()) return;
  node->second.erase(key);
  if (node->second.empty()) by_node_.erase(node);
}

uint64_t DesiredStore::put(const PoolKey& key, Pool pool) {
  uint64_t version = 0;
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    changed = putLocked(key, std::move(pool), &version);
  }
  notifyStatus(key);
  if (changed) notifyChange({key});
  return version;
}

std::map<std::string, uint64_t> DesiredStore::replaceDriver(const std::string& driver,
                                                            std::map<std::string, Pool> pools) {
  std::map<std::string, uint64_t> versions;
  std::vector<PoolKey> changed;
  std::vector<PoolKey> touched;
  {
    std::lock_guard lock(mu_);
    std::vector<PoolKey> gone;
    for (const auto& [key, desired] : pools_) {
      if (key.driver == driver && !pools.contains(key.pool)) gone.push_back(key);
    }
    for (const PoolKey& key : gone) {
      if (removeLocked(key)) changed.push_back(key);
      touched.push_back(key);
    }
    for (auto& [name, pool] : pools) {
      PoolKey key{driver, name};
      uint64_t version = 0;
      if (putLocked(key, std::move(pool), &version)) changed.push_back(key);
      touched.push_back(key);
      versions[name] = version;
    }
  }
  for (const PoolKey& key : touched) notifyStatus(key);
  notifyChange(changed);
  return versions;
}

bool DesiredStore::removeLocked(const PoolKey& key) {
  auto it = pools_.find(key);
  if (it == pools_.end()) return false;
  unindexNodeLocked(key, *it->second);
  pools_.erase(it);
  PoolStatus& status = statuses_[key];
  status.key = key;
  status.phase = PoolPhase::kWithdrawing;
  status.desired_version = next_version_++;
  return true;
}

bool DesiredStore::remove(const PoolKey& key) {
  bool removed = false;
  {
    std::lock_guard lock(mu_);
    removed = removeLocked(key);
  }
  if (removed) {
    notifyStatus(key);
    notifyChange({key});
  }
  return removed;
}

bool DesiredStore::renew(const PoolKey& key) {
  std::lock_guard lock(mu_);
  auto it = pools_.find(key);
  if (it == pools_.end()) return false;
  if (it->second->pool.lease.count() > 0) {
    auto renewed = std::make_shared<DesiredPool>(*it->second);
    renewed->lease_deadline = clock_.now() + renewed->pool.lease;
    it->second = std::move(renewed);
  }
  return true;
}

std::vector<PoolKey> DesiredStore::expireLeases() {
  std::vector<PoolKey> expired;
  {
    std::lock_guard lock(mu_);
    const Clock::TimePoint now = clock_.now();
    for (const auto& [key, desired] : pools_) {
      if (desired->lease_deadline <= now) expired.push_back(key);
    }
    for (const PoolKey& key : expired) removeLocked(key);
  }
  for (const PoolKey& key : expired) notifyStatus(key);
  notifyChange(expired);
  return expired;
}

std::optional<Clock::TimePoint> DesiredStore::nextLeaseDeadline() const {
  std::lock_guard lock(mu_);
  std::optional<Clock::TimePoint> next;
  for (const auto& [key, desired] : pools_) {
    if (desired->lease_deadline == Clock::TimePoint::max()) continue;
    if (!next || desired->lease_deadline < *next) next = desired->lease_deadline;
  }
  return next;
}

std::shared_ptr<const DesiredPool> DesiredStore::get(const PoolKey& key) const {
  std::lock_guard lock(mu_);
  auto it = pools_.find(key);
  return it == pools_.end() ? nullptr : it->second;
}

std::vector<PoolKey> DesiredStore::keys(const std::optional<std::string>& driver) const {
  std::lock_guard lock(mu_);
  std::vector<PoolKey> out;
  for (const auto& [key, desired] : pools_) {
    if (!driver || key.driver == *driver) out.push_back(key);
  }
  return out;
}

std::vector<PoolKey> DesiredStore::keysOnNode(const std::string& node) const {
  std::lock_guard lock(mu_);
  auto it = by_node_.find(node);
  if (it == by_node_.end()) return {};
  return {it->second.begin(), it->second.end()};
}

std::optional<PoolStatus> DesiredStore::status(const PoolKey& key) const {
  std::lock_guard lock(mu_);
  auto it = statuses_.find(key);
  if (it == statuses_.end()) return std::nullopt;
  return it->second;
}

std::vector<PoolStatus> DesiredStore::statuses(const std::optional<std::string>& driver) const {
  std::lock_guard lock(mu_);
  std::vector<PoolStatus> out;
  for (const auto& [key, status] : statuses_) {
    if (!driver || key.driver == *driver) out.push_back(status);
  }
  return out;
}

void DesiredStore::updateStatus(const PoolKey& key,
                                const std::function<void(PoolStatus&)>& update) {
  {
    std::lock_guard lock(mu_);
    PoolStatus& status = statuses_[key];
    status.key = key;
    update(status);
  }
  notifyStatus(key);
}

void DesiredStore::eraseStatus(const PoolKey& key) {
  {
    std::lock_guard lock(mu_);
    // A pool pushed again meanwhile keeps its status.
    if (pools_.contains(key)) return;
    statuses_.erase(key);
  }
  notifyStatus(key);
}

void DesiredStore::notifyChange(const std::vector<PoolKey>& keys) {
  if (!on_change_) return;
  for (const PoolKey& key : keys) on_change_(key);
}

void DesiredStore::notifyStatus(const PoolKey& key) {
  if (on_status_) on_status_(key);
}

}  // namespace rsc::controller
