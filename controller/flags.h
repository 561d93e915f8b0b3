// The service's command line: every flag with its default and help text, and
// a parser that names the offending flag in its error. main() exits 2 on a
// parse error, as Go's flag package does. Pure functions; thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/log.h"
#include "common/status.h"

namespace rsc::controller {

struct ServiceFlags {
  std::string kubeconfig;
  // The kubeconfig context to use instead of current-context (kubectl's
  // --context); empty: current-context. Set, it skips in-cluster config.
  std::string context;
  bool leader_elect = false;
  std::string leader_election_namespace;  // empty: the pod's namespace
  std::string leader_election_id = "resourceslice-controller";
  std::chrono::milliseconds leader_elect_lease_duration{15'000};
  std::chrono::milliseconds leader_elect_renew_deadline{10'000};
  std::chrono::milliseconds leader_elect_retry_period{2'000};
  std::string identity;  // empty: POD_NAME or host name, plus a random suffix
  std::string metrics_bind_address = ":8080";
  // /metrics over HTTPS, for callers whose token passes TokenReview and a
  // SubjectAccessReview for get on /metrics (controller-runtime's
  // --metrics-secure). Off here for local runs; the chart turns it on.
  bool metrics_secure = false;
  // The certificate of the secure /metrics; unset: a self-signed one made in
  // memory at start, as controller-runtime does.
  std::string metrics_tls_cert_file;
  std::string metrics_tls_key_file;
  std::string health_probe_bind_address = ":8081";
  std::string inventory_bind_address = ":8082";
  // How other replicas reach this one's inventory API when it leads
  // ("http://10.0.0.7:8082"); empty: POD_IP and the inventory port.
  std::string inventory_advertise_url;
  std::string inventory_tls_cert_file;
  std::string inventory_tls_key_file;
  // Self-signed TLS of the inventory API (CertificateSecret): the Secret that
  // holds the CA and serving certificate in the pod's namespace (empty: off),
  // the ConfigMap the CA bundle is published in (in that namespace and in
  // each of inventory_ca_namespaces), the serving certificate's names, the
  // validity of each certificate, and how often the Secret is read.
  std::string inventory_tls_secret;
  std::string inventory_ca_config_map;
  std::vector<std::string> inventory_ca_namespaces;
  std::vector<std::string> inventory_tls_names;
  std::chrono::milliseconds inventory_tls_validity{365LL * 24 * 3'600'000};
  std::chrono::milliseconds inventory_tls_sync_interval{60'000};
  // PEM bundle a follower verifies the leader's inventory certificate with
  // when it forwards a push; re-read when the file changes. Empty: the
  // replica's own --inventory-tls-cert-file (a self-signed certificate that
  // every replica shares).
  std::string inventory_ca_file;
  // The name the leader's certificate is checked against when forwarding
  // (the Service's DNS name); empty: the host of the leader's URL.
  std::string inventory_server_name;
  // Limits of the inventory API (README, section Reliability).
  size_t max_request_bytes = 8 * 1024 * 1024;
  size_t max_decoded_bytes = 96 * 1024 * 1024;
  size_t inventory_max_connections = 1024;
  size_t inventory_max_connections_per_client = 64;
  size_t inventory_max_inflight_body_bytes = 32 * 1024 * 1024;
  std::chrono::milliseconds inventory_header_timeout{10'000};
  std::chrono::milliseconds inventory_body_timeout{60'000};
  std::chrono::milliseconds inventory_idle_timeout{90'000};
  // Budgets of TokenReview/SubjectAccessReview calls (cache misses).
  double auth_review_qps = 20;
  int auth_review_burst = 40;
  double auth_client_review_qps = 1;
  int auth_client_review_burst = 10;
  bool allow_unbound_node_pools = false;
  std::string auth = "tokenreview";  // tokenreview | none
  std::string token_audience = "resourceslice-controller";
  double kube_api_qps = 50;
  int kube_api_burst = 100;
  // All attempts and retry waits of one API call (client::RestKubeApiOptions).
  std::chrono::milliseconds kube_api_call_timeout{30'000};
  // Limits on a kubeconfig's exec credential plugin (client::ExecRunOptions).
  std::chrono::milliseconds exec_plugin_timeout{30'000};
  size_t exec_plugin_max_output_bytes = size_t{1} << 20;
  // Kubernetes Events (client::EventRecorder): on or off, where Events about
  // cluster-scoped objects go, the sender's rate limit, and its queue.
  bool events = true;
  std::string event_namespace = "default";
  double event_qps = 1;
  int event_burst = 25;
  size_t event_queue_size = 1000;
  int workers = 4;
  int max_parallel_slice_writes = 8;
  std::chrono::milliseconds adoption_grace{120'000};
  // Pull mode (issue 18): drivers whose inventory the controller fetches from their own
  // endpoint, as (driver, URL) in flag order; how often, how long one fetch may take, and how
  // long a source may fail before its pools are withdrawn (0: 3 x pull_interval).
  std::vector<std::pair<std::string, std::string>> inventory_sources;
  std::chrono::milliseconds pull_interval{30'000};
  std::chrono::milliseconds pull_timeout{10'000};
  std::chrono::milliseconds pull_grace{0};
  // Discovery of inventory endpoints from labelled Services and their EndpointSlices, in
  // these namespaces (empty: every namespace); at most pull_max_sources sources at once.
  bool pull_discovery = false;
  std::vector<std::string> pull_namespaces;
  size_t pull_max_sources = 10000;
  // HTTPS endpoints: the CA bundle that signs their certificates (empty: the system's store)
  // and a bearer token file sent to them (empty: none).
  std::string pull_ca_file;
  std::string pull_token_file;
  // How long shutdown after SIGTERM may take in all: below the chart's
  // terminationGracePeriodSeconds (30 s), so that the process exits on its own
  // and releases the Lease instead of being killed.
  std::chrono::milliseconds shutdown_timeout{25'000};
  log::Format log_format = log::Format::kText;
  int verbosity = 0;
  bool cleanup = false;
  bool help = false;
  bool version = false;
};

// Parses argv[1..]. Accepts --flag=value, --flag value, -flag, and for
// booleans --flag / --flag=false. Fails with InvalidArgument naming the flag.
StatusOr<ServiceFlags> parseFlags(const std::vector<std::string>& args);

// The --help text.
std::string flagsUsage();

}  // namespace rsc::controller
