#include "controller/cleanup.h"

#include <algorithm>
#include <memory>
#include <string>

#include "common/flag_set.h"
#include "common/log.h"
#include "controller/reconcile/reconciler.h"

namespace rsc::controller {

Status deleteManagedSlices(client::KubeApi& api, const std::function<Status()>& before_write) {
  auto may_write = [&before_write] { return before_write ? before_write() : okStatus(); };
  client::ListOptions selector;
  selector.label_selector =
      std::string(reconcile::kManagedByLabel) + "=" + reconcile::kManagedByValue;
  RETURN_IF_ERROR(may_write());
  if (Status s = api.deleteResourceSlices(selector); !s.ok()) {
    return s.withContext("deleting the managed ResourceSlices");
  }
  StatusOr<client::ResourceSliceList> left = api.listResourceSlices(selector);
  if (!left.ok()) return left.status().withContext("listing the managed ResourceSlices");
  for (const client::ResourceSlice& slice : left->items) {
    RETURN_IF_ERROR(may_write());
    Status d = api.deleteResourceSlice(slice.metadata.name, {});
    if (!d.ok() && d.code() != StatusCode::kNotFound) {
      return d.withContext("deleting ResourceSlice " + slice.metadata.name);
    }
  }
  return okStatus();
}

Status deleteManagedSlicesFenced(client::KubeApi& api, const FencedCleanupOptions& options) {
  StatusOr<std::unique_ptr<leader::LeaderElector>> made =
      leader::LeaderElector::create(options.election);
  if (!made.ok()) return made.status().withContext("cleanup");
  leader::LeaderElector& elector = **made;
  Clock& clock = *options.election.clock;
  const std::string lease = options.election.lease_namespace + "/" + options.election.lease_name;
  log::info("Cleanup: acquiring the leader Lease first, so that no controller writes meanwhile",
            {{"lease", lease},
             {"identity", options.election.identity},
             {"timeout", formatFlagDuration(options.lease_timeout)}});

  // Wait for the Lease: one attempt per retry period, until the timeout.
  const Clock::TimePoint deadline = clock.now() + options.lease_timeout;
  Clock::TimePoint renewed = clock.now();
  std::string waiting_for;
  while (!elector.tryHold()) {
    const std::string holder = elector.leader();
    if (holder != waiting_for) {
      log::info("Cleanup: waiting for the leader Lease", {{"lease", lease}, {"holder", holder}});
      waiting_for = holder;
    }
    const Clock::TimePoint now = clock.now();
    if (now >= deadline) {
      return deadlineExceeded(
          "cleanup: the leader Lease " + lease +
          (holder.empty()
               ? std::string(" could not be acquired (no holder seen; see the warnings above)")
               : " is still held by \"" + holder + "\"") +
          " after " + formatFlagDuration(options.lease_timeout) +
          " (--cleanup-lease-timeout); is a controller of this release still running?");
    }
    clock.sleepUntil(std::min(now + options.election.retry_period, deadline), options.stop);
    if (options.stop.stop_requested()) {
      return cancelled("cleanup: stopped while waiting for the leader Lease " + lease);
    }
    renewed = clock.now();
  }
  log::info("Cleanup: holding the leader Lease", {{"lease", lease}});

  // Delete while holding it: renewed once a retry period has passed, never
  // written past the renew deadline of the last renewal.
  auto hold = [&]() -> Status {
    if (clock.now() - renewed < options.election.retry_period && elector.holdsLease()) {
      return okStatus();
    }
    const Clock::TimePoint sent = clock.now();
    if (elector.tryHold()) {
      renewed = sent;
      return okStatus();
    }
    if (elector.holdsLease()) return okStatus();
    return failedPrecondition("cleanup: the leader Lease " + lease +
                              " was not renewed within the renew deadline; stopped deleting "
                              "(holder last seen: \"" +
                              elector.leader() + "\")");
  };
  Status deleted = deleteManagedSlices(api, hold);
  Status released = elector.release();
  if (!released.ok()) log::error("Cleanup: releasing the leader Lease failed", released);
  return deleted;
}

}  // namespace rsc::controller
