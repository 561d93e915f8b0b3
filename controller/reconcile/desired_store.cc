#include "controller/reconcile/desired_store.h"

#include <algorithm>
#include <type_traits>

namespace rsc::controller::reconcile {
namespace {

// pick(key, value) of each entry of `map` whose pool is of `driver` (of every
// pool when nullopt), in key order.
template <typename V, typename Pick>
auto entriesOf(const std::map<PoolKey, V>& map, const std::optional<std::string>& driver,
               Pick pick) {
  std::vector<std::invoke_result_t<Pick, const PoolKey&, const V&>> out;
  for (const auto& [key, value] : map) {
    if (!driver || key.driver == *driver) out.push_back(pick(key, value));
  }
  return out;
}

}  // namespace

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
    case PoolPhase::kHeld:
      return "Held";
  }
  return "Unknown";
}

std::optional<std::string> boundNode(const Pool& pool) {
  const NodeSelection& selection = pool.selection;
  if (selection.node_name) return selection.node_name;
  if (!selection.per_device_node_selection) return std::nullopt;
  std::optional<std::string> node;
  bool one_node = true;
  auto visit = [&](const std::vector<client::DeviceRef>& devices) {
    for (const client::DeviceRef& ref : devices) {
      if (!one_node) return;
      const client::Device device = ref.device();
      if (!device.node_name || (node && *node != *device.node_name)) {
        one_node = false;
        return;
      }
      node = device.node_name;
    }
  };
  visit(pool.devices);
  if (pool.slices) {
    for (const DesiredSlice& slice : *pool.slices) visit(slice.devices);
  }
  return one_node ? node : std::nullopt;
}

bool DesiredStore::putLocked(const PoolKey& key, Pool pool,
                             const std::optional<Digest128>& body_digest, uint64_t* version) {
  Entry& entry = pools_[key];
  const bool changed = entry.desired == nullptr || !(entry.desired->pool == pool);
  if (changed) {
    if (entry.desired) unindexNodeLocked(key, *entry.desired);
    auto desired = std::make_shared<DesiredPool>();
    desired->key = key;
    desired->pool = std::move(pool);
    desired->version = next_version_++;
    desired->pushed_at = clock_.now();
    if (const auto& node = desired->pool.selection.node_name) by_node_[*node].insert(key);
    entry.desired = std::move(desired);
    entry.body_digest = body_digest;
  } else if (body_digest) {
    // Equal content keeps its version and the time it was first pushed
    // (publish latency counts from there); the newest body stands for it.
    entry.body_digest = body_digest;
  }
  *version = entry.desired->version;
  const bool released = recordPushLocked(key, entry, changed);
  return changed || released;
}

bool DesiredStore::recordPushLocked(const PoolKey& key, Entry& entry, bool changed) {
  const Pool& pool = entry.desired->pool;
  entry.last_push = clock_.now();
  entry.lease_deadline =
      pool.lease.count() > 0 ? entry.last_push + pool.lease : Clock::TimePoint::max();
  PoolStatus& status = statuses_[key];
  status.key = key;
  status.desired_version = entry.desired->version;
  status.last_push = clock_.systemNow();
  const bool released = releaseLocked(key);
  if (changed && status.phase != PoolPhase::kFailed) status.phase = PoolPhase::kPending;
  if (status.phase == PoolPhase::kWithdrawing) status.phase = PoolPhase::kPending;
  return released;
}

bool DesiredStore::releaseLocked(const PoolKey& key) {
  auto it = statuses_.find(key);
  if (it == statuses_.end() || !it->second.hold) return false;
  it->second.hold.reset();
  it->second.phase = PoolPhase::kPending;
  it->second.released = true;
  return true;
}

bool DesiredStore::hold(const PoolKey& key, Clock::TimePoint deleted_at, PoolHold hold) {
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(key);
    if (it == pools_.end() || it->second.last_push > deleted_at) return false;
    PoolStatus& status = statuses_[key];
    if (status.hold) return false;
    status.key = key;
    status.phase = PoolPhase::kHeld;
    status.hold = std::move(hold);
    status.released = false;
  }
  notifyStatus(key);
  return true;
}

void DesiredStore::unindexNodeLocked(const PoolKey& key, const DesiredPool& desired) {
  if (!desired.pool.selection.node_name) return;
  auto node = by_node_.find(*desired.pool.selection.node_name);
  if (node == by_node_.end()) return;
  node->second.erase(key);
  if (node->second.empty()) by_node_.erase(node);
}

uint64_t DesiredStore::put(const PoolKey& key, Pool pool,
                           const std::optional<Digest128>& body_digest) {
  uint64_t version = 0;
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    changed = putLocked(key, std::move(pool), body_digest, &version);
  }
  notifyStatus(key);
  if (changed) notifyChange({key});
  return version;
}

std::shared_ptr<const DesiredPool> DesiredStore::getByBodyDigest(
    const PoolKey& key, const Digest128& body_digest) const {
  std::lock_guard lock(mu_);
  auto it = pools_.find(key);
  if (it == pools_.end() || it->second.body_digest != body_digest) return nullptr;
  return it->second.desired;
}

bool DesiredStore::repeatPush(const PoolKey& key, uint64_t version) {
  bool released = false;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(key);
    if (it == pools_.end() || it->second.desired->version != version) return false;
    released = recordPushLocked(key, it->second, /*changed=*/false);
  }
  notifyStatus(key);
  if (released) notifyChange({key});
  return true;
}

std::map<std::string, uint64_t> DesiredStore::replaceDriver(const std::string& driver,
                                                            std::map<std::string, Pool> pools) {
  std::map<std::string, uint64_t> versions;
  std::vector<PoolKey> changed;
  std::vector<PoolKey> touched;
  {
    std::lock_guard lock(mu_);
    std::vector<PoolKey> gone;
    for (const auto& [key, entry] : pools_) {
      if (key.driver == driver && !pools.contains(key.pool)) gone.push_back(key);
    }
    for (const PoolKey& key : gone) {
      if (removeLocked(key)) changed.push_back(key);
      touched.push_back(key);
    }
    for (auto& [name, pool] : pools) {
      PoolKey key{driver, name};
      uint64_t version = 0;
      if (putLocked(key, std::move(pool), std::nullopt, &version)) changed.push_back(key);
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
  if (it->second.desired) unindexNodeLocked(key, *it->second.desired);
  pools_.erase(it);
  PoolStatus& status = statuses_[key];
  status.key = key;
  status.phase = PoolPhase::kWithdrawing;
  status.hold.reset();
  status.released = false;
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
  bool released = false;
  {
    std::lock_guard lock(mu_);
    auto it = pools_.find(key);
    if (it == pools_.end()) return false;
    Entry& entry = it->second;
    entry.last_push = clock_.now();
    const std::chrono::seconds lease = entry.desired->pool.lease;
    if (lease.count() > 0) entry.lease_deadline = entry.last_push + lease;
    released = releaseLocked(key);
  }
  if (released) {
    notifyStatus(key);
    notifyChange({key});
  }
  return true;
}

std::vector<PoolKey> DesiredStore::expireLeases() {
  std::vector<PoolKey> expired;
  {
    std::lock_guard lock(mu_);
    const Clock::TimePoint now = clock_.now();
    for (const auto& [key, entry] : pools_) {
      if (entry.lease_deadline <= now) expired.push_back(key);
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
  for (const auto& [key, entry] : pools_) {
    if (entry.lease_deadline == Clock::TimePoint::max()) continue;
    if (!next || entry.lease_deadline < *next) next = entry.lease_deadline;
  }
  return next;
}

std::optional<Clock::TimePoint> DesiredStore::leaseDeadline(const PoolKey& key) const {
  std::lock_guard lock(mu_);
  auto it = pools_.find(key);
  if (it == pools_.end()) return std::nullopt;
  return it->second.lease_deadline;
}

std::shared_ptr<const DesiredPool> DesiredStore::get(const PoolKey& key) const {
  std::lock_guard lock(mu_);
  auto it = pools_.find(key);
  return it == pools_.end() ? nullptr : it->second.desired;
}

std::vector<PoolKey> DesiredStore::keys(const std::optional<std::string>& driver) const {
  std::lock_guard lock(mu_);
  return entriesOf(pools_, driver, [](const PoolKey& key, const Entry&) { return key; });
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
  return entriesOf(statuses_, driver,
                   [](const PoolKey&, const PoolStatus& status) { return status; });
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

void DesiredStore::setServerRelease(ServerRelease release) {
  std::lock_guard lock(mu_);
  server_release_ = std::move(release);
}

std::optional<ServerRelease> DesiredStore::serverRelease() const {
  std::lock_guard lock(mu_);
  return server_release_;
}

}  // namespace rsc::controller::reconcile
