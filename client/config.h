// ClientConfig: where the API server is and how to authenticate to it, loaded
// in the order of DESIGN.md section 6: --kubeconfig, in-cluster (service
// account), $KUBECONFIG, ~/.kube/config. main loads it once; CpprestTransport
// is built from it. Loading reads files but keeps nothing open; a config that
// cannot work fails with a message naming the file and field. The loaders are
// plain functions; BearerTokenSource is thread-safe.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "client/objects.h"
#include "common/clock.h"
#include "common/status.h"

namespace rsc::client {

// client-go's defaults (5/10) are tuned for kubectl; a controller that writes
// whole pools needs more, and the API server's priority-and-fairness protects
// it anyway (reference: kube-controller-manager uses 20/30).
inline constexpr double kDefaultQps = 20;
inline constexpr int kDefaultBurst = 30;
inline constexpr char kDefaultUserAgent[] = "resourceslice-controller";
inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

struct ClientConfig {
  // "https://host:port" (or http://), without a trailing slash.
  std::string server;
  // PEM bytes. An empty ca_pem trusts the system's certificate store.
  std::string ca_pem;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::string bearer_token;
  // When set, the bearer token is read from this file and re-read as it
  // rotates (see BearerTokenSource); it wins over bearer_token.
  std::string token_file;
  bool insecure_skip_tls_verify = false;
  // The name the server's certificate is checked against, when it differs
  // from the host in `server`.
  std::string tls_server_name;
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

// Loads the configuration in DESIGN order: `explicit_kubeconfig_path` when not
// empty (it must exist), then in-cluster when KUBERNETES_SERVICE_HOST/PORT are
// set and the service account token exists, then the files of $KUBECONFIG
// that exist, then ~/.kube/config.
StatusOr<ClientConfig> loadConfig(const std::string& explicit_kubeconfig_path,
                                  const ConfigEnvironment& env = ConfigEnvironment::fromProcess());

// The in-cluster configuration: https://$KUBERNETES_SERVICE_HOST:PORT (an IPv6
// host bracketed), the service account's token file and CA, and the namespace
// from $POD_NAMESPACE or the service account's namespace file.
StatusOr<ClientConfig> loadInClusterConfig(const ConfigEnvironment& env);

// Loads kubeconfig files merged as kubectl merges them: for clusters, users,
// contexts and current-context the first file that defines a name wins.
// Relative file paths resolve against the folder of the file that names them.
// Supported: certificate-authority(-data), insecure-skip-tls-verify,
// tls-server-name, client-certificate(-data), client-key(-data), token,
// tokenFile. exec, auth-provider, username/password, impersonation and
// proxy-url fail with an error naming the field.
StatusOr<ClientConfig> loadKubeconfig(const std::vector<std::filesystem::path>& files);

// Parses kubeconfig text: JSON, or the YAML subset kubeconfigs are written in
// (block mappings and sequences, plain, single- and double-quoted scalars,
// one-line flow collections such as {} and [a, b], comments). Errors carry the
// line number ("line 7: ..."); anchors, tags and block scalars are refused.
StatusOr<Json> parseKubeconfigText(std::string_view text);

// Gives the bearer token to send, re-reading a token file at most once per
// kRereadInterval (kubelet rotates projected tokens well before they expire)
// and at once after the server answered 401. Thread-safe.
class BearerTokenSource {
 public:
  static constexpr std::chrono::minutes kRereadInterval{1};

  // Uses `token_file` when set, else the fixed `token` ("" sends none).
  BearerTokenSource(std::string token, std::string token_file, Clock& clock);

  BearerTokenSource(const BearerTokenSource&) = delete;
  BearerTokenSource& operator=(const BearerTokenSource&) = delete;

  std::string token();
  // Called after a 401: re-reads the file now. Returns true when the token
  // changed, so that repeating the request may succeed.
  bool reloadAfterUnauthorized();

 private:
  // Reads the file into token_; keeps the old token when the file cannot be
  // read (it may be between a rename and a write). Requires mu_.
  void reload();

  const std::string token_file_;
  Clock& clock_;
  std::mutex mu_;
  std::string token_;
  std::optional<Clock::TimePoint> read_at_;
};

}  // namespace rsc::client
