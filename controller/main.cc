// resourceslice-controller: flag parsing and wiring only. See DESIGN.md for
// what each part does; this file builds them, starts them in order, and
// stops them in the reverse order on SIGTERM: stop accepting pushes, let
// in-flight writes finish, release the leader Lease, exit 0. Signals are taken
// from the first instant, and shutdown is bounded by --shutdown-timeout.
#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stop_token>
#include <thread>

#include "client/config.h"
#include "client/event_recorder.h"
#include "client/http_transport.h"
#include "client/informer.h"
#include "client/rest_kube_api.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "controller/cleanup.h"
#include "controller/flags.h"
#include "controller/health_endpoint.h"
#include "controller/inventory/authenticator.h"
#include "controller/inventory/certificate_secret.h"
#include "controller/inventory/certificates.h"
#include "controller/inventory/endpoint.h"
#include "controller/inventory/forwarder.h"
#include "controller/inventory/handler.h"
#include "controller/inventory/http_server.h"
#include "controller/leader/leader_elector.h"
#include "controller/leader/lease_annotations.h"
#include "controller/leader/write_fence.h"
#include "controller/metrics_endpoint.h"
#include "controller/observers.h"
#include "controller/pull/discovery.h"
#include "controller/pull/fetcher.h"
#include "controller/pull/poller.h"
#include "controller/reconcile/controller.h"
#include "controller/reconcile/desired_store.h"
#include "controller/shutdown_signals.h"
#include "metrics/build_info.h"
#include "metrics/controller_metrics.h"
#include "metrics/event_metrics.h"
#include "metrics/inventory_metrics.h"
#include "metrics/leader_election_metrics.h"
#include "metrics/process_collector.h"
#include "metrics/pull_metrics.h"
#include "metrics/registry.h"
#include "metrics/rest_client_metrics.h"
#include "metrics/watch_metrics.h"
#include "metrics/work_queue_metrics.h"

#ifndef RSC_VERSION
#define RSC_VERSION "unknown"
#endif
#ifndef RSC_GIT_COMMIT
#define RSC_GIT_COMMIT "unknown"
#endif

namespace rsc {
namespace {

namespace inv = controller::inventory;

using controller::leader::kInventoryServerNameAnnotation;
using controller::leader::kInventoryUrlAnnotation;

// How soon a first certificate sync that failed is tried again.
constexpr Clock::Duration kCertificateSyncRetry = std::chrono::seconds(2);

int usageError(const std::string& message) {
  std::cerr << "resourceslice-controller: " << message << "\n";
  return 2;
}

// A part that could not start for a reason other than its flags' syntax (a
// port taken, no randomness for a key): exit code 1, the error logged.
int startFailed(std::string_view part, const Status& error) {
  log::error("Cannot start; exiting", error, {{"part", std::string(part)}});
  return 1;
}

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "resourceslice-controller";
  return buf;
}

// The self-signed certificate of a secure /metrics without certificate
// files, made in memory at start as controller-runtime does; scrapers skip
// verification or pin it by name. Names: the host (the pod) and loopback.
StatusOr<inv::TlsKeyPair> metricsSelfSigned(Clock& clock) {
  inv::CertificateRequest request;
  request.common_name = "resourceslice-controller-metrics";
  request.names = {hostName(), "localhost", "127.0.0.1"};
  if (const char* ip = std::getenv("POD_IP"); ip != nullptr && *ip != '\0') {
    request.names.emplace_back(ip);
  }
  request.not_before = clock.systemNow();
  return inv::issueServingCertificate(request, nullptr);
}

// Asks the API server for its release: counter sets go where it accepts them.
// When it cannot be read at start, the placement of Kubernetes 1.35 and later;
// a 1.34 server with partitionable devices on then refuses such pools, and
// the refusal is in their status.
controller::reconcile::ServerRelease serverReleaseOf(client::KubeApi& api) {
  StatusOr<client::ServerVersion> version = api.getServerVersion();
  if (!version.ok()) {
    log::warning("Cannot read the API server's version; counter sets go in slices of their own",
                 {{"error", version.status().toString()}});
    return {};
  }
  controller::reconcile::ServerRelease release;
  release.counter_placement =
      controller::reconcile::counterPlacementFor(version->majorNumber(), version->minorNumber());
  release.version = version->git_version;
  log::info("Kubernetes API server",
            {{"version", version->git_version},
             {"counterSets",
              release.counter_placement == controller::reconcile::CounterPlacement::kWithConsumers
                  ? "with their consumers"
                  : "in slices of their own"}});
  return release;
}

int run(const controller::ServiceFlags& flags) {
  Clock& clock = RealClock::instance();
  // Before anything that may block: SIGTERM is honoured from here on.
  controller::ShutdownSignals signals(clock, flags.shutdown_timeout);
  const std::stop_token stopping = signals.token();

  // Connect to the API server.
  StatusOr<client::ClientConfig> config =
      client::loadConfig(flags.kubeconfig, client::ConfigEnvironment::fromProcess(), flags.context);
  if (!config.ok()) return usageError(config.status().message());
  config->qps = flags.kube_api.qps;
  config->burst = flags.kube_api.burst;
  log::info("Kubernetes client configured",
            {{"server", config->server}, {"source", config->source}});
  // The namespace of the pod (the chart's), else the configuration's: where
  // the Lease and the inventory certificate live unless flags say otherwise.
  const std::string own_namespace = envOr("POD_NAMESPACE", config->namespace_);

  std::shared_ptr<prometheus::Registry> registry = metrics::newRegistry();
  metrics::RestClientMetrics rest_metrics(*registry);
  config->exec_run = flags.exec_plugin;
  config->exec_run.observer = [&rest_metrics](const client::ExecPluginCall& call) {
    rest_metrics.observeExecPluginCall(call.code, call.call_status);
  };
  auto transport = client::CpprestTransport::create(*config, clock);
  if (!transport.ok()) return usageError(transport.status().message());
  // With leader election, slice writes pass only while this replica holds the
  // lease (set once the elector exists); every attempt is checked, retries
  // included, so none leaves after the renew deadline.
  std::atomic<const controller::leader::LeaderElector*> lease_holder{nullptr};
  auto holds_lease = [&lease_holder] {
    const controller::leader::LeaderElector* e = lease_holder.load();
    return e != nullptr && e->holdsLease();
  };
  const bool fenced = flags.leader_elect && !flags.cleanup;
  controller::leader::WriteFence fence(**transport, holds_lease);
  client::HttpTransport& api_transport =
      fenced ? fence : static_cast<client::HttpTransport&>(**transport);
  client::RestKubeApiOptions api_options = flags.kube_api;
  api_options.stop = signals.abandonToken();
  api_options.request_observer = [&rest_metrics](const client::RequestResult& r) {
    int code = 0;
    try {
      code = std::stoi(r.code);
    } catch (const std::exception&) {
      code = metrics::RestClientMetrics::kNoResponse;
    }
    rest_metrics.observe(r.verb, r.host, code, r.duration);
  };
  auto api = client::RestKubeApi::create(api_transport, clock, api_options);
  if (!api.ok()) return usageError(api.status().message());
  // Token and access reviews get a client and a rate limit of their own, so
  // that callers with invented tokens cannot spend the publishing budget.
  client::RestKubeApiOptions auth_api_options = api_options;
  auth_api_options.qps = flags.auth_review.review_qps;
  auth_api_options.burst = flags.auth_review.review_burst;
  auto auth_api = client::RestKubeApi::create(**transport, clock, auth_api_options);
  if (!auth_api.ok()) return usageError(auth_api.status().message());

  if (flags.cleanup) {
    // With leader election, the slices are deleted under the controllers'
    // Lease: no replica still stopping can re-create one meanwhile.
    controller::FencedCleanupOptions cleanup;
    cleanup.election = flags.leader_election;
    cleanup.election.api = api->get();
    cleanup.election.clock = &clock;
    if (cleanup.election.lease_namespace.empty()) {
      cleanup.election.lease_namespace = own_namespace;
    }
    if (cleanup.election.identity.empty()) {
      cleanup.election.identity =
          controller::leader::makeLeaderIdentity(envOr("POD_NAME", hostName()) + "-cleanup");
    }
    cleanup.lease_timeout = flags.cleanup_lease_timeout;
    cleanup.stop = stopping;
    if (Status s = flags.leader_elect ? controller::deleteManagedSlicesFenced(**api, cleanup)
                                      : controller::deleteManagedSlices(**api);
        !s.ok()) {
      log::error("Cleanup failed", s);
      return 1;
    }
    log::info("Cleanup: every managed ResourceSlice is deleted");
    return 0;
  }

  // Metrics.
  metrics::BuildInfo build_info(*registry, RSC_VERSION, RSC_GIT_COMMIT);
  metrics::ControllerMetrics controller_metrics(*registry);
  controller_metrics.setMaxConcurrentReconciles(flags.controller.workers);
  metrics::WorkQueueMetrics queue_metrics(*registry, "resourceslice");
  metrics::WatchMetrics watch_metrics(*registry);
  metrics::InventoryMetrics inventory_metrics(*registry);
  metrics::LeaderElectionMetrics leader_metrics(*registry, flags.leader_election.lease_name);
  auto process_collector = std::make_shared<metrics::ProcessCollector>();
  controller::ReconcileMetricsObserver reconcile_observer(controller_metrics);
  controller::WorkQueueMetricsObserver queue_observer(queue_metrics);

  // Kubernetes Events: sent on a thread of their own, within --event-qps.
  metrics::EventMetrics event_metrics(*registry);
  const std::string identity =
      (flags.leader_election.identity.empty()
           ? controller::leader::makeLeaderIdentity(envOr("POD_NAME", hostName()))
           : flags.leader_election.identity);
  std::unique_ptr<client::EventRecorder> events;
  if (flags.events) {
    client::EventRecorderOptions eopts = flags.event_recorder;
    eopts.api = api->get();
    eopts.clock = &clock;
    eopts.reporting_instance = identity.substr(0, 128);  // the API server's limit
    eopts.observer = [&event_metrics](std::string_view reason, client::EventResult result) {
      event_metrics.recorded(reason, client::eventResultName(result));
    };
    auto made = client::EventRecorder::create(std::move(eopts));
    if (!made.ok()) return usageError(made.status().message());
    events = std::move(*made);
  }
  controller::ReconcileEventObserver event_observer(reconcile_observer, events.get());

  // The reconcile loop.
  controller::reconcile::DesiredStore store(clock);
  controller::reconcile::ControllerOptions copts = flags.controller;
  copts.api = api->get();
  copts.clock = &clock;
  copts.store = &store;
  copts.server_release_probe = [&api] { return serverReleaseOf(**api); };
  copts.probe_dropped_fields = true;
  copts.observer = &event_observer;
  copts.reconciler_observer = &event_observer;
  copts.queue_observer = &queue_observer;
  copts.on_watch_restart = [&watch_metrics](std::string_view resource, std::string_view reason) {
    const auto watched = resource == client::NodeMetadata::kResource
                             ? metrics::WatchedResource::kNodes
                             : metrics::WatchedResource::kResourceSlices;
    if (reason == "gone") {
      watch_metrics.restarted(watched, metrics::WatchRestartReason::kExpired);
    } else if (reason == "closed") {
      watch_metrics.restarted(watched, metrics::WatchRestartReason::kClosed);
    } else {
      watch_metrics.restarted(watched, metrics::WatchRestartReason::kError);
    }
  };
  auto controller = controller::reconcile::Controller::create(copts);
  if (!controller.ok()) return usageError(controller.status().message());

  // Pull mode: the drivers whose inventory endpoints the controller fetches itself, each over a
  // transport of its own (the API server's credentials are never sent to an endpoint).
  // One budget of bodies being decoded at once, for pushes and pulls alike.
  inv::DecodeBudgetOptions decode_budget_options = flags.decode_budget;
  decode_budget_options.clock = &clock;
  inv::DecodeBudget decode_budget(decode_budget_options);
  metrics::PullMetrics pull_metrics(*registry);
  controller::pull::PollerOptions pull_options = flags.pull;
  pull_options.fetch.decode_budget = &decode_budget;
  pull_options.store = &store;
  pull_options.clock = &clock;
  if (!flags.pull_ca_file.empty()) {
    StatusOr<std::string> ca = controller::inventory::readCertificateFile(flags.pull_ca_file);
    if (!ca.ok()) return usageError("flag --pull-ca-file: " + ca.status().message());
    pull_options.credentials.ca_pem = std::move(*ca);
  }
  pull_options.observer.on_fetch = [&pull_metrics](const std::string& driver,
                                                   std::string_view result, Clock::Duration took) {
    pull_metrics.fetched(driver, result, std::chrono::duration<double>(took).count());
  };
  pull_options.observer.on_success = [&pull_metrics](const std::string& driver,
                                                     Clock::SystemTime when) {
    pull_metrics.succeeded(driver, std::chrono::duration<double>(when.time_since_epoch()).count());
  };
  pull_options.observer.on_sources = [&pull_metrics](const std::string& driver, size_t sources) {
    pull_metrics.setSources(driver, sources);
  };
  pull_options.observer.on_expired = [&pull_metrics](const std::string& driver, size_t expired) {
    pull_metrics.setExpired(driver, expired);
  };
  pull_options.observer.on_ignored = [&pull_metrics](std::string_view reason) {
    pull_metrics.ignored(reason);
  };
  pull_options.observer.on_fetch_delay = [&pull_metrics](Clock::Duration late) {
    pull_metrics.fetchDelayed(std::chrono::duration<double>(late).count());
  };
  pull_options.observer.on_waiting = [&pull_metrics](size_t waiting) {
    pull_metrics.setWaiting(waiting);
  };
  auto poller = controller::pull::Poller::create(std::move(pull_options));
  if (!poller.ok()) return usageError(poller.status().message());
  // Discovered sources: the endpoints of labelled Services, handed to the poller whenever
  // their list changes.
  std::unique_ptr<controller::pull::SourceDiscovery> discovery;
  if (flags.pull_discovery) {
    controller::pull::DiscoveryOptions dopts = flags.discovery;
    dopts.on_refused = [&pull_metrics](std::string_view reason) { pull_metrics.ignored(reason); };
    discovery = std::make_unique<controller::pull::SourceDiscovery>(
        **api, clock, std::move(dopts),
        [p = poller->get()](const std::vector<controller::pull::SourceSpec>& sources) {
          p->setDiscovered(sources);
        });
  }

  // Who may push.
  std::unique_ptr<inv::Authenticator> authenticator;
  if (flags.auth == "none") {
    log::warning(
        "AUTHENTICATION IS OFF (--auth=none): anyone who reaches the inventory API can publish "
        "and withdraw any pool. Use this for local development only.");
    authenticator = std::make_unique<inv::NoAuthAuthenticator>();
  } else {
    inv::TokenReviewAuthenticatorOptions aopts = flags.auth_review;
    aopts.on_refused = [&inventory_metrics](inv::AuthRefusal refusal) {
      inventory_metrics.refused(refusal == inv::AuthRefusal::kClientRate ? "auth_client_rate"
                                                                         : "auth_review_rate");
    };
    aopts.on_rejected = [&inventory_metrics] { inventory_metrics.refused("token_rejected"); };
    authenticator = std::make_unique<inv::TokenReviewAuthenticator>(**auth_api, clock, aopts);
  }

  // The inventory API.
  inv::InventoryHandlerOptions hopts = flags.inventory;
  hopts.store = &store;
  hopts.authenticator = authenticator.get();
  hopts.clock = &clock;
  hopts.previewer = controller->get();
  hopts.decode_budget = &decode_budget;
  hopts.on_decode_refused = [&inventory_metrics] { inventory_metrics.refused("inflight_decoded"); };
  // A driver is pulled by configuration (--inventory-source, --pull-driver), never because a
  // Service claims it: a bound driver's pushes are refused before any endpoint answers.
  hopts.is_pulled = [p = poller->get(),
                     &bindings = flags.discovery.bindings](std::string_view driver) {
    return p->pulls(driver) ||
           std::ranges::any_of(bindings, [&](const controller::pull::PullBinding& b) {
             return b.driver == driver;
           });
  };
  hopts.on_push = [&inventory_metrics](std::string_view driver, int code) {
    inventory_metrics.push(driver, code);
  };
  hopts.on_pool_body = [&inventory_metrics](std::string_view driver, bool unchanged) {
    inventory_metrics.poolBody(driver, unchanged);
  };
  auto handler = inv::InventoryHandler::create(hopts);
  if (!handler.ok()) return usageError(handler.status().message());
  // With leader election the hooks are in place before the server accepts a
  // request: until the elector and the forwarder exist, this replica does not
  // lead and cannot forward (503), so no push is taken by a follower.
  std::atomic<inv::LeaderForwarder*> leader_forwarder{nullptr};
  if (flags.leader_elect) {
    inv::LeaderHooks hooks;
    hooks.is_leader = holds_lease;
    hooks.leader_identity = [&lease_holder] {
      const controller::leader::LeaderElector* e = lease_holder.load();
      return e != nullptr ? e->leader() : std::string();
    };
    hooks.forward = [&leader_forwarder](const inv::HttpRequest& req) {
      inv::LeaderForwarder* f = leader_forwarder.load();
      return f != nullptr ? f->forward(req) : std::nullopt;
    };
    (*handler)->setLeaderHooks(hooks);
  }
  inv::InventoryEndpoint endpoint(**handler, clock);
  store.setStatusListener(
      [&endpoint](const controller::reconcile::PoolKey& key) { endpoint.poolStatusChanged(key); });

  // The inventory API's self-signed certificate: made (or read) before the
  // server starts, so that the first connection is served with it; a signal
  // ends the wait for an API server out of reach.
  std::unique_ptr<inv::CertificateSecret> certificates;
  std::jthread certificate_sync;
  if (!flags.certificates.secret_name.empty()) {
    inv::CertificateSecretOptions copts = flags.certificates;
    copts.api = api->get();
    copts.clock = &clock;
    copts.namespace_ = own_namespace;
    copts.on_event = [&inventory_metrics](inv::CertificateEvent event) {
      inventory_metrics.certificateEvent(inv::certificateEventName(event));
    };
    auto made = inv::CertificateSecret::create(copts);
    if (!made.ok()) return usageError("flag --inventory-tls-secret: " + made.status().message());
    certificates = std::move(*made);
    // Serving waits for a certificate: the first sync is retried until it
    // succeeds (sync() logs why it failed) or a stop is requested.
    while (!certificates->sync().ok()) {
      clock.sleepUntil(clock.now() + kCertificateSyncRetry, stopping);
      if (stopping.stop_requested()) return 0;
    }
    certificate_sync = std::jthread([c = certificates.get()](std::stop_token stop) {
      setThreadName("cert-sync");
      c->run(std::move(stop));
    });
  }

  inv::HttpServerOptions iopts = flags.inventory_server;
  // Authentication and authorization before any body is read.
  iopts.admit = endpoint.admitHandler();
  iopts.on_refused = [&inventory_metrics](inv::Refusal refusal) {
    inventory_metrics.refused(inv::refusalName(refusal));
  };
  if (certificates) {
    iopts.tls_key_pair = [c = certificates.get()] { return c->current(); };
  }
  iopts.clock = &clock;
  iopts.name = "inventory";
  // The server's own refusals (413, 431, 503...) in the API's JSON error form.
  iopts.error_response = [](int code, std::string_view message) {
    return inv::errorResponse(code, message);
  };
  auto inventory_server = inv::HttpServer::start(iopts, endpoint.httpHandler());
  if (!inventory_server.ok()) {
    return startFailed("inventory server",
                       inventory_server.status().withContext("flag --inventory-bind-address"));
  }
  const bool tls = !flags.inventory_server.tls_cert_file.empty() || certificates != nullptr;
  if (!tls && flags.auth == "tokenreview") {
    log::warning(
        "THE INVENTORY API SERVES PLAIN HTTP: drivers' bearer tokens cross the network in clear "
        "text, and anyone who reads them can push as those drivers until they expire. Serve TLS "
        "with --inventory-tls-secret (self-signed) or --inventory-tls-cert-file.");
  }
  const std::string own_url = !flags.inventory_advertise_url.empty()
                                  ? flags.inventory_advertise_url
                                  : std::string(tls ? "https://" : "http://") +
                                        envOr("POD_IP", "127.0.0.1") + ":" +
                                        std::to_string((*inventory_server)->port());

  // Metrics and health probes. With --metrics-secure, /metrics checks the
  // caller's token (any audience the API server accepts, as a scraper's
  // service-account token has) with reviews of its own cache and budget.
  std::unique_ptr<inv::TokenReviewAuthenticator> metrics_authenticator;
  std::unique_ptr<controller::MetricsEndpoint> metrics_endpoint;
  std::unique_ptr<inv::HttpServer> metrics_server;
  if (flags.metrics_bind_address != "0") {
    controller::MetricsEndpointOptions meopts;
    meopts.collectables = {registry, process_collector};
    inv::HttpServerOptions mopts;
    mopts.bind_address = flags.metrics_bind_address;
    mopts.name = "metrics";
    mopts.clock = &clock;
    if (flags.metrics_secure) {
      inv::TokenReviewAuthenticatorOptions aopts = flags.auth_review;
      aopts.audience.clear();
      metrics_authenticator =
          std::make_unique<inv::TokenReviewAuthenticator>(**auth_api, clock, aopts);
      meopts.authenticator = metrics_authenticator.get();
      if (!flags.metrics_tls_cert_file.empty()) {
        mopts.tls_cert_file = flags.metrics_tls_cert_file;
        mopts.tls_key_file = flags.metrics_tls_key_file;
      } else if (certificates) {
        // The inventory API's certificate, which scrapers verify with the
        // published CA bundle.
        mopts.tls_key_pair = [c = certificates.get()] { return c->current(); };
      } else {
        StatusOr<inv::TlsKeyPair> self_signed = metricsSelfSigned(clock);
        if (!self_signed.ok()) return startFailed("metrics certificate", self_signed.status());
        auto pair = std::make_shared<const inv::TlsKeyPair>(std::move(*self_signed));
        mopts.tls_key_pair = [pair] { return pair; };
      }
    }
    metrics_endpoint = std::make_unique<controller::MetricsEndpoint>(std::move(meopts));
    mopts.admit = metrics_endpoint->admitHandler();
    auto server = inv::HttpServer::start(mopts, metrics_endpoint->httpHandler());
    if (!server.ok()) {
      return startFailed("metrics server",
                         server.status().withContext("flag --metrics-bind-address"));
    }
    metrics_server = std::move(*server);
  }
  controller::reconcile::Controller* ctrl = controller->get();
  std::unique_ptr<inv::HttpServer> health_server;
  if (flags.health_probe_bind_address != "0") {
    inv::HttpServerOptions popts;
    popts.bind_address = flags.health_probe_bind_address;
    popts.name = "health";
    popts.clock = &clock;
    auto server = inv::HttpServer::start(
        popts, [ctrl](const inv::HttpRequest& req, const inv::HttpServer::Responder& respond) {
          respond(controller::healthResponse(req, [ctrl] { return ctrl->hasSynced(); }));
        });
    if (!server.ok()) {
      return startFailed("health probe server",
                         server.status().withContext("flag --health-probe-bind-address"));
    }
    health_server = std::move(*server);
  }

  // Start watching; every replica keeps warm caches (slices and Nodes).
  ctrl->start();
  // Every replica polls: a new leader has the pulled state at once (see poller.h).
  (*poller)->start();
  if (discovery) discovery->start();
  log::info("Serving", {{"inventory", (*inventory_server)->address()},
                        {"advertise", own_url},
                        {"metrics", metrics_server ? metrics_server->address() : "off"},
                        {"metricsSecure", flags.metrics_secure},
                        {"health", health_server ? health_server->address() : "off"},
                        {"auth", flags.auth},
                        {"version", RSC_VERSION}});

  // Leadership: only the leader writes; the others forward pushes to it.
  std::atomic<int> exit_code{0};
  std::unique_ptr<client::HttpTransport> lease_transport;
  std::unique_ptr<client::KubeApi> lease_api;
  std::unique_ptr<controller::leader::LeaderElector> elector;
  std::unique_ptr<inv::LeaderForwarder> forwarder;
  std::stop_source election_stop;
  std::thread election;
  if (flags.leader_elect) {
    // Lease calls get a client of their own, as client-go's leader election
    // does: one attempt each, bounded well inside the renew deadline, and
    // never queued behind slice writes in the shared rate limiter.
    auto made_transport = client::CpprestTransport::create(*config, clock);
    if (!made_transport.ok()) return usageError(made_transport.status().message());
    lease_transport = std::move(*made_transport);
    client::RestKubeApiOptions lease_api_options = api_options;
    lease_api_options.qps = 0;
    lease_api_options.max_retries = 0;
    lease_api_options.request_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
        flags.leader_election.renew_deadline / 2);
    lease_api_options.call_timeout = lease_api_options.request_timeout;
    // Releasing the Lease is the last step of a shutdown: these calls are
    // bounded by their timeout alone, never abandoned.
    lease_api_options.stop = {};
    auto made_api = client::RestKubeApi::create(*lease_transport, clock, lease_api_options);
    if (!made_api.ok()) return usageError(made_api.status().message());
    lease_api = std::move(*made_api);

    controller::leader::LeaderElectionOptions lopts = flags.leader_election;
    lopts.api = lease_api.get();
    lopts.clock = &clock;
    if (lopts.lease_namespace.empty()) {
      lopts.lease_namespace = own_namespace;
    }
    lopts.identity = identity;
    lopts.holder_annotations[kInventoryUrlAnnotation] = own_url;
    if (tls && !flags.forwarding.tls_server_name.empty()) {
      lopts.holder_annotations[kInventoryServerNameAnnotation] = flags.forwarding.tls_server_name;
    }
    // On its own thread: the elector keeps renewing while the cache syncs.
    lopts.on_started_leading = [&, lease_ns = lopts.lease_namespace,
                                lease = lopts.lease_name](std::stop_token leading) {
      controller::recordLeadership(events.get(), lease_ns, lease, identity, true);
      leader_metrics.setLeader(true);
      if (ctrl->waitForCacheSync(leading)) ctrl->startLeading(leading);
    };
    lopts.on_stopped_leading = [&, lease_ns = lopts.lease_namespace, lease = lopts.lease_name] {
      // Before anything else: no reconcile starts after this returns.
      ctrl->stopLeading();
      leader_metrics.setLeader(false);
      if (!stopping.stop_requested()) {
        controller::recordLeadership(events.get(), lease_ns, lease, identity, false);
        // Another replica leads now; a fresh process is the safe way back.
        log::error("Lost leadership; exiting so that a fresh process can campaign again",
                   failedPrecondition("leader lease lost"));
        exit_code = 1;
        signals.requestStop();
      }
    };
    auto made = controller::leader::LeaderElector::create(lopts);
    if (!made.ok()) return usageError(made.status().message());
    elector = std::move(*made);
    leader_metrics.setLeader(false);

    inv::LeaderForwarderOptions fopts = flags.forwarding;
    fopts.clock = &clock;
    fopts.own_url = own_url;
    controller::leader::LeaderElector* e = elector.get();
    fopts.leader_url = [e] { return e->leaseAnnotation(kInventoryUrlAnnotation); };
    // The leader is checked against an explicit CA bundle (the chart's), or,
    // without one, against this replica's own certificate (shared by all).
    if (fopts.ca_file.empty()) fopts.ca_file = flags.inventory_server.tls_cert_file;
    if (certificates) fopts.ca_bundle = [c = certificates.get()] { return c->caBundle(); };
    // The URL comes from the Lease: a follower sends nothing to it unless it
    // is https and verifies (or --forward-insecure); else it answers 503
    // naming the leader, counted here.
    fopts.leader_identity = [e] { return e->leader(); };
    fopts.on_refused = [&inventory_metrics](std::string_view reason) {
      inventory_metrics.refused(reason);
    };
    if (!tls && !fopts.allow_insecure) {
      log::warning(
          "Inventory TLS is off: this replica does not forward pushes to the leader while it "
          "follows (503 naming the leader); --forward-insecure forwards them over plain http");
    }
    forwarder = std::make_unique<inv::LeaderForwarder>(fopts);
    lease_holder = e;
    leader_forwarder = forwarder.get();
    election = std::thread([e, stop = election_stop.get_token()] {
      setThreadName("election");
      e->run(stop);
    });
  } else {
    leader_metrics.setLeader(true);
    // A signal ends the wait: the API server may be out of reach.
    if (ctrl->waitForCacheSync(stopping)) ctrl->startLeading();
  }

  // Wait for SIGTERM or SIGINT, or a stop after the Lease was lost.
  signals.wait();

  // Stop accepting pushes, answer held ones (for half the shutdown budget),
  // finish in-flight writes, then give the Lease up so that a standby takes
  // over at once.
  endpoint.stop();
  (*inventory_server)->stop(flags.shutdown_timeout / 2);
  if (discovery) discovery->stop();
  (*poller)->stop();
  ctrl->stop();
  if (election.joinable()) {
    election_stop.request_stop();
    election.join();
  }
  if (elector) {
    Status released = elector->release();
    if (!released.ok()) log::error("Releasing the leader lease failed", released);
  }
  // Queued Events get a short while (client::kDefaultEventFlushTimeout) to go out.
  if (events) events->stop();
  // Nothing may reach the elector or the forwarder while they are destroyed.
  lease_holder = nullptr;
  leader_forwarder = nullptr;
  if (metrics_server) metrics_server->stop();
  if (certificate_sync.joinable()) {
    certificate_sync.request_stop();
    certificate_sync.join();
  }
  if (health_server) health_server->stop();
  log::info("Stopped");
  return exit_code.load();
}

}  // namespace
}  // namespace rsc

int main(int argc, char** argv) {
  // Two malloc arenas, before any thread starts: with one per thread, what large decodes freed
  // stays resident in per-thread heaps that malloc_trim gives back poorly (8 pulled 762 KB
  // bodies of empty devices: 104 MiB kept 20 s later, 21 MiB with two). MALLOC_ARENA_MAX wins.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
  const std::vector<std::string> args(argv + 1, argv + argc);
  rsc::StatusOr<rsc::controller::ServiceFlags> flags = rsc::controller::parseFlags(args);
  if (!flags.ok()) return rsc::usageError(flags.status().message());
  if (flags->help) {
    std::cout << rsc::controller::flagsUsage();
    return 0;
  }
  if (flags->version) {
    std::cout << "resourceslice-controller " << RSC_VERSION << " (" << RSC_GIT_COMMIT << ")\n";
    return 0;
  }
  rsc::log::configure(flags->log_format, flags->verbosity);

  // Signals are taken by ShutdownSignals' thread in run(); every thread
  // started from here inherits the mask, so none of them is interrupted.
  const sigset_t signals = rsc::controller::stopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A peer closing a socket must not kill the process.
  signal(SIGPIPE, SIG_IGN);

  return rsc::run(*flags);
}
