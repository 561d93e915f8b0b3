#include "controller/leadership.h"

#include "client/inventory_api.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "controller/observers.h"

namespace rsc::controller {

using client::kInventoryServerNameAnnotation;
using client::kInventoryUrlAnnotation;

Leadership::Leadership(LeadershipOptions options) : options_(std::move(options)) {}

Leadership::~Leadership() { stop(); }

bool Leadership::holdsLease() const {
  if (!options_.elect) return leads_without_election_.load();
  const leader::LeaderElector* e = holder_.load();
  return e != nullptr && e->holdsLease();
}

inventory::LeaderHooks Leadership::hooks() {
  // Unset hooks: this replica always leads.
  if (!options_.elect) return {};
  // Until the elector and the forwarder exist, this replica does not lead and
  // cannot forward (503), so no push is taken by a follower.
  inventory::LeaderHooks hooks;
  hooks.is_leader = [this] { return holdsLease(); };
  hooks.leader_identity = [this] {
    const leader::LeaderElector* e = holder_.load();
    return e != nullptr ? e->leader() : std::string();
  };
  hooks.forward = [this](const http::HttpRequest& req) {
    inventory::LeaderForwarder* f = forwarder_ptr_.load();
    return f != nullptr ? f->forward(req) : std::nullopt;
  };
  return hooks;
}

Status Leadership::start(std::stop_token stop) {
  if (options_.elect) return startElection();
  options_.metrics->setLeader(true);
  // Without election: lead once the caches synced. A stop ends the wait (the
  // API server may be out of reach); caches that never sync are the
  // controller's failure (--start-timeout).
  if (!options_.controller->waitForCacheSync(stop))
    return cancelled("stopped before the caches synced");
  options_.controller->startLeading();
  leads_without_election_ = true;
  return {};
}

Status Leadership::startElection() {
  // Lease calls get a client of their own, as client-go's leader election
  // does: one attempt each, bounded well inside the renew deadline, and never
  // queued behind slice writes in the shared rate limiter.
  auto transport = client::CpprestTransport::create(*options_.config, *options_.clock);
  if (!transport.ok()) return transport.status();
  lease_transport_ = std::move(*transport);
  client::RestKubeApiOptions api_options = options_.api_options;
  api_options.qps = 0;
  api_options.max_retries = 0;
  api_options.request_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.election.renew_deadline / 2);
  api_options.call_timeout = api_options.request_timeout;
  // Releasing the Lease is the last step of a shutdown: these calls are
  // bounded by their timeout alone, never abandoned.
  api_options.stop = {};
  auto api = client::RestKubeApi::create(*lease_transport_, *options_.clock, api_options);
  if (!api.ok()) return api.status();
  lease_api_ = std::move(*api);

  leader::LeaderElectionOptions lopts = options_.election;
  lopts.api = lease_api_.get();
  lopts.clock = options_.clock;
  const std::string own_url = options_.own_url();
  lopts.holder_annotations[kInventoryUrlAnnotation] = own_url;
  if (options_.tls && !options_.forwarding.tls_server_name.empty()) {
    lopts.holder_annotations[kInventoryServerNameAnnotation] = options_.forwarding.tls_server_name;
  }
  // On its own thread: the elector keeps renewing while the cache syncs.
  lopts.on_started_leading = [this](std::stop_token leading) {
    startedLeading(std::move(leading));
  };
  lopts.on_stopped_leading = [this] { stoppedLeading(); };
  auto elector = leader::LeaderElector::create(lopts);
  if (!elector.ok()) return elector.status();
  elector_ = std::move(*elector);
  options_.metrics->setLeader(false);

  inventory::LeaderForwarderOptions fopts = options_.forwarding;
  fopts.clock = options_.clock;
  fopts.own_url = own_url;
  leader::LeaderElector* e = elector_.get();
  fopts.leader_url = [e] { return e->leaseAnnotation(kInventoryUrlAnnotation); };
  // The leader is checked against an explicit CA bundle (the chart's), or,
  // without one, against this replica's own certificate (shared by all).
  if (fopts.ca_file.empty()) fopts.ca_file = options_.tls_cert_file;
  if (options_.certificates != nullptr) {
    fopts.ca_bundle = [c = options_.certificates] { return c->caBundle(); };
  }
  // The URL comes from the Lease: a follower sends nothing to it unless it is
  // https and verifies (or --forward-insecure); else it answers 503 naming
  // the leader.
  fopts.leader_identity = [e] { return e->leader(); };
  // A leader that cannot be reached may have gone and released the Lease:
  // the elector reads it at once (at most once per retry period).
  fopts.refresh_leader = [e](Clock::TimePoint deadline) { e->pollNow(deadline); };
  fopts.refresh_interval = options_.election.retry_period;
  fopts.refresh_wait = options_.election.retry_period;
  if (!options_.tls && !fopts.allow_insecure) {
    log::warning(
        "Inventory TLS is off: this replica does not forward pushes to the leader while it "
        "follows (503 naming the leader); --forward-insecure forwards them over plain http");
  }
  forwarder_ = std::make_unique<inventory::LeaderForwarder>(fopts);
  holder_ = e;
  forwarder_ptr_ = forwarder_.get();
  election_ = std::thread([e, stop = election_stop_.get_token()] {
    setThreadName("election");
    e->run(stop);
  });
  return {};
}

void Leadership::startedLeading(std::stop_token leading) {
  const leader::LeaderElectionOptions& lease = options_.election;
  recordLeadership(options_.events, lease.lease_namespace, lease.lease_name, lease.identity, true);
  options_.metrics->setLeader(true);
  if (options_.controller->waitForCacheSync(leading)) options_.controller->startLeading(leading);
}

void Leadership::stoppedLeading() {
  // Before anything else: no reconcile starts after this returns.
  options_.controller->stopLeading();
  options_.metrics->setLeader(false);
  if (options_.stopping.stop_requested() || election_stop_.stop_requested()) return;
  const leader::LeaderElectionOptions& lease = options_.election;
  recordLeadership(options_.events, lease.lease_namespace, lease.lease_name, lease.identity, false);
  // Another replica leads now; a fresh process is the safe way back.
  options_.fail(
      failedPrecondition("leader lease lost; exiting so that a fresh process can campaign again"));
}

void Leadership::stop() {
  if (stopped_.exchange(true)) return;
  if (election_.joinable()) {
    election_stop_.request_stop();
    election_.join();
  }
  // Nothing reaches the elector or the forwarder from here on.
  holder_ = nullptr;
  forwarder_ptr_ = nullptr;
  leads_without_election_ = false;
  if (elector_) {
    Status released = elector_->release();
    if (!released.ok()) log::error("Releasing the leader lease failed", released);
  }
}

}  // namespace rsc::controller
