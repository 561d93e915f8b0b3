// Leadership: the part of the service that decides which replica writes.
// With --leader-elect, a LeaderElector campaigns for the Lease on a thread of
// its own, the elected replica reconciles, and the others forward pushes to
// it (LeaderForwarder, over the URL the leader writes into the Lease). Without
// it, this replica leads once its caches synced. Leadership lost exits the
// process through the RunnableGroup (a fresh process campaigns again).
// Threading: start() and stop() on the group's thread; holdsLease() and
// hooks() are called from any thread, before start() and after stop() too.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "client/config.h"
#include "client/event_recorder.h"
#include "client/http_transport.h"
#include "client/rest_kube_api.h"
#include "common/clock.h"
#include "controller/inventory/certificate_secret.h"
#include "controller/inventory/forwarder.h"
#include "controller/inventory/handler.h"
#include "controller/leader/leader_elector.h"
#include "controller/reconcile/controller.h"
#include "controller/runnable_group.h"
#include "metrics/leader_election_metrics.h"

namespace rsc::controller {

struct LeadershipOptions {
  // Required.
  Clock* clock = nullptr;
  reconcile::Controller* controller = nullptr;
  metrics::LeaderElectionMetrics* metrics = nullptr;
  // Called once leadership is lost while no stop was requested.
  std::function<void(Status)> fail;
  // The process is stopping (a signal): leadership ending then is no failure.
  std::stop_token stopping;
  // Events about the Lease; may be null (--events=false).
  client::EventRecorder* events = nullptr;

  // --leader-elect: the rest is used only with it.
  bool elect = false;
  // The Lease (its namespace filled in) and this process's identity.
  leader::LeaderElectionOptions election;
  // How the Lease client reaches the API server, and its timeouts' base.
  const client::ClientConfig* config = nullptr;
  client::RestKubeApiOptions api_options;
  // The forwarding of pushes to the leader.
  inventory::LeaderForwarderOptions forwarding;
  // The inventory API's URL, written into the Lease; read at start(), once
  // the server is bound.
  std::function<std::string()> own_url;
  // The inventory API serves TLS; the certificate's CA checks the leader.
  bool tls = false;
  std::string tls_cert_file;
  inventory::CertificateSecret* certificates = nullptr;
};

class Leadership final : public Runnable {
 public:
  explicit Leadership(LeadershipOptions options);
  ~Leadership() override;

  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // Without --leader-elect: waits for the caches, then leads. With it: makes
  // the Lease client, the elector and the forwarder, and campaigns.
  Status start(std::stop_token stop) override;
  // Stops campaigning (the controller stopped leading before: its in-flight
  // writes are done) and releases the Lease so that a standby takes over.
  void stop() override;

  // This replica holds the Lease (always true without --leader-elect once it
  // leads): slice writes check it on every attempt.
  bool holdsLease() const;
  // The inventory handler's view: who leads, and the forwarding of pushes.
  inventory::LeaderHooks hooks();

 private:
  Status startElection();
  void startedLeading(std::stop_token leading);
  void stoppedLeading();

  LeadershipOptions options_;
  std::unique_ptr<client::HttpTransport> lease_transport_;
  std::unique_ptr<client::KubeApi> lease_api_;
  std::unique_ptr<leader::LeaderElector> elector_;
  std::unique_ptr<inventory::LeaderForwarder> forwarder_;
  // Set once the elector and the forwarder exist, cleared before they go.
  std::atomic<const leader::LeaderElector*> holder_{nullptr};
  std::atomic<inventory::LeaderForwarder*> forwarder_ptr_{nullptr};
  std::atomic<bool> leads_without_election_{false};
  std::atomic<bool> stopped_{false};
  std::stop_source election_stop_;
  std::thread election_;
};

}  // namespace rsc::controller
