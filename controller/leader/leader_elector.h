// LeaderElector: leader election on a coordination.k8s.io/v1 Lease with
// client-go's timings and semantics (lease 15 s, renew deadline 10 s, retry
// 2 s), judged by local observation times only, so clock skew between
// replicas does not matter. holdsLease() turns false at the renew deadline by
// the clock alone, even while run() is held up: slice writes check it
// (write_fence.h). Threading: run() blocks its caller and calls the callbacks
// there, except on_started_leading, which gets a thread of its own; the
// accessors are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <vector>

#include "client/kube_api.h"
#include "common/clock.h"
#include "common/status.h"

namespace rsc::controller::leader {

struct LeaderElectionOptions {
  // Required.
  client::KubeApi* api = nullptr;
  Clock* clock = nullptr;
  std::string lease_namespace;
  std::string lease_name;
  // Unique per process: "<pod or host name>_<random>".
  std::string identity;
  // client-go's defaults for core components; the constraints are
  // lease_duration > renew_deadline > 1.2 * retry_period.
  Clock::Duration lease_duration = std::chrono::seconds(15);
  Clock::Duration renew_deadline = std::chrono::seconds(10);
  Clock::Duration retry_period = std::chrono::seconds(2);
  // Called once, on a thread of its own, when this process becomes the
  // leader; `leading` is requested when leadership ends. May block (e.g. to
  // wait for a cache): renewals go on meanwhile.
  std::function<void(std::stop_token leading)> on_started_leading;
  // Called once on run()'s thread when leadership ends (the lease was lost, or
  // run() was asked to stop), before anything else: it must stop the work the
  // lease guards before it returns. Then on_started_leading's thread is
  // joined.
  std::function<void()> on_stopped_leading;
  // Called whenever the observed leader changes (empty: none).
  std::function<void(const std::string& identity)> on_new_leader;
  // Written into the Lease's annotations while we hold it, so that the
  // other replicas learn how to reach the leader (its inventory URL).
  std::map<std::string, std::string> holder_annotations;
};

class LeaderElector {
 public:
  static StatusOr<std::unique_ptr<LeaderElector>> create(LeaderElectionOptions options);

  // Campaigns until elected, then renews every retry period until `stop` is
  // requested or no renewal has succeeded within the renew deadline of the
  // last one (the lease is lost). Returns after on_stopped_leading (if it
  // led). Does not release the lease: call release() once the work the lease
  // guards has stopped.
  void run(std::stop_token stop);

  // One attempt to acquire or renew the lease; true if we hold it now.
  bool tryAcquireOrRenew();

  // For a holder that does not run() (--cleanup): one attempt to acquire or
  // renew the lease; true if we hold it now. Then, as after run() became the
  // leader, holdsLease() is true until the renew deadline of this attempt
  // and release() gives the lease up.
  bool tryHold();

  // Gives the lease up so that another replica takes over within one retry
  // period: holder cleared, duration 1 s. Only if we hold it.
  Status release();

  bool isLeader() const { return leading_.load(); }
  // True while this process leads and its last successful renewal (counted
  // from when it was sent) is younger than the renew deadline. Writes the
  // lease guards are allowed only while this holds.
  bool holdsLease() const;
  // The identity of the current leader as last observed ("" if none).
  std::string leader() const;
  // An annotation of the Lease as last observed ("" if absent), e.g. the
  // leader's inventory URL.
  std::string leaseAnnotation(const std::string& key) const;
  const std::string& identity() const { return options_.identity; }

  // For a follower whose leader stopped answering (its pod went away and
  // released the Lease, which the follower would learn only at its next
  // poll): cuts run()'s wait between polls short, so that the Lease is read
  // now, and returns once that poll is done (leader(), leaseAnnotation() and
  // isLeader() then say what it found: another leader, or this process, which
  // took a released lease), or at `deadline`. Returns at once while this
  // process leads or run() is not campaigning. Callers bound how often they
  // call it: every call costs a read of the Lease.
  void pollNow(Clock::TimePoint deadline);

 private:
  explicit LeaderElector(LeaderElectionOptions options);
  bool sleep(Clock::Duration d, const std::stop_token& stop);
  // Renews until the lease is lost (returns false) or `stop` is requested
  // (returns true).
  bool renew(const std::stop_token& stop);
  void setRenewedAt(Clock::TimePoint sent);
  Clock::Duration jittered(Clock::Duration d);
  void observe(const client::Lease& lease);
  // Writes holder_annotations into a lease we are about to hold.
  void stampAnnotations(client::Lease& lease) const;
  void setLeader(const std::string& identity);
  // Campaign poll `poll` is done: wakes the pollNow() callers that asked
  // before it began.
  void pollDone(uint64_t poll);

  LeaderElectionOptions options_;
  std::atomic<bool> leading_{false};
  std::mt19937_64 random_;
  // The lease as last read or written, and when we saw it change (local).
  std::optional<client::Lease> observed_;
  Clock::TimePoint observed_time_{};
  mutable std::mutex mu_;
  std::string leader_;                              // guarded by mu_
  std::map<std::string, std::string> annotations_;  // guarded by mu_
  // When the last successful acquisition or renewal was sent.
  Clock::TimePoint renewed_at_{};  // guarded by mu_
  // pollNow(): run() is campaigning (between the first poll and leading);
  // its current wait between polls, cut short through this (null while it
  // polls); a poll asked for while none waits; the polls begun so far; and
  // the callers waiting, each for the end of a poll begun after it asked.
  struct PollWaiter {
    std::stop_source* done;
    uint64_t poll;
  };
  bool campaigning_ = false;                // guarded by mu_
  std::stop_source* poll_waker_ = nullptr;  // guarded by mu_
  bool poll_asked_ = false;                 // guarded by mu_
  uint64_t polls_begun_ = 0;                // guarded by mu_
  std::vector<PollWaiter> poll_waiters_;    // guarded by mu_
};

// Returns "<name>_<16 random hex digits>", the identity convention of
// client-go (unique per process start).
std::string makeLeaderIdentity(const std::string& name);

}  // namespace rsc::controller::leader
