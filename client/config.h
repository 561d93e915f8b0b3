// ClientConfig: where the API server is and how to authenticate to it, loaded
// in the order of DESIGN.md section 6 by load_config.h: --kubeconfig,
// in-cluster (service account), $KUBECONFIG, ~/.kube/config. The loaders live
// by job: kubeconfig.h (files merged, a context selected), in_cluster.h (the
// pod's service account); credentials.h turns a ClientConfig into the token and
// client certificate to send (token files, exec plugins). main loads the
// configuration once; CpprestTransport is built from it. Loading reads files
// but keeps nothing open; a config that cannot work fails with a message
// naming the file and field. Plain data and functions; thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/objects.h"
#include "common/status.h"

namespace rsc::client {

// client-go's defaults (5/10) are tuned for kubectl; a controller that writes
// whole pools needs more, and the API server's priority-and-fairness protects
// it anyway (reference: kube-controller-manager uses 20/30).
inline constexpr double kDefaultQps = 20;
inline constexpr int kDefaultBurst = 30;
inline constexpr char kDefaultUserAgent[] = "resourceslice-controller";
inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";
// Kubeconfigs, tokens and certificates are kilobytes; a file past this is
// not one of them (a device or a log named by mistake) and is refused.
inline constexpr size_t kMaxConfigFileBytes = size_t{16} << 20;

// A user's `exec` entry: a credential plugin (client.authentication.k8s.io
// ExecCredential) that prints a token and/or a client certificate. Run by
// credentials.h.
struct ExecConfig {
  // As written, except that a relative path with a '/' is resolved against
  // the kubeconfig's folder (as kubectl does); a bare name is looked up in
  // $PATH when the plugin runs.
  std::string command;
  std::vector<std::string> args;
  // Added to the controller's own environment.
  std::vector<std::pair<std::string, std::string>> env;
  // client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1.
  std::string api_version;
  // Shown when the command cannot be found ("install the aws CLI: ...").
  std::string install_hint;
  // Never or IfAvailable (the controller never has a terminal, so both run
  // the plugin without one; Always is refused when loading).
  std::string interactive_mode = "Never";
  // Pass the cluster (server, CA, tls-server-name, proxy-url and the
  // cluster's client.authentication.k8s.io/exec extension) to the plugin in
  // KUBERNETES_EXEC_INFO.
  bool provide_cluster_info = false;
  // The cluster's extension named client.authentication.k8s.io/exec (null
  // when it has none).
  Json cluster_config;
  // "kubeconfig /x/config: users[0].user.exec", to prefix errors with.
  std::string origin;
};

// Cloud plugins (aws eks get-token, gke-gcloud-auth-plugin, kubelogin with a
// service principal) answer within seconds; one that hangs must not hold the
// client's requests for ever, so it is killed after this long.
inline constexpr std::chrono::milliseconds kExecPluginTimeout = std::chrono::seconds(30);
// An ExecCredential is a few kilobytes (a token, or a certificate and key);
// a plugin that prints more is broken and is killed.
inline constexpr size_t kMaxExecOutputBytes = size_t{1} << 20;

// One run of an exec plugin, as client-go's rest_client_exec_plugin_call_total
// counts it: `code` is the plugin's exit code (0 if and only if it gave a
// credential; -1 when it was killed or never ran) and `call_status` one of
// no_error, plugin_execution_error, plugin_not_found_error,
// client_internal_error, and for the limits below plugin_timeout_error and
// plugin_output_limit_error.
struct ExecPluginCall {
  int code = 0;
  std::string_view call_status;
};

// How exec plugins are run: limits set by the program (its flags), not by
// the kubeconfig, and who is told of each run.
struct ExecRunOptions {
  std::chrono::milliseconds timeout = kExecPluginTimeout;
  size_t max_output_bytes = kMaxExecOutputBytes;
  // Called after every run, from the thread that ran it; may be empty.
  std::function<void(const ExecPluginCall&)> observer;
};

struct ClientConfig {
  // "https://host:port" (or http://), without a trailing slash.
  std::string server;
  // PEM bytes. An empty ca_pem trusts the system's certificate store.
  std::string ca_pem;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string bearer_token;
  // When set, the bearer token is read from this file and re-read as it
  // rotates (see CredentialSource); it wins over bearer_token.
  std::string token_file;
  // When set, the token and/or client certificate come from this plugin
  // (and none of the four fields above is set).
  std::optional<ExecConfig> exec;
  // How `exec` runs; not read from the kubeconfig.
  ExecRunOptions exec_run;
  bool insecure_skip_tls_verify = false;
  // The name the server's certificate is checked against, when it differs
  // from the host in `server`.
  std::string tls_server_name;
  // An HTTP proxy every connection goes through ("http://host:port", with
  // optional user:password@): an HTTP CONNECT tunnel for an https server.
  std::string proxy_url;
  // Follow redirects (cpprest's default: up to 10, as Go's http.Client). Off, a 3xx answer is
  // returned as it is: pull mode never lets an inventory endpoint send the controller elsewhere.
  bool follow_redirects = true;
  // The namespace of the context, or of the pod in-cluster.
  std::string namespace_ = "default";
  double qps = kDefaultQps;
  int burst = kDefaultBurst;
  std::string user_agent = kDefaultUserAgent;
  // Where this came from, for the startup log: "in-cluster" or
  // "kubeconfig /x/config, context admin".
  std::string source;
};

// What the loaders read from the process, injectable for tests.
struct ConfigEnvironment {
  // KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, POD_NAMESPACE,
  // KUBECONFIG and HOME; a missing name is unset.
  std::map<std::string, std::string> variables;
  std::filesystem::path service_account_dir = kServiceAccountDir;

  // Returns the variable, or nullopt when it is unset or empty.
  std::optional<std::string> get(const std::string& name) const;
  // Reads the variables above from the real environment.
  static ConfigEnvironment fromProcess();
};

// Reads a file that configuration names, up to kMaxConfigFileBytes. The
// error says "file X not found" or why it could not be read, for the caller
// to prefix with the field that named it.
StatusOr<std::string> readConfigFile(const std::filesystem::path& path);

}  // namespace rsc::client
