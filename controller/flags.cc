#include "controller/flags.h"

#include <algorithm>

#include "common/flag_set.h"

namespace rsc::controller {
namespace {

// --inventory-source DRIVER=URL, once per driver.
std::optional<std::string> addSource(std::vector<pull::SourceSpec>& sources, const std::string& v) {
  const size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
    return "must be DRIVER=URL, not \"" + v + "\"";
  }
  pull::SourceSpec spec;
  spec.driver = v.substr(0, eq);
  for (const pull::SourceSpec& known : sources) {
    if (known.driver == spec.driver) return "driver \"" + spec.driver + "\" has a source already";
  }
  spec.id = "flag/" + spec.driver;
  spec.url = v.substr(eq + 1);
  spec.caller.unrestricted = true;  // the operator named it
  sources.push_back(std::move(spec));
  return std::nullopt;
}

// --pull-driver DRIVER=NAMESPACE[/SERVICEACCOUNT],..., once per driver.
std::optional<std::string> addBinding(std::vector<pull::PullBinding>& bindings,
                                      const std::string& v) {
  StatusOr<std::vector<pull::PullBinding>> parsed = pull::parsePullDriver(v);
  if (!parsed.ok()) return parsed.status().message();
  const std::string& driver = parsed->front().driver;
  if (std::ranges::any_of(bindings,
                          [&](const pull::PullBinding& b) { return b.driver == driver; })) {
    return "driver \"" + driver + "\" is bound already: list all its namespaces in one flag";
  }
  bindings.insert(bindings.end(), parsed->begin(), parsed->end());
  return std::nullopt;
}

// The API server, leader election and this replica's identity.
void addClientFlags(FlagSet& fs, ServiceFlags& f) {
  fs.addString(
      "kubeconfig",
      "Path to a kubeconfig. Unset: in-cluster config, then $KUBECONFIG (files separated by ':', "
      "merged as kubectl merges them), then ~/.kube/config. Exec credential plugins, "
      "proxy-url and tls-server-name are supported.",
      &f.kubeconfig);
  fs.addText(
      "context",
      "The kubeconfig context to use instead of its current-context, as kubectl's --context. "
      "Set, the kubeconfig is used even in a pod (in-cluster config has no contexts).",
      &f.context);
  fs.addSwitch("leader-elect",
               "Elect a leader on a Lease before writing slices (for several replicas).",
               &f.leader_elect);
  fs.addText("leader-election-namespace",
             "Namespace of the leader Lease. Unset: the pod's namespace.",
             &f.leader_election.lease_namespace);
  fs.addText("leader-election-id", "Name of the leader Lease.", &f.leader_election.lease_name);
  fs.addDuration("leader-elect-lease-duration",
                 "How long a leader's Lease is valid without renewal.",
                 &f.leader_election.lease_duration);
  fs.addDuration("leader-elect-renew-deadline",
                 "How long the leader tries to renew before giving up.",
                 &f.leader_election.renew_deadline);
  fs.addDuration("leader-elect-retry-period",
                 "How often candidates try to acquire or renew the Lease.",
                 &f.leader_election.retry_period);
  fs.addText("identity", "This replica's identity in the Lease. Unset: pod or host name + random.",
             &f.leader_election.identity);
}

// The metrics, health and inventory servers: addresses and TLS.
void addServerFlags(FlagSet& fs, ServiceFlags& f) {
  fs.addText("metrics-bind-address",
             "Address of the Prometheus /metrics endpoint; \"0\" disables it.",
             &f.metrics_bind_address);
  fs.addSwitch(
      "metrics-secure",
      "Serve /metrics over HTTPS to callers whose bearer token passes TokenReview and a "
      "SubjectAccessReview for get on the non-resource URL /metrics (401 and 403 otherwise).",
      &f.metrics_secure);
  fs.addText(
      "metrics-tls-cert-file",
      "PEM certificate of the secure /metrics (re-read when it changes). Unset: a self-signed "
      "certificate made in memory at start.",
      &f.metrics_tls_cert_file);
  fs.addText("metrics-tls-key-file", "PEM private key of the secure /metrics.",
             &f.metrics_tls_key_file);
  fs.addText("health-probe-bind-address", "Address of /healthz and /readyz; \"0\" disables them.",
             &f.health_probe_bind_address);
  fs.addText("inventory-bind-address", "Address of the inventory API drivers push to.",
             &f.inventory_server.bind_address);
  fs.addText("inventory-advertise-url",
             "URL at which other replicas reach this one's inventory API when it leads. Unset: "
             "http(s)://$POD_IP:<inventory port>.",
             &f.inventory_advertise_url);
  fs.addText("inventory-tls-cert-file", "PEM certificate of the inventory API (TLS when set).",
             &f.inventory_server.tls_cert_file);
  fs.addText("inventory-tls-key-file", "PEM private key of the inventory API.",
             &f.inventory_server.tls_key_file);
  fs.addText(
      "inventory-tls-secret",
      "Serve the inventory API with a self-signed CA and certificate that the controller makes, "
      "keeps in this Secret of its namespace (one for every replica: created if absent, else "
      "read) and rotates well before expiry. Not with --inventory-tls-cert-file.",
      &f.certificates.secret_name);
  fs.addText(
      "inventory-ca-configmap",
      "ConfigMap (key ca.crt) in which the self-signed mode publishes its CA bundle for drivers "
      "to mount. Required with --inventory-tls-secret.",
      &f.certificates.config_map_name);
  fs.addList("inventory-ca-namespaces",
             "More namespaces (comma-separated; drivers') to publish the CA bundle ConfigMap in.",
             &f.certificates.config_map_namespaces);
  fs.addList(
      "inventory-tls-names",
      "Comma-separated DNS names and IPs of the self-signed serving certificate (the Service's "
      "names). Required with --inventory-tls-secret.",
      &f.certificates.names);
  fs.addDuration(
      "inventory-tls-validity",
      "Validity of each self-signed CA and serving certificate; rotation starts at half of it "
      "(a new CA joins the bundle) and switches the certificate at two thirds.",
      &f.certificates.validity, std::chrono::seconds(6));
  fs.addDuration(
      "inventory-tls-sync-interval",
      "How often each replica reads the self-signed certificate Secret (to serve a rotated "
      "certificate, or rotate it). Keep it far below a sixth of --inventory-tls-validity.",
      &f.certificates.sync_interval, std::chrono::milliseconds(100));
  fs.addText("inventory-ca-file",
             "PEM CA bundle that the leader's inventory certificate must chain to when a push is "
             "forwarded to it; re-read when it changes. Unset: --inventory-tls-cert-file.",
             &f.forwarding.ca_file);
  fs.addText("inventory-server-name",
             "Name the leader's inventory certificate is verified against when a push is forwarded "
             "(the Service's DNS name). Unset: the host of the leader's advertised URL.",
             &f.forwarding.tls_server_name);
  fs.addSwitch(
      "forward-insecure",
      "Lets a follower forward pushes, drivers' tokens and all, to a plain-http leader URL "
      "(local tests without inventory TLS). Off: a follower forwards only over https "
      "verified against --inventory-ca-file (or the self-signed CA), and otherwise "
      "answers 503 naming the leader. Whoever may patch the Lease chooses that URL.",
      &f.forwarding.allow_insecure);
}

// Limits of the inventory API: sizes, connections, timeouts, reviews.
void addLimitFlags(FlagSet& fs, ServiceFlags& f) {
  fs.addNumber("max-request-bytes",
               "Largest body of PUT pool and PUT driver (413 past it; other requests take at most "
               "4 KiB).",
               &f.inventory.max_body_bytes, size_t{1024});
  fs.addNumber("max-decoded-bytes",
               "Most memory one request or pulled body may take once decoded (the JSON tree and "
               "the pools built from it), charged before parsing (413 past it). A realistic pool "
               "is charged about 27x its size.",
               &f.inventory.max_decoded_bytes, size_t{1024});
  fs.addNumber("max-inflight-decoded-bytes",
               "Memory that all request and pulled bodies being decoded at once may take, counted "
               "as --max-decoded-bytes counts one; a push that finds no room within a second is "
               "answered 503, a pull fetch fails (result Busy) and is tried at its next interval.",
               &f.decode_budget.max_bytes, size_t{1024});
  fs.addNumber(
      "inventory-max-connections",
      "Open connections to the inventory API; past it the connection waiting longest for its "
      "request headers is closed, or the new one refused with 503.",
      &f.inventory_server.max_connections, size_t{1});
  fs.addNumber("inventory-max-connections-per-client",
               "Open connections from one client address (503 past it).",
               &f.inventory_server.max_connections_per_client, size_t{1});
  fs.addNumber(
      "inventory-max-inflight-body-bytes",
      "Request body bytes read or handled at once over all connections; a request whose body "
      "does not fit is answered 503 before it is read.",
      &f.inventory_server.max_inflight_body_bytes, size_t{1024});
  fs.addDuration(
      "inventory-header-timeout",
      "Time for a request's headers (and the TLS handshake) to arrive; slower clients are cut "
      "off.",
      &f.inventory_server.header_timeout);
  fs.addDuration("inventory-body-timeout",
                 "Time for a request body to arrive once its headers are in.",
                 &f.inventory_server.body_timeout);
  fs.addDuration("inventory-idle-timeout",
                 "Time a kept-alive connection may wait for its next request.",
                 &f.inventory_server.idle_timeout);
  fs.addRate(
      "auth-review-qps",
      "TokenReviews and SubjectAccessReviews per second (cache misses), on a client of their "
      "own; past it requests with new tokens get 503 at once.",
      &f.auth_review.review_qps, false);
  fs.addNumber("auth-review-burst", "Burst of reviews above --auth-review-qps.",
               &f.auth_review.review_burst, 1);
  fs.addRate("auth-client-review-qps",
             "TokenReviews per second that one client address may cause (429 past it); 0: no "
             "per-client limit.",
             &f.auth_review.client_review_qps, true);
  fs.addNumber("auth-client-review-burst", "Burst of reviews above --auth-client-review-qps.",
               &f.auth_review.client_review_burst, 1);
  fs.addSwitch("allow-unbound-node-pools",
               "Let a token bound to no node publish devices of a named node (nodeName, per-device "
               "nodeName). Off: only a token of a pod on that node may.",
               &f.inventory.allow_unbound_node_pools);
}

// Authentication, the API client's budget and exec plugins, Events.
void addApiFlags(FlagSet& fs, ServiceFlags& f) {
  fs.addChoice("auth",
               "How drivers are authenticated: tokenreview (TokenReview + SubjectAccessReview) or "
               "none (local development only).",
               &f.auth, {"tokenreview", "none"});
  fs.addString("token-audience", "Audience drivers' service-account tokens must be issued for.",
               &f.auth_review.audience);
  fs.addRate("kube-api-qps", "Sustained rate of requests to the API server.", &f.kube_api.qps,
             false);
  fs.addNumber("kube-api-burst", "Burst of requests to the API server above the QPS.",
               &f.kube_api.burst, 1);
  fs.addDuration(
      "kube-api-call-timeout",
      "Longest one API call may spend on retries: no retry (429, 5xx, connection error) starts "
      "that would end past it, and the call returns its last error. The attempt under way is "
      "bounded by the API server's own 60 s request timeout.",
      &f.kube_api.call_timeout, std::chrono::seconds(1));
  fs.addDuration(
      "exec-plugin-timeout",
      "Longest a kubeconfig's exec credential plugin may run; past it the plugin and what it "
      "started are killed and the credential is an error (retried after 5 s).",
      &f.exec_plugin.timeout, std::chrono::seconds(1));
  fs.addNumber(
      "exec-plugin-max-output-bytes",
      "Most an exec credential plugin may print (an ExecCredential is a few KiB); past it the "
      "plugin is killed and the credential is an error.",
      &f.exec_plugin.max_output_bytes, size_t{4096});
  fs.addSwitch(
      "events",
      "Record Kubernetes Events (events.k8s.io/v1) for reverted foreign changes, failed "
      "publishes, expired pool leases, adopted slices and leadership; each Event object and "
      "reason passes 25 at once, then one per 5 minutes, and repeats within 6 minutes count in "
      "one Event's series.",
      &f.events);
  fs.addText("event-namespace",
             "Namespace of the Events about cluster-scoped objects (ResourceSlices).",
             &f.event_recorder.cluster_namespace);
  fs.addRate("event-qps",
             "Events sent per second, over all objects, on top of --kube-api-qps's budget; Events "
             "beyond the queue are dropped and counted in resourceslice_controller_events_total.",
             &f.event_recorder.qps, false);
  fs.addNumber("event-burst", "Burst of Events above --event-qps.", &f.event_recorder.burst, 1);
  fs.addNumber("event-queue-size",
               "Events waiting to be sent; past it new ones are dropped (result=\"queue_full\").",
               &f.event_recorder.queue_size, size_t{1});
}

// The reconcile loop and pull mode.
void addReconcileFlags(FlagSet& fs, ServiceFlags& f) {
  fs.addNumber(
      "workers",
      "Most pools reconciled at the same time. " + std::to_string(reconcile::kDefaultIdleWorkers) +
          " workers wait for work; more start while pools wait and none is free, and "
          "end after " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::seconds>(reconcile::kDefaultWorkerIdleTimeout)
                  .count()) +
          "s without work. (default --kube-api-burst, between " +
          std::to_string(reconcile::kDefaultIdleWorkers) + " and " +
          std::to_string(reconcile::kMaxDefaultWorkers) + ")",
      &f.controller.workers, 1);
  fs.addNumber(
      "max-parallel-slice-writes",
      "Slice writes of one pool sent at the same time when its generation changes, so that "
      "the scheduler sees the new generation incomplete for about one round trip; all writes "
      "still share --kube-api-qps. The reconciling worker writes too; the helpers, this many "
      "minus one in all, are shared by every reconcile and started on first demand.",
      &f.controller.max_parallel_writes, 1);
  fs.addDuration(
      "adoption-grace",
      "After start or failover, how long slices of pools no driver has pushed yet are kept.",
      &f.controller.adoption_grace);
  fs.add("inventory-source",
         "DRIVER=URL: pull DRIVER's inventory from URL (pull mode) instead of taking pushes for "
         "it; repeat the flag for more drivers, one source each. GET URL answers the body of PUT "
         "/v1/drivers/{driver}, with an ETag; a URL without a path asks for /v1/inventory. Pushes "
         "for a pulled driver are refused with 409.",
         "", [&sources = f.pull.sources](const std::string& v) { return addSource(sources, v); });
  fs.addDuration("pull-interval",
                 "How often each --inventory-source is fetched, plus up to 10% of random jitter.",
                 &f.pull.interval, std::chrono::seconds(1));
  fs.addDuration(
      "pull-timeout",
      "Longest fetch of an --inventory-source, headers and body; longer counts as a failure.",
      &f.pull.fetch.timeout, std::chrono::milliseconds(100));
  fs.addDuration(
      "pull-grace",
      "How long an --inventory-source may fail (unreachable, an error, a bad answer) before its "
      "pools are withdrawn, as pools whose lease ran out. Unset: 3 x --pull-interval.",
      &f.pull.grace, std::chrono::seconds(1));
  fs.addSwitch(
      "pull-discovery",
      "Discover inventory endpoints (pull mode) of the drivers bound by --pull-driver: every "
      "ready endpoint of a Service labelled resourceslice.dra.k8s.io/driver=DRIVER in one of "
      "DRIVER's namespaces, on its port named inventory, whose targetRef Pod vouches for it, is "
      "one source of DRIVER's inventory. Needs list and watch on Services, EndpointSlices and "
      "Pods in those namespaces.",
      &f.pull_discovery);
  fs.add("pull-driver",
         "DRIVER=NAMESPACE[/SERVICEACCOUNT][,NAMESPACE[/SERVICEACCOUNT]...]: DRIVER's inventory "
         "is pulled from endpoints that --pull-discovery finds in these namespaces (served by "
         "Pods of that ServiceAccount, when given), and its pushes are refused with 409. Once per "
         "driver. A driver bound nowhere is push-only, whoever labels a Service with its name.",
         "", [&bindings = f.discovery.bindings](const std::string& v) {
           return addBinding(bindings, v);
         });
  fs.add("pull-namespace",
         "Replaced by --pull-driver=DRIVER=NAMESPACE: discovery reads only the namespaces each "
         "driver is bound to.",
         "", [](const std::string&) -> std::optional<std::string> {
           return "was replaced by --pull-driver=DRIVER=NAMESPACE[/SERVICEACCOUNT]: bind each "
                  "pulled driver to the namespaces that serve it";
         });
  fs.addNumber(
      "pull-max-sources",
      "Most inventory sources pulled at once; discovered endpoints past it are ignored (logged, "
      "and counted in resourceslice_controller_pull_sources_ignored_total).",
      &f.pull.max_sources, size_t{1});
  fs.addNumber(
      "pull-concurrency",
      "Most fetches of inventory sources at once: a fixed pool of this many worker threads "
      "serves every source, however many there are. Due sources wait for a free worker in due "
      "order (resourceslice_controller_pull_fetch_delay_seconds); a source that hangs holds one "
      "for up to --pull-timeout.",
      &f.pull.concurrency, size_t{1});
  fs.addText("pull-ca-file",
             "PEM bundle that signs the certificates of HTTPS inventory endpoints (a Service's "
             "resourceslice.dra.k8s.io/inventory-ca annotation wins for its endpoints). Unset: the "
             "system's trust store.",
             &f.pull_ca_file);
  fs.addText(
      "pull-token-file",
      "A bearer token file (a projected ServiceAccount token with the audience drivers check) "
      "sent to HTTPS inventory endpoints, never over plain HTTP; re-read as it rotates.",
      &f.pull.credentials.token_file);
}

// Shutdown, start, logs and the process's modes.
void addProcessFlags(FlagSet& fs, ServiceFlags& f) {
  fs.addDuration(
      "shutdown-timeout",
      "Longest shutdown after SIGTERM or SIGINT: held ?wait= pushes get half of it, then "
      "in-flight writes finish and the Lease is released. Past it (or on a second signal) the "
      "process exits with code 1. Keep it below the pod's terminationGracePeriodSeconds.",
      &f.shutdown_timeout, std::chrono::seconds(1));
  fs.addDuration(
      "start-timeout",
      "Longest wait for a part to become ready at start: the informers' first list of "
      "ResourceSlices and Nodes, the first sync of --inventory-tls-secret. Past it the process "
      "exits with code 1, naming the part and the last error (RBAC, an API server out of reach).",
      &f.start_timeout, std::chrono::seconds(1));
  fs.add("log-format", "text (klog-like) or json.",
         f.log_format == log::Format::kJson ? "json" : "text",
         [&format = f.log_format](const std::string& v) -> std::optional<std::string> {
           if (v == "text") {
             format = log::Format::kText;
           } else if (v == "json") {
             format = log::Format::kJson;
           } else {
             return "must be text or json, not \"" + v + "\"";
           }
           return std::nullopt;
         });
  fs.addNumber("v", "Log verbosity.", &f.verbosity, 0);
  fs.addSwitch(
      "cleanup",
      "Delete every slice this controller manages, then exit (for the chart's uninstall hook).",
      &f.cleanup);
  fs.addDuration(
      "cleanup-lease-timeout",
      "With --cleanup and --leader-elect: how long to wait for the leader Lease before deleting "
      "(a stopping leader releases it, a killed one's expires after the lease duration); past "
      "it the cleanup fails naming the holder.",
      &f.cleanup_lease_timeout, std::chrono::seconds(1));
  fs.addSwitch("version", "Print the version and exit.", &f.version);
  fs.addSwitch("help", "Print this help and exit.", &f.help);
  fs.shorthand("help", 'h');
}

// The flags, each bound to the member of `f` it sets, in the order --help lists them.
void addFlags(FlagSet& fs, ServiceFlags& f) {
  addClientFlags(fs, f);
  addServerFlags(fs, f);
  addLimitFlags(fs, f);
  addApiFlags(fs, f);
  addReconcileFlags(fs, f);
  addProcessFlags(fs, f);
}

}  // namespace

ServiceFlags::ServiceFlags() {
  // Above the client library's defaults (controller-runtime's 20/30): the
  // controller writes many slices at once.
  kube_api.qps = 50;
  kube_api.burst = 100;
  leader_election.lease_name = "resourceslice-controller";
  inventory_server.bind_address = ":8082";
  auth_review.audience = "resourceslice-controller";
  // Unset: parseFlags derives it from --kube-api-burst.
  controller.workers = 0;
}

StatusOr<ServiceFlags> parseFlags(const std::vector<std::string>& args) {
  ServiceFlags flags;
  FlagSet fs;
  addFlags(fs, flags);
  RETURN_IF_ERROR(fs.parse(args));
  if (flags.controller.workers == 0) {
    flags.controller.workers = reconcile::defaultWorkers(flags.kube_api.burst);
  }
  const http::HttpServerOptions& server = flags.inventory_server;
  if (server.tls_cert_file.empty() != server.tls_key_file.empty()) {
    return invalidArgument(
        "flags --inventory-tls-cert-file and --inventory-tls-key-file must be given together");
  }
  if (!flags.certificates.secret_name.empty()) {
    if (!server.tls_cert_file.empty()) {
      return invalidArgument(
          "flags --inventory-tls-secret and --inventory-tls-cert-file exclude each other");
    }
    if (flags.certificates.config_map_name.empty() || flags.certificates.names.empty()) {
      return invalidArgument(
          "flag --inventory-tls-secret needs --inventory-ca-configmap and --inventory-tls-names");
    }
  }
  if (flags.metrics_tls_cert_file.empty() != flags.metrics_tls_key_file.empty()) {
    return invalidArgument(
        "flags --metrics-tls-cert-file and --metrics-tls-key-file must be given together");
  }
  if (!flags.metrics_secure && !flags.metrics_tls_cert_file.empty()) {
    return invalidArgument("flags --metrics-tls-cert-file and -key-file need --metrics-secure");
  }
  if (!flags.discovery.bindings.empty() && !flags.pull_discovery) {
    return invalidArgument("flag --pull-driver needs --pull-discovery");
  }
  if (flags.pull_discovery && flags.discovery.bindings.empty()) {
    return invalidArgument(
        "flag --pull-discovery needs at least one --pull-driver=DRIVER=NAMESPACE[/SERVICEACCOUNT]: "
        "discovery trusts a Service only in the namespaces its driver is bound to");
  }
  for (const pull::PullBinding& binding : flags.discovery.bindings) {
    if (std::ranges::any_of(flags.pull.sources, [&](const pull::SourceSpec& source) {
          return source.driver == binding.driver;
        })) {
      return invalidArgument("flag --pull-driver: driver \"" + binding.driver +
                             "\" has an --inventory-source already (one source of truth)");
    }
  }
  const pull::PollerOptions& pull = flags.pull;
  if (pull.fetch.timeout > pull.interval) {
    return invalidArgument("flag --pull-timeout must not be longer than --pull-interval");
  }
  if (pull.grace > Clock::Duration::zero() && pull.grace < pull.interval) {
    return invalidArgument("flag --pull-grace must be at least --pull-interval");
  }
  const leader::LeaderElectionOptions& leader = flags.leader_election;
  if (!(leader.lease_duration > leader.renew_deadline)) {
    return invalidArgument(
        "flag --leader-elect-lease-duration must be longer than --leader-elect-renew-deadline");
  }
  if (!(static_cast<double>(leader.renew_deadline.count()) >
        1.2 * static_cast<double>(leader.retry_period.count()))) {
    return invalidArgument(
        "flag --leader-elect-renew-deadline must be longer than 1.2 x --leader-elect-retry-period");
  }
  if (flags.decode_budget.max_bytes < flags.inventory.max_decoded_bytes) {
    return invalidArgument(
        "flag --max-inflight-decoded-bytes must be at least --max-decoded-bytes");
  }
  // One limit on a body, wherever it comes from: a push or a pull.
  flags.inventory_server.max_request_bytes = flags.inventory.max_body_bytes;
  flags.pull.fetch.max_body_bytes = flags.inventory.max_body_bytes;
  flags.pull.fetch.max_decoded_bytes = flags.inventory.max_decoded_bytes;
  flags.pull.fetch.allow_unbound_node_pools = flags.inventory.allow_unbound_node_pools;
  return flags;
}

std::string flagsUsage() {
  ServiceFlags defaults;
  FlagSet fs;
  addFlags(fs, defaults);
  return "Usage: resourceslice-controller [flags]\n\n"
         "Publishes DRA drivers' device pools, pushed over HTTP, as resource.k8s.io/v1 "
         "ResourceSlices.\n\nFlags:\n" +
         fs.usage();
}

}  // namespace rsc::controller
