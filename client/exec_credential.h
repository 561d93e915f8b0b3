// Exec credential plugins (client.authentication.k8s.io v1 and v1beta1
// ExecCredential), as kubectl runs them for a kubeconfig user's `exec`: the
// command is started without a shell and without a terminal, with
// KUBERNETES_EXEC_INFO in its environment, and its standard output is parsed
// for a token and/or a client certificate and their expiry. Used by
// CredentialSource (credentials.h), which caches the result. Pure functions
// plus a child process per call; thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "client/config.h"
#include "common/clock.h"
#include "common/status.h"

namespace rsc::client {

// Cloud plugins (aws eks get-token, gke-gcloud-auth-plugin, kubelogin with a
// service principal) answer within seconds; one that hangs must not hold the
// client's requests for ever, so it is killed after this long.
inline constexpr std::chrono::milliseconds kExecPluginTimeout = std::chrono::seconds(30);
// An ExecCredential is a few kilobytes (a token, or a certificate and key);
// a plugin that prints more is broken and is killed.
inline constexpr size_t kMaxExecOutputBytes = size_t{1} << 20;
// How much of the plugin's standard error goes into an error message.
inline constexpr size_t kMaxExecStderrInError = 2048;

struct ExecCredential {
  std::string token;
  // PEM; both or neither.
  std::string client_cert_pem;
  std::string client_key_pem;
  // When the credential stops being valid; nullopt: until the server says
  // otherwise (a 401).
  std::optional<Clock::SystemTime> expiry;
};

struct ExecRunOptions {
  std::chrono::milliseconds timeout = kExecPluginTimeout;
  size_t max_output_bytes = kMaxExecOutputBytes;
};

// The value of KUBERNETES_EXEC_INFO: an ExecCredential of the plugin's
// apiVersion with spec.interactive false and, when provideClusterInfo is set,
// spec.cluster (server, tls-server-name, insecure-skip-tls-verify,
// certificate-authority-data, proxy-url, config).
std::string execInfo(const ExecConfig& exec, const ClientConfig& cluster);

// Parses what the plugin printed. The apiVersion and kind must match; the
// status must hold a token or a client certificate and key (or both).
StatusOr<ExecCredential> parseExecCredential(std::string_view output, const ExecConfig& exec);

// Runs the plugin and parses its output. A command not found fails naming
// it and the installHint; a plugin that fails, hangs past the timeout or
// prints too much fails with its exit code and the start of its standard
// error. The timeout is measured on the real clock: it bounds a real child
// process.
StatusOr<ExecCredential> runExecPlugin(const ExecConfig& exec, const ClientConfig& cluster,
                                       const ExecRunOptions& options = {});

}  // namespace rsc::client
