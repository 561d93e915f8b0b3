// deleteManagedSlices: what --cleanup does for the chart's post-delete hook:
// deletes every ResourceSlice this controller manages (by its managed-by
// label) and succeeds only when none is left. deleteManagedSlicesFenced does
// it while holding the controllers' leader Lease (--cleanup --leader-elect),
// so that no replica still shutting down re-creates a slice meanwhile. Used
// by main before anything else starts; blocks its caller on the API server
// (and on the Lease), on no thread of its own.
#pragma once

#include <chrono>
#include <functional>
#include <stop_token>

#include "client/kube_api.h"
#include "common/clock.h"
#include "common/status.h"
#include "controller/leader/leader_elector.h"

namespace rsc::controller {

// Deletes the managed slices with one collection delete, then each one the
// list still shows (a slice already gone counts as deleted). Fails with the
// first error, with context. `before_write`, when set, is called before each
// delete; an error from it stops the cleanup and is returned.
Status deleteManagedSlices(client::KubeApi& api,
                           const std::function<Status()>& before_write = nullptr);

struct FencedCleanupOptions {
  // Required: the controllers' Lease (api, clock, lease_namespace,
  // lease_name), an identity of this process's own, and the timings
  // (retry_period: how often the Lease is tried; renew_deadline: how long one
  // acquisition or renewal lets us write). The callbacks are not used.
  leader::LeaderElectionOptions election;
  // --cleanup-lease-timeout: how long to wait for the Lease before failing.
  // A leader that stops releases it at once, a killed one's expires after
  // the lease duration (15 s).
  Clock::Duration lease_timeout = std::chrono::seconds(60);
  // Ends the wait for the Lease early (SIGTERM): the cleanup fails, deleting
  // nothing.
  std::stop_token stop;
};

// Acquires the Lease (one attempt per retry period, up to lease_timeout),
// then deletes the managed slices, renewing the Lease before a delete once a
// retry period has passed since the last renewal and stopping if it is lost,
// then releases it. Fails with DeadlineExceeded naming the Lease and its
// holder when the wait runs out; with Cancelled if `stop` ends the wait; with
// FailedPrecondition if the Lease is lost while deleting.
Status deleteManagedSlicesFenced(client::KubeApi& api, const FencedCleanupOptions& options);

}  // namespace rsc::controller
