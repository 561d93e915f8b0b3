#include "controller/flags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "common/duration.h"
#include "controller/inventory/names.h"

namespace rsc::controller {
namespace {

// Applies a flag's value to ServiceFlags; returns an error message (without
// the flag's name).
using Setter = std::function<std::optional<std::string>(ServiceFlags&, const std::string&)>;

struct FlagSpec {
  std::string name;
  std::string help;
  bool boolean = false;
  Setter set;
};

std::optional<std::string> parseBool(const std::string& v, bool* out) {
  if (v == "true" || v == "1" || v == "t" || v == "TRUE" || v == "True") {
    *out = true;
  } else if (v == "false" || v == "0" || v == "f" || v == "FALSE" || v == "False") {
    *out = false;
  } else {
    return "must be true or false, not \"" + v + "\"";
  }
  return std::nullopt;
}

template <typename T>
std::optional<std::string> parseNumber(const std::string& v, T* out, T min) {
  T value{};
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (ec != std::errc() || end != v.data() + v.size()) return "must be a number, not \"" + v + "\"";
  if (value < min) return "must be at least " + std::to_string(min);
  *out = value;
  return std::nullopt;
}

// Formats a duration as the flags take it: "2m", "15s", "500ms".
std::string formatDuration(std::chrono::milliseconds d) {
  const int64_t ms = d.count();
  if (ms % 3'600'000 == 0 && ms != 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0 && ms != 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

// A duration flag; one shorter than `min` is refused naming the minimum.
std::optional<std::string> parseDurationInto(
    const std::string& v, std::chrono::milliseconds* out,
    std::chrono::milliseconds min = std::chrono::milliseconds(0)) {
  StatusOr<Clock::Duration> d = parseDuration(v);
  if (!d.ok()) return d.status().message();
  *out = std::chrono::milliseconds(std::llround(static_cast<double>(d->count()) / 1e6));
  if (*out < min) return "must be at least " + formatDuration(min);
  return std::nullopt;
}

std::optional<std::string> parseRate(const std::string& v, double* out, bool zero_ok) {
  double q = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), q);
  if (ec != std::errc() || end != v.data() + v.size() || !(q > 0 || (zero_ok && q == 0))) {
    return std::string(zero_ok ? "must be a number >= 0" : "must be a positive number") +
           ", not \"" + v + "\"";
  }
  *out = q;
  return std::nullopt;
}

// A comma-separated list of non-empty items.
std::optional<std::string> parseList(const std::string& v, std::vector<std::string>* out) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = std::min(v.find(',', start), v.size());
    if (comma == start) return "must be a comma-separated list without empty items";
    items.push_back(v.substr(start, comma - start));
    start = comma + 1;
  }
  *out = std::move(items);
  return std::nullopt;
}

// String flags that must not be empty.
std::optional<std::string> nonEmpty(const std::string& v, std::string* out) {
  if (v.empty()) return std::string("must not be empty");
  *out = v;
  return std::nullopt;
}

// Setters of flag values into a member of ServiceFlags, one per kind of value.

// Any string, the empty one included.
Setter setString(std::string ServiceFlags::*member) {
  return [member](ServiceFlags& f, const std::string& v) -> std::optional<std::string> {
    f.*member = v;
    return std::nullopt;
  };
}

// A string that must not be empty.
Setter setText(std::string ServiceFlags::*member) {
  return [member](ServiceFlags& f, const std::string& v) { return nonEmpty(v, &(f.*member)); };
}

Setter setBool(bool ServiceFlags::*member) {
  return [member](ServiceFlags& f, const std::string& v) { return parseBool(v, &(f.*member)); };
}

template <typename T>
Setter setNumber(T ServiceFlags::*member, T min) {
  return [member, min](ServiceFlags& f, const std::string& v) {
    return parseNumber<T>(v, &(f.*member), min);
  };
}

Setter setDuration(std::chrono::milliseconds ServiceFlags::*member,
                   std::chrono::milliseconds min = std::chrono::milliseconds(0)) {
  return [member, min](ServiceFlags& f, const std::string& v) {
    return parseDurationInto(v, &(f.*member), min);
  };
}

Setter setRate(double ServiceFlags::*member, bool zero_ok) {
  return [member, zero_ok](ServiceFlags& f, const std::string& v) {
    return parseRate(v, &(f.*member), zero_ok);
  };
}

Setter setList(std::vector<std::string> ServiceFlags::*member) {
  return [member](ServiceFlags& f, const std::string& v) { return parseList(v, &(f.*member)); };
}

// --pull-namespace, once per namespace; a repeated one counts once.
std::optional<std::string> addPullNamespace(ServiceFlags& f, const std::string& v) {
  if (auto why = inventory::dnsLabelError(v)) return "namespace \"" + v + "\" " + *why;
  if (std::find(f.pull_namespaces.begin(), f.pull_namespaces.end(), v) == f.pull_namespaces.end()) {
    f.pull_namespaces.push_back(v);
  }
  return std::nullopt;
}

const std::vector<FlagSpec>& specs() {
  static const std::vector<FlagSpec> all = {
      {"kubeconfig",
       "Path to a kubeconfig. Unset: in-cluster config, then $KUBECONFIG (files separated by ':', "
       "merged as kubectl merges them), then ~/.kube/config. Exec credential plugins, "
       "proxy-url and tls-server-name are supported.",
       false, setString(&ServiceFlags::kubeconfig)},
      {"context",
       "The kubeconfig context to use instead of its current-context, as kubectl's --context. "
       "Set, the kubeconfig is used even in a pod (in-cluster config has no contexts).",
       false, setText(&ServiceFlags::context)},
      {"leader-elect", "Elect a leader on a Lease before writing slices (for several replicas).",
       true, setBool(&ServiceFlags::leader_elect)},
      {"leader-election-namespace", "Namespace of the leader Lease. Unset: the pod's namespace.",
       false, setText(&ServiceFlags::leader_election_namespace)},
      {"leader-election-id", "Name of the leader Lease.", false,
       setText(&ServiceFlags::leader_election_id)},
      {"leader-elect-lease-duration", "How long a leader's Lease is valid without renewal.", false,
       setDuration(&ServiceFlags::leader_elect_lease_duration)},
      {"leader-elect-renew-deadline", "How long the leader tries to renew before giving up.", false,
       setDuration(&ServiceFlags::leader_elect_renew_deadline)},
      {"leader-elect-retry-period", "How often candidates try to acquire or renew the Lease.",
       false, setDuration(&ServiceFlags::leader_elect_retry_period)},
      {"identity", "This replica's identity in the Lease. Unset: pod or host name + random.", false,
       setText(&ServiceFlags::identity)},
      {"metrics-bind-address", "Address of the Prometheus /metrics endpoint; \"0\" disables it.",
       false, setText(&ServiceFlags::metrics_bind_address)},
      {"metrics-secure",
       "Serve /metrics over HTTPS to callers whose bearer token passes TokenReview and a "
       "SubjectAccessReview for get on the non-resource URL /metrics (401 and 403 otherwise).",
       true, setBool(&ServiceFlags::metrics_secure)},
      {"metrics-tls-cert-file",
       "PEM certificate of the secure /metrics (re-read when it changes). Unset: a self-signed "
       "certificate made in memory at start.",
       false, setText(&ServiceFlags::metrics_tls_cert_file)},
      {"metrics-tls-key-file", "PEM private key of the secure /metrics.", false,
       setText(&ServiceFlags::metrics_tls_key_file)},
      {"health-probe-bind-address", "Address of /healthz and /readyz; \"0\" disables them.", false,
       setText(&ServiceFlags::health_probe_bind_address)},
      {"inventory-bind-address", "Address of the inventory API drivers push to.", false,
       setText(&ServiceFlags::inventory_bind_address)},
      {"inventory-advertise-url",
       "URL at which other replicas reach this one's inventory API when it leads. Unset: "
       "http(s)://$POD_IP:<inventory port>.",
       false, setText(&ServiceFlags::inventory_advertise_url)},
      {"inventory-tls-cert-file", "PEM certificate of the inventory API (TLS when set).", false,
       setText(&ServiceFlags::inventory_tls_cert_file)},
      {"inventory-tls-key-file", "PEM private key of the inventory API.", false,
       setText(&ServiceFlags::inventory_tls_key_file)},
      {"inventory-tls-secret",
       "Serve the inventory API with a self-signed CA and certificate that the controller makes, "
       "keeps in this Secret of its namespace (one for every replica: created if absent, else "
       "read) and rotates well before expiry. Not with --inventory-tls-cert-file.",
       false, setText(&ServiceFlags::inventory_tls_secret)},
      {"inventory-ca-configmap",
       "ConfigMap (key ca.crt) in which the self-signed mode publishes its CA bundle for drivers "
       "to mount. Required with --inventory-tls-secret.",
       false, setText(&ServiceFlags::inventory_ca_config_map)},
      {"inventory-ca-namespaces",
       "More namespaces (comma-separated; drivers') to publish the CA bundle ConfigMap in.", false,
       setList(&ServiceFlags::inventory_ca_namespaces)},
      {"inventory-tls-names",
       "Comma-separated DNS names and IPs of the self-signed serving certificate (the Service's "
       "names). Required with --inventory-tls-secret.",
       false, setList(&ServiceFlags::inventory_tls_names)},
      {"inventory-tls-validity",
       "Validity of each self-signed CA and serving certificate; rotation starts at half of it "
       "(a new CA joins the bundle) and switches the certificate at two thirds.",
       false, setDuration(&ServiceFlags::inventory_tls_validity, std::chrono::seconds(6))},
      {"inventory-tls-sync-interval",
       "How often each replica reads the self-signed certificate Secret (to serve a rotated "
       "certificate, or rotate it). Keep it far below a sixth of --inventory-tls-validity.",
       false,
       setDuration(&ServiceFlags::inventory_tls_sync_interval, std::chrono::milliseconds(100))},
      {"inventory-ca-file",
       "PEM CA bundle that the leader's inventory certificate must chain to when a push is "
       "forwarded to it; re-read when it changes. Unset: --inventory-tls-cert-file.",
       false, setText(&ServiceFlags::inventory_ca_file)},
      {"inventory-server-name",
       "Name the leader's inventory certificate is verified against when a push is forwarded "
       "(the Service's DNS name). Unset: the host of the leader's advertised URL.",
       false, setText(&ServiceFlags::inventory_server_name)},
      {"max-request-bytes",
       "Largest body of PUT pool and PUT driver (413 past it; other requests take at most "
       "4 KiB).",
       false, setNumber<size_t>(&ServiceFlags::max_request_bytes, 1024)},
      {"max-decoded-bytes",
       "Largest estimated memory of one request body once parsed, checked before parsing "
       "(413 past it). Ordinary pool JSON takes about 8x its size.",
       false, setNumber<size_t>(&ServiceFlags::max_decoded_bytes, 1024)},
      {"inventory-max-connections",
       "Open connections to the inventory API; past it the connection waiting longest for its "
       "request headers is closed, or the new one refused with 503.",
       false, setNumber<size_t>(&ServiceFlags::inventory_max_connections, 1)},
      {"inventory-max-connections-per-client",
       "Open connections from one client address (503 past it).", false,
       setNumber<size_t>(&ServiceFlags::inventory_max_connections_per_client, 1)},
      {"inventory-max-inflight-body-bytes",
       "Request body bytes read or handled at once over all connections; a request whose body "
       "does not fit is answered 503 before it is read.",
       false, setNumber<size_t>(&ServiceFlags::inventory_max_inflight_body_bytes, 1024)},
      {"inventory-header-timeout",
       "Time for a request's headers (and the TLS handshake) to arrive; slower clients are cut "
       "off.",
       false, setDuration(&ServiceFlags::inventory_header_timeout)},
      {"inventory-body-timeout", "Time for a request body to arrive once its headers are in.",
       false, setDuration(&ServiceFlags::inventory_body_timeout)},
      {"inventory-idle-timeout", "Time a kept-alive connection may wait for its next request.",
       false, setDuration(&ServiceFlags::inventory_idle_timeout)},
      {"auth-review-qps",
       "TokenReviews and SubjectAccessReviews per second (cache misses), on a client of their "
       "own; past it requests with new tokens get 503 at once.",
       false, setRate(&ServiceFlags::auth_review_qps, false)},
      {"auth-review-burst", "Burst of reviews above --auth-review-qps.", false,
       setNumber<int>(&ServiceFlags::auth_review_burst, 1)},
      {"auth-client-review-qps",
       "TokenReviews per second that one client address may cause (429 past it); 0: no "
       "per-client limit.",
       false, setRate(&ServiceFlags::auth_client_review_qps, true)},
      {"auth-client-review-burst", "Burst of reviews above --auth-client-review-qps.", false,
       setNumber<int>(&ServiceFlags::auth_client_review_burst, 1)},
      {"allow-unbound-node-pools",
       "Let a token bound to no node publish devices of a named node (nodeName, per-device "
       "nodeName). Off: only a token of a pod on that node may.",
       true, setBool(&ServiceFlags::allow_unbound_node_pools)},
      {"auth",
       "How drivers are authenticated: tokenreview (TokenReview + SubjectAccessReview) or none "
       "(local development only).",
       false,
       [](ServiceFlags& f, const std::string& v) -> std::optional<std::string> {
         if (v != "tokenreview" && v != "none") {
           return "must be tokenreview or none, not \"" + v + "\"";
         }
         f.auth = v;
         return std::nullopt;
       }},
      {"token-audience", "Audience drivers' service-account tokens must be issued for.", false,
       setString(&ServiceFlags::token_audience)},
      {"kube-api-qps", "Sustained rate of requests to the API server.", false,
       setRate(&ServiceFlags::kube_api_qps, false)},
      {"kube-api-burst", "Burst of requests to the API server above the QPS.", false,
       setNumber<int>(&ServiceFlags::kube_api_burst, 1)},
      {"kube-api-call-timeout",
       "Longest one API call may spend on retries: no retry (429, 5xx, connection error) starts "
       "that would end past it, and the call returns its last error. The attempt under way is "
       "bounded by the API server's own 60 s request timeout.",
       false, setDuration(&ServiceFlags::kube_api_call_timeout, std::chrono::seconds(1))},
      {"exec-plugin-timeout",
       "Longest a kubeconfig's exec credential plugin may run; past it the plugin and what it "
       "started are killed and the credential is an error (retried after 5 s).",
       false, setDuration(&ServiceFlags::exec_plugin_timeout, std::chrono::seconds(1))},
      {"exec-plugin-max-output-bytes",
       "Most an exec credential plugin may print (an ExecCredential is a few KiB); past it the "
       "plugin is killed and the credential is an error.",
       false, setNumber<size_t>(&ServiceFlags::exec_plugin_max_output_bytes, 4096)},
      {"events",
       "Record Kubernetes Events (events.k8s.io/v1) for reverted foreign changes, failed "
       "publishes, expired pool leases, adopted slices and leadership; each Event object and "
       "reason passes 25 at once, then one per 5 minutes, and repeats within 6 minutes count in "
       "one Event's series.",
       true, setBool(&ServiceFlags::events)},
      {"event-namespace", "Namespace of the Events about cluster-scoped objects (ResourceSlices).",
       false, setText(&ServiceFlags::event_namespace)},
      {"event-qps",
       "Events sent per second, over all objects, on top of --kube-api-qps's budget; Events "
       "beyond the queue are dropped and counted in resourceslice_controller_events_total.",
       false, setRate(&ServiceFlags::event_qps, false)},
      {"event-burst", "Burst of Events above --event-qps.", false,
       setNumber<int>(&ServiceFlags::event_burst, 1)},
      {"event-queue-size",
       "Events waiting to be sent; past it new ones are dropped (result=\"queue_full\").", false,
       setNumber<size_t>(&ServiceFlags::event_queue_size, 1)},
      {"workers", "Pools reconciled at the same time.", false,
       setNumber<int>(&ServiceFlags::workers, 1)},
      {"max-parallel-slice-writes",
       "Slice writes of one pool sent at the same time when its generation changes, so that "
       "the scheduler sees the new generation incomplete for about one round trip; all writes "
       "still share --kube-api-qps.",
       false, setNumber<int>(&ServiceFlags::max_parallel_slice_writes, 1)},
      {"adoption-grace",
       "After start or failover, how long slices of pools no driver has pushed yet are kept.",
       false, setDuration(&ServiceFlags::adoption_grace)},
      {"inventory-source",
       "DRIVER=URL: pull DRIVER's inventory from URL (pull mode) instead of taking pushes for "
       "it; repeat the flag for more drivers, one source each. GET URL answers the body of PUT "
       "/v1/drivers/{driver}, with an ETag; a URL without a path asks for /v1/inventory. Pushes "
       "for a pulled driver are refused with 409.",
       false,
       [](ServiceFlags& f, const std::string& v) -> std::optional<std::string> {
         const size_t eq = v.find('=');
         if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
           return "must be DRIVER=URL, not \"" + v + "\"";
         }
         std::string driver = v.substr(0, eq);
         for (const auto& [known, url] : f.inventory_sources) {
           if (known == driver) return "driver \"" + driver + "\" has a source already";
         }
         f.inventory_sources.emplace_back(std::move(driver), v.substr(eq + 1));
         return std::nullopt;
       }},
      {"pull-interval",
       "How often each --inventory-source is fetched, plus up to 10% of random jitter.", false,
       setDuration(&ServiceFlags::pull_interval, std::chrono::seconds(1))},
      {"pull-timeout",
       "Longest fetch of an --inventory-source, headers and body; longer counts as a failure.",
       false, setDuration(&ServiceFlags::pull_timeout, std::chrono::milliseconds(100))},
      {"pull-grace",
       "How long an --inventory-source may fail (unreachable, an error, a bad answer) before its "
       "pools are withdrawn, as pools whose lease ran out. Unset: 3 x --pull-interval.",
       false, setDuration(&ServiceFlags::pull_grace, std::chrono::seconds(1))},
      {"pull-discovery",
       "Discover inventory endpoints (pull mode): every ready endpoint of a Service labelled "
       "resourceslice.dra.k8s.io/driver=DRIVER, on its port named inventory, is one source of "
       "DRIVER's inventory. Needs list and watch on Services and EndpointSlices.",
       true, setBool(&ServiceFlags::pull_discovery)},
      {"pull-namespace",
       "A namespace --pull-discovery looks in; repeat the flag for more. Unset: every namespace.",
       false, addPullNamespace},
      {"pull-max-sources",
       "Most inventory sources pulled at once; discovered endpoints past it are ignored (logged, "
       "and counted in resourceslice_controller_pull_sources_ignored_total).",
       false, setNumber<size_t>(&ServiceFlags::pull_max_sources, 1)},
      {"pull-ca-file",
       "PEM bundle that signs the certificates of HTTPS inventory endpoints (a Service's "
       "resourceslice.dra.k8s.io/inventory-ca annotation wins for its endpoints). Unset: the "
       "system's trust store.",
       false, setText(&ServiceFlags::pull_ca_file)},
      {"pull-token-file",
       "A bearer token file (a projected ServiceAccount token with the audience drivers check) "
       "sent to HTTPS inventory endpoints, never over plain HTTP; re-read as it rotates.",
       false, setText(&ServiceFlags::pull_token_file)},
      {"shutdown-timeout",
       "Longest shutdown after SIGTERM or SIGINT: held ?wait= pushes get half of it, then "
       "in-flight writes finish and the Lease is released. Past it (or on a second signal) the "
       "process exits with code 1. Keep it below the pod's terminationGracePeriodSeconds.",
       false, setDuration(&ServiceFlags::shutdown_timeout, std::chrono::seconds(1))},
      {"log-format", "text (klog-like) or json.", false,
       [](ServiceFlags& f, const std::string& v) -> std::optional<std::string> {
         if (v == "text") {
           f.log_format = log::Format::kText;
         } else if (v == "json") {
           f.log_format = log::Format::kJson;
         } else {
           return "must be text or json, not \"" + v + "\"";
         }
         return std::nullopt;
       }},
      {"v", "Log verbosity.", false, setNumber<int>(&ServiceFlags::verbosity, 0)},
      {"cleanup",
       "Delete every slice this controller manages, then exit (for the chart's uninstall hook).",
       true, setBool(&ServiceFlags::cleanup)},
      {"version", "Print the version and exit.", true, setBool(&ServiceFlags::version)},
      {"help", "Print this help and exit.", true, setBool(&ServiceFlags::help)},
  };
  return all;
}

}  // namespace

StatusOr<ServiceFlags> parseFlags(const std::vector<std::string>& args) {
  ServiceFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      return invalidArgument("unexpected argument \"" + arg + "\" (flags start with --)");
    }
    std::string body = arg.substr(arg[1] == '-' ? 2 : 1);
    if (body == "h") body = "help";
    std::optional<std::string> value;
    if (const size_t eq = body.find('='); eq != std::string::npos) {
      value = body.substr(eq + 1);
      body.resize(eq);
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs()) {
      if (s.name == body) spec = &s;
    }
    if (spec == nullptr) return invalidArgument("unknown flag --" + body + " (see --help)");
    if (!value) {
      if (spec->boolean) {
        value = "true";
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return invalidArgument("flag --" + body + " needs a value");
      }
    }
    if (std::optional<std::string> err = spec->set(flags, *value)) {
      return invalidArgument("flag --" + body + ": " + *err);
    }
  }
  if (flags.inventory_tls_cert_file.empty() != flags.inventory_tls_key_file.empty()) {
    return invalidArgument(
        "flags --inventory-tls-cert-file and --inventory-tls-key-file must be given together");
  }
  if (!flags.inventory_tls_secret.empty()) {
    if (!flags.inventory_tls_cert_file.empty()) {
      return invalidArgument(
          "flags --inventory-tls-secret and --inventory-tls-cert-file exclude each other");
    }
    if (flags.inventory_ca_config_map.empty() || flags.inventory_tls_names.empty()) {
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
  if (!flags.pull_namespaces.empty() && !flags.pull_discovery) {
    return invalidArgument("flag --pull-namespace needs --pull-discovery");
  }
  if (flags.pull_timeout > flags.pull_interval) {
    return invalidArgument("flag --pull-timeout must not be longer than --pull-interval");
  }
  if (flags.pull_grace > std::chrono::milliseconds::zero() &&
      flags.pull_grace < flags.pull_interval) {
    return invalidArgument("flag --pull-grace must be at least --pull-interval");
  }
  if (!(flags.leader_elect_lease_duration > flags.leader_elect_renew_deadline)) {
    return invalidArgument(
        "flag --leader-elect-lease-duration must be longer than --leader-elect-renew-deadline");
  }
  if (!(static_cast<double>(flags.leader_elect_renew_deadline.count()) >
        1.2 * static_cast<double>(flags.leader_elect_retry_period.count()))) {
    return invalidArgument(
        "flag --leader-elect-renew-deadline must be longer than 1.2 x --leader-elect-retry-period");
  }
  return flags;
}

std::string flagsUsage() {
  std::ostringstream out;
  out << "Usage: resourceslice-controller [flags]\n\n"
         "Publishes DRA drivers' device pools, pushed over HTTP, as resource.k8s.io/v1 "
         "ResourceSlices.\n\nFlags:\n";
  const ServiceFlags d;
  const std::map<std::string, std::string> defaults = {
      {"leader-election-id", d.leader_election_id},
      {"leader-elect-lease-duration", formatDuration(d.leader_elect_lease_duration)},
      {"leader-elect-renew-deadline", formatDuration(d.leader_elect_renew_deadline)},
      {"leader-elect-retry-period", formatDuration(d.leader_elect_retry_period)},
      {"metrics-bind-address", d.metrics_bind_address},
      {"metrics-secure", d.metrics_secure ? "true" : "false"},
      {"health-probe-bind-address", d.health_probe_bind_address},
      {"inventory-bind-address", d.inventory_bind_address},
      {"inventory-tls-validity", formatDuration(d.inventory_tls_validity)},
      {"inventory-tls-sync-interval", formatDuration(d.inventory_tls_sync_interval)},
      {"max-request-bytes", std::to_string(d.max_request_bytes)},
      {"max-decoded-bytes", std::to_string(d.max_decoded_bytes)},
      {"inventory-max-connections", std::to_string(d.inventory_max_connections)},
      {"inventory-max-connections-per-client",
       std::to_string(d.inventory_max_connections_per_client)},
      {"inventory-max-inflight-body-bytes", std::to_string(d.inventory_max_inflight_body_bytes)},
      {"inventory-header-timeout", formatDuration(d.inventory_header_timeout)},
      {"inventory-body-timeout", formatDuration(d.inventory_body_timeout)},
      {"inventory-idle-timeout", formatDuration(d.inventory_idle_timeout)},
      {"auth-review-qps", std::to_string(static_cast<int64_t>(d.auth_review_qps))},
      {"auth-review-burst", std::to_string(d.auth_review_burst)},
      {"auth-client-review-qps", std::to_string(static_cast<int64_t>(d.auth_client_review_qps))},
      {"auth-client-review-burst", std::to_string(d.auth_client_review_burst)},
      {"auth", d.auth},
      {"token-audience", d.token_audience},
      {"kube-api-qps", std::to_string(static_cast<int64_t>(d.kube_api_qps))},
      {"kube-api-burst", std::to_string(d.kube_api_burst)},
      {"kube-api-call-timeout", formatDuration(d.kube_api_call_timeout)},
      {"exec-plugin-timeout", formatDuration(d.exec_plugin_timeout)},
      {"exec-plugin-max-output-bytes", std::to_string(d.exec_plugin_max_output_bytes)},
      {"events", d.events ? "true" : "false"},
      {"event-namespace", d.event_namespace},
      {"event-qps", std::to_string(static_cast<int64_t>(d.event_qps))},
      {"event-burst", std::to_string(d.event_burst)},
      {"event-queue-size", std::to_string(d.event_queue_size)},
      {"workers", std::to_string(d.workers)},
      {"max-parallel-slice-writes", std::to_string(d.max_parallel_slice_writes)},
      {"adoption-grace", formatDuration(d.adoption_grace)},
      {"pull-interval", formatDuration(d.pull_interval)},
      {"pull-timeout", formatDuration(d.pull_timeout)},
      {"pull-discovery", d.pull_discovery ? "true" : "false"},
      {"pull-max-sources", std::to_string(d.pull_max_sources)},
      {"shutdown-timeout", formatDuration(d.shutdown_timeout)},
      {"log-format", "text"},
      {"v", std::to_string(d.verbosity)},
  };
  for (const FlagSpec& s : specs()) {
    out << "  --" << s.name << (s.boolean ? "" : " value") << "\n      " << s.help;
    auto it = defaults.find(s.name);
    if (it != defaults.end()) out << " (default " << it->second << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace rsc::controller
