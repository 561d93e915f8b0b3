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
// process. The limits and the observer told of each run are
// cluster.exec_run's.
StatusOr<ExecCredential> runExecPlugin(const ExecConfig& exec, const ClientConfig& cluster);

}  // namespace rsc::client
