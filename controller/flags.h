// The service's command line: every flag with its help text, bound (through a
// common/flag_set.h FlagSet) to the option it sets, and a parser that names the
// offending flag in its error. main() exits 2 on a parse error, as Go's flag
// package does. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "client/config.h"
#include "client/event_recorder.h"
#include "client/rest_kube_api.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/http/http_server.h"
#include "controller/inventory/authenticator.h"
#include "controller/inventory/certificate_secret.h"
#include "controller/inventory/forwarder.h"
#include "controller/inventory/handler.h"
#include "controller/leader/leader_elector.h"
#include "controller/pool/decode_budget.h"
#include "controller/pull/discovery.h"
#include "controller/pull/poller.h"
#include "controller/reconcile/controller.h"

namespace rsc::controller {

// The service's command line. A flag that sets an option of a component is
// bound to that component's Options here, so that its default is the one the
// component declares and main() hands the Options on, adding what no flag sets
// (the API client, the clock, observers). The constructor sets the few
// defaults that are the service's own.
struct ServiceFlags {
  ServiceFlags();

  // The API server: --kubeconfig and --context (kubectl's; a context skips
  // in-cluster config), and the client's budget (qps, burst, call_timeout of
  // --kube-api-*) and its exec credential plugins' limits.
  std::string kubeconfig;
  std::string context;
  client::RestKubeApiOptions kube_api;
  client::ExecRunOptions exec_plugin;

  // Leader election; an empty lease_namespace is the pod's, an empty identity
  // POD_NAME or the host name, plus a random suffix.
  bool leader_elect = false;
  leader::LeaderElectionOptions leader_election;

  // The inventory API: its server (address, limits, timeouts, TLS files), its
  // handler (body limits, --allow-unbound-node-pools), how other replicas
  // reach this one when it leads (empty: POD_IP and the inventory port), and
  // how a follower checks the leader it forwards to.
  http::HttpServerOptions inventory_server;
  inventory::InventoryHandlerOptions inventory;
  // The one budget of bodies being decoded at once, pushes and pulls
  // (--max-inflight-decoded-bytes); main makes it and hands it to the handler and the fetchers.
  pool::DecodeBudgetOptions decode_budget;
  std::string inventory_advertise_url;
  inventory::LeaderForwarderOptions forwarding;
  // Self-signed TLS of the inventory API; an empty secret_name: off.
  inventory::CertificateSecretOptions certificates;

  // Who may push: "tokenreview" (with auth_review's audience and budgets) or
  // "none".
  std::string auth = "tokenreview";
  inventory::TokenReviewAuthenticatorOptions auth_review;

  // /metrics, over HTTPS for callers whose token passes TokenReview and a
  // SubjectAccessReview for get on /metrics with metrics_secure
  // (controller-runtime's --metrics-secure; the chart turns it on), with a
  // self-signed certificate made in memory when no files are given. "0": off.
  std::string metrics_bind_address = ":8080";
  bool metrics_secure = false;
  std::string metrics_tls_cert_file;
  std::string metrics_tls_key_file;
  std::string health_probe_bind_address = ":8081";

  // Kubernetes Events: on or off, where Events about cluster-scoped objects
  // go, the sender's rate limit and its queue.
  bool events = true;
  client::EventRecorderOptions event_recorder;

  // The reconcile loop: workers, parallel writes, adoption grace.
  reconcile::ControllerOptions controller;

  // Pull mode (issue 18): the sources of --inventory-source, how often, how
  // long one fetch may take, how long a source may fail before its pools are
  // withdrawn, and the endpoints' token file; the CA bundle that main reads
  // into pull.credentials; and discovery of endpoints from labelled Services.
  pull::PollerOptions pull;
  std::string pull_ca_file;
  bool pull_discovery = false;
  pull::DiscoveryOptions discovery;

  // How long shutdown after SIGTERM may take in all: below the chart's
  // terminationGracePeriodSeconds (30 s), so that the process exits on its own
  // and releases the Lease instead of being killed.
  std::chrono::milliseconds shutdown_timeout{25'000};
  std::chrono::milliseconds start_timeout{120'000};
  log::Format log_format = log::Format::kText;
  int verbosity = 0;
  bool cleanup = false;
  // With --cleanup --leader-elect: the longest wait for the leader Lease.
  std::chrono::milliseconds cleanup_lease_timeout{60'000};
  bool help = false;
  bool version = false;
};

// Parses argv[1..]. Accepts --flag=value, --flag value, -flag, and for
// booleans --flag / --flag=false. Fails with InvalidArgument naming the flag.
// The one body limit (--max-request-bytes, --max-decoded-bytes) and
// --allow-unbound-node-pools are copied to every Options they apply to.
StatusOr<ServiceFlags> parseFlags(const std::vector<std::string>& args);

// The --help text: each flag with its default, unless that is empty, false
// or zero.
std::string flagsUsage();

}  // namespace rsc::controller
