#include "controller/service.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>
#include <utility>

#include "client/config.h"
#include "client/event_recorder.h"
#include "client/http_transport.h"
#include "client/load_config.h"
#include "client/rest_kube_api.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "common/worker_pool.h"
#include "controller/cleanup.h"
#include "controller/health_endpoint.h"
#include "controller/http/certificates.h"
#include "controller/http/http_server.h"
#include "controller/inventory/authenticator.h"
#include "controller/inventory/certificate_secret.h"
#include "controller/inventory/endpoint.h"
#include "controller/inventory/handler.h"
#include "controller/leader/write_fence.h"
#include "controller/leadership.h"
#include "controller/metrics_endpoint.h"
#include "controller/observers.h"
#include "controller/pool/decode_budget.h"
#include "controller/pull/discovery.h"
#include "controller/pull/poller.h"
#include "controller/reconcile/controller.h"
#include "controller/reconcile/desired_store.h"
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

namespace rsc::controller {
namespace {

namespace inv = inventory;

// How soon a first certificate sync that failed is tried again.
constexpr Clock::Duration kCertificateSyncRetry = std::chrono::seconds(2);

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
StatusOr<http::TlsKeyPair> metricsSelfSigned(Clock& clock) {
  http::CertificateRequest request;
  request.common_name = "resourceslice-controller-metrics";
  request.names = {hostName(), "localhost", "127.0.0.1"};
  if (const char* ip = std::getenv("POD_IP"); ip != nullptr && *ip != '\0') {
    request.names.emplace_back(ip);
  }
  request.not_before = clock.systemNow();
  return http::issueServingCertificate(request, nullptr);
}

// --metrics-secure without certificate files: a self-signed certificate.
Status selfSign(http::HttpServerOptions& options, Clock& clock) {
  StatusOr<http::TlsKeyPair> pair = metricsSelfSigned(clock);
  if (!pair.ok()) return pair.status().withContext("metrics certificate");
  auto shared = std::make_shared<const http::TlsKeyPair>(std::move(*pair));
  options.tls_key_pair = [shared] { return shared; };
  return {};
}

// An HttpServer started by its part and stopped by it.
class ServerPart final : public Runnable {
 public:
  // `flag` names the bind address's flag in a failure.
  // `started`, when set, is called once the server listens.
  ServerPart(http::HttpServerOptions options, http::HttpServer::Handler handler, std::string flag,
             std::unique_ptr<http::HttpServer>& server, std::function<void()> started = nullptr)
      : options_(std::move(options)),
        handler_(std::move(handler)),
        flag_(std::move(flag)),
        server_(server),
        started_(std::move(started)) {}
  Status start(std::stop_token) override {
    if (prepare) {
      if (Status s = prepare(options_); !s.ok()) return s;
    }
    auto server = http::HttpServer::start(options_, handler_);
    if (!server.ok()) return server.status().withContext("flag --" + flag_);
    server_ = std::move(*server);
    if (started_) started_();
    return {};
  }
  void stop() override { server_->stop(); }

  // Run by start() before the server starts: what may fail at start only
  // (a certificate made in memory).
  std::function<Status(http::HttpServerOptions&)> prepare;

 private:
  http::HttpServerOptions options_;
  http::HttpServer::Handler handler_;
  std::string flag_;
  std::unique_ptr<http::HttpServer>& server_;
  std::function<void()> started_;
};

// The inventory API's certificate: the first sync before anything serves with
// it, retried until it succeeds, a stop, or --start-timeout; then kept in
// step on a thread of its own.
class CertificatePart final : public Runnable {
 public:
  CertificatePart(inv::CertificateSecret& certificates, Clock& clock, Clock::Duration timeout)
      : certificates_(certificates), clock_(clock), timeout_(timeout) {}
  Status start(std::stop_token stop) override {
    const Clock::TimePoint deadline = clock_.now() + timeout_;
    for (Status s = certificates_.sync(); !s.ok(); s = certificates_.sync()) {
      if (clock_.now() + kCertificateSyncRetry > deadline) {
        return s.withContext("first sync not done within --start-timeout");
      }
      clock_.sleepUntil(clock_.now() + kCertificateSyncRetry, stop);
      if (stop.stop_requested()) return cancelled("stopped before the first sync");
    }
    thread_ = std::jthread([c = &certificates_](std::stop_token stop) {
      setThreadName("cert-sync");
      c->run(std::move(stop));
    });
    return {};
  }
  void stop() override {
    thread_.request_stop();
    thread_.join();
  }

 private:
  inv::CertificateSecret& certificates_;
  Clock& clock_;
  const Clock::Duration timeout_;
  std::jthread thread_;
};

// The metric structs the parts report to, on one registry.
struct ServiceMetrics {
  ServiceMetrics(prometheus::Registry& r, const ServiceFlags& flags, const ServiceBuild& build)
      : build_info(r, build.version, build.git_commit),
        controller(r),
        queue(r, "resourceslice"),
        watch(r),
        inventory(r),
        leader(r, flags.leader_election.lease_name),
        events(r),
        pull(r),
        reconcile_observer(controller),
        queue_observer(queue) {
    controller.setMaxConcurrentReconciles(flags.controller.workers);
  }
  metrics::BuildInfo build_info;
  metrics::ControllerMetrics controller;
  metrics::WorkQueueMetrics queue;
  metrics::WatchMetrics watch;
  metrics::InventoryMetrics inventory;
  metrics::LeaderElectionMetrics leader;
  metrics::EventMetrics events;
  metrics::PullMetrics pull;
  ReconcileMetricsObserver reconcile_observer;
  WorkQueueMetricsObserver queue_observer;
};

}  // namespace

// Every part, in the order it is built; destroyed in the reverse order.
struct Service::Parts {
  Parts(const ServiceFlags& f, ServiceBuild b, ShutdownSignals& s, RunnableGroup& g)
      : flags(f), build(std::move(b)), signals(s), group(g) {}

  Status buildClients();
  Status buildReconcile();
  Status buildPull();
  Status buildInventory();
  Status buildServers();
  void buildLeadership();
  void addParts();
  void logServing() const;
  void addIf(std::string name, std::unique_ptr<Runnable> part) {
    if (part) group.add(std::move(name), std::move(part));
  }
  // A part whose start() cannot fail and whose stop() ends it.
  template <typename T>
  void addStartStop(std::string name, T* part) {
    group.add(
        std::move(name),
        [part](std::stop_token) {
          part->start();
          return Status();
        },
        [part] { part->stop(); });
  }
  void addLeadership(std::string name) {
    group.add(
        std::move(name), [l = leadership.get()](std::stop_token stop) { return l->start(stop); },
        [l = leadership.get()] { l->stop(); });
  }
  // The URL pushes are forwarded to: the advertised one, else this pod's.
  std::string ownUrl() const {
    if (!flags.inventory_advertise_url.empty()) return flags.inventory_advertise_url;
    return std::string(tls ? "https://" : "http://") + envOr("POD_IP", "127.0.0.1") + ":" +
           std::to_string(inventory_server->port());
  }

  const ServiceFlags& flags;
  const ServiceBuild build;
  ShutdownSignals& signals;
  RunnableGroup& group;
  Clock& clock = RealClock::instance();
  std::string own_namespace;
  std::string identity;

  // Blocking and periodic work off the I/O threads: the endpoints' (reviews,
  // forwarding, decodes, held pushes' deadlines) and the controller's
  // housekeeping, each within its own bound; room for every bound, so none
  // waits for another. Declared before its users, which it outlives.
  WorkerPool work{clock, "service-work",
                  inv::InventoryEndpoint::kDefaultWorkers + MetricsEndpointOptions{}.workers + 1};

  // API clients.
  client::ClientConfig config;
  std::shared_ptr<prometheus::Registry> registry = metrics::newRegistry();
  metrics::RestClientMetrics rest_metrics{*registry};
  std::unique_ptr<client::HttpTransport> transport;
  std::unique_ptr<leader::WriteFence> fence;
  client::RestKubeApiOptions api_options;
  std::unique_ptr<client::KubeApi> api;
  std::unique_ptr<client::KubeApi> auth_api;

  // Metrics, Events and the reconcile loop.
  std::unique_ptr<ServiceMetrics> metrics;
  std::shared_ptr<metrics::ProcessCollector> process_collector =
      std::make_shared<metrics::ProcessCollector>();
  std::unique_ptr<client::EventRecorder> events;
  std::unique_ptr<ReconcileEventObserver> event_observer;
  std::unique_ptr<reconcile::DesiredStore> store;
  std::unique_ptr<reconcile::Controller> controller;

  // Pull mode.
  std::unique_ptr<pool::DecodeBudget> decode_budget;
  std::unique_ptr<pull::Poller> poller;
  std::unique_ptr<pull::SourceDiscovery> discovery;

  std::unique_ptr<inv::Authenticator> authenticator;
  std::unique_ptr<inv::InventoryHandler> handler;
  std::unique_ptr<inv::InventoryEndpoint> endpoint;
  std::unique_ptr<inv::CertificateSecret> certificates;
  bool tls = false;
  std::unique_ptr<http::HttpServer> inventory_server;
  std::unique_ptr<inv::TokenReviewAuthenticator> metrics_authenticator;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  std::unique_ptr<http::HttpServer> metrics_server;
  std::unique_ptr<http::HttpServer> health_server;
  // The servers' parts, until addParts() hands them to the group.
  std::unique_ptr<Runnable> health_part;
  std::unique_ptr<Runnable> certificate_part;
  std::unique_ptr<Runnable> metrics_part;
  std::unique_ptr<Runnable> inventory_part;

  std::unique_ptr<Leadership> leadership;
};

Status Service::Parts::buildClients() {
  StatusOr<client::ClientConfig> loaded =
      client::loadConfig(flags.kubeconfig, client::ConfigEnvironment::fromProcess(), flags.context);
  if (!loaded.ok()) return loaded.status();
  config = std::move(*loaded);
  config.qps = flags.kube_api.qps;
  config.burst = flags.kube_api.burst;
  log::info("Kubernetes client configured", {{"server", config.server}, {"source", config.source}});
  // The namespace of the pod (the chart's), else the configuration's: where
  // the Lease and the inventory certificate live unless flags say otherwise.
  own_namespace = envOr("POD_NAMESPACE", config.namespace_);
  identity = flags.leader_election.identity.empty()
                 ? leader::makeLeaderIdentity(envOr("POD_NAME", hostName()))
                 : flags.leader_election.identity;

  config.exec_run = flags.exec_plugin;
  config.exec_run.observer = [this](const client::ExecPluginCall& call) {
    rest_metrics.observeExecPluginCall(call.code, call.call_status);
  };
  auto made = client::CpprestTransport::create(config, clock);
  if (!made.ok()) return made.status();
  transport = std::move(*made);
  // With leader election, slice writes pass only while this replica holds the
  // lease; every attempt is checked, retries included, so none leaves after
  // the renew deadline.
  fence = std::make_unique<leader::WriteFence>(
      *transport, [this] { return leadership != nullptr && leadership->holdsLease(); });
  const bool fenced = flags.leader_elect && !flags.cleanup;
  api_options = flags.kube_api;
  api_options.stop = signals.abandonToken();
  api_options.request_observer = restRequestObserver(rest_metrics);
  auto made_api = client::RestKubeApi::create(fenced ? *fence : *transport, clock, api_options);
  if (!made_api.ok()) return made_api.status();
  api = std::move(*made_api);
  // Token and access reviews get a client and a rate limit of their own, so
  // that callers with invented tokens cannot spend the publishing budget.
  client::RestKubeApiOptions auth_options = api_options;
  auth_options.qps = flags.auth_review.review_qps;
  auth_options.burst = flags.auth_review.review_burst;
  auto made_auth = client::RestKubeApi::create(*transport, clock, auth_options);
  if (!made_auth.ok()) return made_auth.status();
  auth_api = std::move(*made_auth);
  return {};
}

Status Service::Parts::buildReconcile() {
  metrics = std::make_unique<ServiceMetrics>(*registry, flags, build);
  // Kubernetes Events: sent on a thread of their own, within --event-qps.
  if (flags.events) {
    client::EventRecorderOptions eopts = flags.event_recorder;
    eopts.api = api.get();
    eopts.clock = &clock;
    eopts.reporting_instance = identity.substr(0, 128);  // the API server's limit
    eopts.observer = [this](std::string_view reason, client::EventResult result) {
      metrics->events.recorded(reason, client::eventResultName(result));
    };
    auto made = client::EventRecorder::create(std::move(eopts));
    if (!made.ok()) return made.status();
    events = std::move(*made);
  }
  event_observer =
      std::make_unique<ReconcileEventObserver>(metrics->reconcile_observer, events.get());

  store = std::make_unique<reconcile::DesiredStore>(clock);
  reconcile::ControllerOptions copts = flags.controller;
  copts.api = api.get();
  copts.clock = &clock;
  copts.store = store.get();
  copts.server_release_probe = [this] { return reconcile::probeServerRelease(*api); };
  copts.probe_dropped_fields = true;
  copts.observer = event_observer.get();
  copts.reconciler_observer = event_observer.get();
  copts.queue_observer = &metrics->queue_observer;
  copts.on_watch_restart = watchRestartObserver(metrics->watch);
  copts.start_timeout = flags.start_timeout;
  copts.on_fatal = group.failer("informers");
  copts.pool = &work;
  auto made = reconcile::Controller::create(copts);
  if (!made.ok()) return made.status();
  controller = std::move(*made);
  return {};
}

Status Service::Parts::buildPull() {
  // One budget of bodies being decoded at once, for pushes and pulls alike.
  pool::DecodeBudgetOptions budget = flags.decode_budget;
  budget.clock = &clock;
  decode_budget = std::make_unique<pool::DecodeBudget>(budget);
  // Pull mode: the drivers whose inventory endpoints the controller fetches
  // itself, each over a transport of its own (the API server's credentials
  // are never sent to an endpoint).
  pull::PollerOptions popts = flags.pull;
  popts.fetch.decode_budget = decode_budget.get();
  popts.store = store.get();
  popts.clock = &clock;
  if (!flags.pull_ca_file.empty()) {
    StatusOr<std::string> ca = http::readCertificateFile(flags.pull_ca_file);
    if (!ca.ok()) return ca.status().withContext("flag --pull-ca-file");
    popts.credentials.ca_pem = std::move(*ca);
  }
  popts.observer = pullObserver(metrics->pull);
  auto made = pull::Poller::create(std::move(popts));
  if (!made.ok()) return made.status();
  poller = std::move(*made);
  // Discovered sources: the endpoints of labelled Services, handed to the
  // poller whenever their list changes.
  if (flags.pull_discovery) {
    pull::DiscoveryOptions dopts = flags.discovery;
    dopts.on_refused = ignoredSourceObserver(metrics->pull);
    discovery = std::make_unique<pull::SourceDiscovery>(
        *api, clock, std::move(dopts),
        [p = poller.get()](const std::vector<pull::SourceSpec>& sources) {
          p->setDiscovered(sources);
        });
  }
  return {};
}

Status Service::Parts::buildInventory() {
  // Who may push.
  if (flags.auth == "none") {
    log::warning(
        "AUTHENTICATION IS OFF (--auth=none): anyone who reaches the inventory API can publish "
        "and withdraw any pool. Use this for local development only.");
    authenticator = std::make_unique<inv::NoAuthAuthenticator>();
  } else {
    inv::TokenReviewAuthenticatorOptions aopts = flags.auth_review;
    aopts.on_refused = [this](inv::AuthRefusal refusal) {
      metrics->inventory.refused(refusal == inv::AuthRefusal::kClientRate ? "auth_client_rate"
                                                                          : "auth_review_rate");
    };
    aopts.on_rejected = [this] { metrics->inventory.refused("token_rejected"); };
    authenticator = std::make_unique<inv::TokenReviewAuthenticator>(*auth_api, clock, aopts);
  }

  inv::InventoryHandlerOptions hopts = flags.inventory;
  hopts.store = store.get();
  hopts.authenticator = authenticator.get();
  hopts.clock = &clock;
  hopts.previewer = controller.get();
  hopts.decode_budget = decode_budget.get();
  hopts.on_decode_refused = [this] { metrics->inventory.refused("inflight_decoded"); };
  // A driver is pulled by configuration (--inventory-source, --pull-driver),
  // never because a Service claims it: a bound driver's pushes are refused
  // before any endpoint answers.
  hopts.is_pulled = [p = poller.get(), &bindings = flags.discovery.bindings](std::string_view d) {
    return p->pulls(d) ||
           std::ranges::any_of(bindings, [&](const pull::PullBinding& b) { return b.driver == d; });
  };
  hopts.on_push = [this](std::string_view driver, int code) {
    metrics->inventory.push(driver, code);
  };
  hopts.on_pool_body = [this](std::string_view driver, bool unchanged) {
    metrics->inventory.poolBody(driver, unchanged);
  };
  auto made = inv::InventoryHandler::create(hopts);
  if (!made.ok()) return made.status();
  handler = std::move(*made);
  endpoint = std::make_unique<inv::InventoryEndpoint>(
      *handler, clock, inv::InventoryEndpoint::kDefaultWorkers, &work);
  store->setStatusListener(
      [e = endpoint.get()](const reconcile::PoolKey& key) { e->poolStatusChanged(key); });

  // The inventory API's self-signed certificate, made (or read) by its part
  // before any server starts.
  if (!flags.certificates.secret_name.empty()) {
    inv::CertificateSecretOptions copts = flags.certificates;
    copts.api = api.get();
    copts.clock = &clock;
    copts.namespace_ = own_namespace;
    copts.on_event = [this](inv::CertificateEvent event) {
      metrics->inventory.certificateEvent(inv::certificateEventName(event));
    };
    auto secret = inv::CertificateSecret::create(copts);
    if (!secret.ok()) return secret.status().withContext("flag --inventory-tls-secret");
    certificates = std::move(*secret);
  }
  tls = !flags.inventory_server.tls_cert_file.empty() || certificates != nullptr;
  if (!tls && flags.auth == "tokenreview") {
    log::warning(
        "THE INVENTORY API SERVES PLAIN HTTP: drivers' bearer tokens cross the network in clear "
        "text, and anyone who reads them can push as those drivers until they expire. Serve TLS "
        "with --inventory-tls-secret (self-signed) or --inventory-tls-cert-file.");
  }
  return {};
}

Status Service::Parts::buildServers() {
  // Health probes: /readyz once the caches synced.
  if (flags.health_probe_bind_address != "0") {
    http::HttpServerOptions popts;
    popts.bind_address = flags.health_probe_bind_address;
    popts.name = "health";
    popts.clock = &clock;
    auto respond = [c = controller.get()](const http::HttpRequest& req,
                                          const http::HttpServer::Responder& answer) {
      answer(healthResponse(req, [c] { return c->hasSynced(); }));
    };
    health_part =
        std::make_unique<ServerPart>(popts, respond, "health-probe-bind-address", health_server);
  }
  if (certificates) {
    certificate_part = std::make_unique<CertificatePart>(*certificates, clock, flags.start_timeout);
  }

  // Metrics. With --metrics-secure, /metrics checks the caller's token (any
  // audience the API server accepts, as a scraper's service-account token
  // has) with reviews of its own cache and budget.
  if (flags.metrics_bind_address != "0") {
    MetricsEndpointOptions meopts;
    meopts.collectables = {registry, process_collector};
    meopts.pool = &work;
    bool self_signed = false;
    http::HttpServerOptions mopts;
    mopts.bind_address = flags.metrics_bind_address;
    mopts.name = "metrics";
    mopts.clock = &clock;
    if (flags.metrics_secure) {
      inv::TokenReviewAuthenticatorOptions aopts = flags.auth_review;
      aopts.audience.clear();
      metrics_authenticator =
          std::make_unique<inv::TokenReviewAuthenticator>(*auth_api, clock, aopts);
      meopts.authenticator = metrics_authenticator.get();
      if (!flags.metrics_tls_cert_file.empty()) {
        mopts.tls_cert_file = flags.metrics_tls_cert_file;
        mopts.tls_key_file = flags.metrics_tls_key_file;
      } else if (certificates) {
        // The inventory API's certificate, which scrapers verify with the
        // published CA bundle.
        mopts.tls_key_pair = [c = certificates.get()] { return c->current(); };
      } else {
        self_signed = true;
      }
    }
    metrics_endpoint = std::make_unique<MetricsEndpoint>(std::move(meopts));
    mopts.admit = metrics_endpoint->admitHandler();
    auto part = std::make_unique<ServerPart>(mopts, metrics_endpoint->httpHandler(),
                                             "metrics-bind-address", metrics_server);
    if (self_signed)
      part->prepare = [this](http::HttpServerOptions& o) { return selfSign(o, clock); };
    metrics_part = std::move(part);
  }

  // The inventory API: authentication and authorization before any body is
  // read, the server's own refusals (413, 431, 503...) in the API's JSON form.
  http::HttpServerOptions iopts = flags.inventory_server;
  iopts.admit = endpoint->admitHandler();
  iopts.on_refused = [this](http::Refusal refusal) {
    metrics->inventory.refused(http::refusalName(refusal));
  };
  if (certificates) iopts.tls_key_pair = [c = certificates.get()] { return c->current(); };
  iopts.clock = &clock;
  iopts.name = "inventory";
  iopts.error_response = [](int code, std::string_view message) {
    return inv::errorResponse(code, message);
  };
  inventory_part =
      std::make_unique<ServerPart>(iopts, endpoint->httpHandler(), "inventory-bind-address",
                                   inventory_server, [this] { logServing(); });
  return {};
}

void Service::Parts::buildLeadership() {
  LeadershipOptions lopts;
  lopts.clock = &clock;
  lopts.controller = controller.get();
  lopts.metrics = &metrics->leader;
  lopts.fail = group.failer("leader election");
  lopts.stopping = signals.token();
  lopts.events = events.get();
  lopts.elect = flags.leader_elect;
  lopts.election = flags.leader_election;
  if (lopts.election.lease_namespace.empty()) lopts.election.lease_namespace = own_namespace;
  lopts.election.identity = identity;
  lopts.config = &config;
  lopts.api_options = api_options;
  lopts.forwarding = flags.forwarding;
  lopts.forwarding.on_refused = [this](inv::ForwardRefusal refusal) {
    metrics->inventory.refused(inv::forwardRefusalName(refusal));
  };
  lopts.own_url = [this] { return ownUrl(); };
  lopts.tls = tls;
  lopts.tls_cert_file = flags.inventory_server.tls_cert_file;
  lopts.certificates = certificates.get();
  leadership = std::make_unique<Leadership>(std::move(lopts));
  // The hooks are in place before the server accepts a request.
  handler->setLeaderHooks(leadership->hooks());
}

void Service::Parts::addParts() {
  // The servers the writers need (probes, certificate, metrics, Events), and
  // the inventory server, which must be listening before the elector writes
  // its URL into the Lease.
  addIf("health probe server", std::move(health_part));
  addIf("inventory certificate", std::move(certificate_part));
  addIf("metrics server", std::move(metrics_part));
  if (events) group.add("events", nullptr, [e = events.get()] { e->stop(); });
  group.add("inventory server", std::move(inventory_part));
  // With election, the elector campaigns while the caches fill, and stops
  // (releasing the Lease) only after the controller's in-flight writes.
  if (flags.leader_elect) addLeadership("leader election");
  // Every replica keeps warm caches (slices and Nodes) and polls: a new
  // leader has the pulled state at once (see poller.h).
  addStartStop("controller", controller.get());
  addStartStop("pull", poller.get());
  if (discovery) addStartStop("pull discovery", discovery.get());
  if (!flags.leader_elect) addLeadership("leadership");
  // Stopped first: no push is taken, held ones are answered (for half the
  // shutdown budget), before the writers stop.
  group.add("inventory API", nullptr, [this] {
    endpoint->stop();
    inventory_server->stop(flags.shutdown_timeout / 2);
  });
}

void Service::Parts::logServing() const {
  log::info("Serving", {{"inventory", inventory_server->address()},
                        {"advertise", ownUrl()},
                        {"metrics", metrics_server ? metrics_server->address() : "off"},
                        {"metricsSecure", flags.metrics_secure},
                        {"health", health_server ? health_server->address() : "off"},
                        {"auth", flags.auth},
                        {"version", build.version}});
}

Service::Service(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Service::~Service() = default;

StatusOr<std::unique_ptr<Service>> Service::create(const ServiceFlags& flags,
                                                   const ServiceBuild& build,
                                                   ShutdownSignals& signals, RunnableGroup& group) {
  auto parts = std::make_unique<Parts>(flags, build, signals, group);
  if (Status s = parts->buildClients(); !s.ok()) return s;
  if (!flags.cleanup) {
    for (Status (Parts::*build)() : {&Parts::buildReconcile, &Parts::buildPull,
                                     &Parts::buildInventory, &Parts::buildServers}) {
      if (Status s = (parts.get()->*build)(); !s.ok()) return s;
    }
    parts->buildLeadership();
    parts->addParts();
  }
  return std::unique_ptr<Service>(new Service(std::move(parts)));
}

Status Service::cleanup() {
  Parts& p = *parts_;
  if (!p.flags.leader_elect) return deleteManagedSlices(*p.api);
  // With leader election, the slices are deleted under the controllers'
  // Lease: no replica still stopping can re-create one meanwhile.
  FencedCleanupOptions cleanup;
  cleanup.election = p.flags.leader_election;
  cleanup.election.api = p.api.get();
  cleanup.election.clock = &p.clock;
  if (cleanup.election.lease_namespace.empty()) cleanup.election.lease_namespace = p.own_namespace;
  if (cleanup.election.identity.empty()) {
    cleanup.election.identity =
        leader::makeLeaderIdentity(envOr("POD_NAME", hostName()) + "-cleanup");
  }
  cleanup.lease_timeout = p.flags.cleanup_lease_timeout;
  cleanup.stop = p.signals.token();
  return deleteManagedSlicesFenced(*p.api, cleanup);
}

}  // namespace rsc::controller
