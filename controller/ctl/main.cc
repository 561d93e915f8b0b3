// resourceslicectl: the operator CLI of the resourceslice-controller. Parses
// the command line (args.h), builds the transports a command needs (the
// inventory API found through --server or the leader Lease; the API server
// through the kubeconfig) and runs it (commands.h). Single-threaded.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "client/config.h"
#include "client/http_transport.h"
#include "client/rest_kube_api.h"
#include "common/clock.h"
#include "controller/ctl/args.h"
#include "controller/ctl/commands.h"

namespace rsc::ctl {
namespace {

// The annotation on the leader Lease naming the leader's inventory URL
// (written by the controller, controller/main.cc).
constexpr char kInventoryUrlAnnotation[] = "resourceslice.dra.k8s.io/inventory-url";
constexpr char kUserAgent[] = "resourceslicectl";
// A CLI answers its operator promptly: one retry of a failed request, not a
// controller's five.
constexpr int kMaxRetries = 1;

struct Connections {
  Clock* clock = nullptr;
  std::unique_ptr<client::HttpTransport> kube_transport;
  std::unique_ptr<client::KubeApi> kube;
  std::unique_ptr<client::HttpTransport> inventory;
  StatusOr<client::ClientConfig> kube_config = internalError("not loaded");
};

Status connectKube(Connections& c) {
  if (c.kube) return okStatus();
  if (!c.kube_config.ok()) return c.kube_config.status();
  client::ClientConfig config = *c.kube_config;
  config.user_agent = kUserAgent;
  auto transport = client::CpprestTransport::create(config, *c.clock);
  if (!transport.ok()) return transport.status().withContext("kubeconfig");
  c.kube_transport = std::move(*transport);
  client::RestKubeApiOptions options;
  options.max_retries = kMaxRetries;
  auto api = client::RestKubeApi::create(*c.kube_transport, *c.clock, options);
  if (!api.ok()) return api.status();
  c.kube = std::move(*api);
  return okStatus();
}

// The CA the controller publishes for its self-signed inventory certificate,
// or "" when the ConfigMap does not exist (a CA of the system store, or of
// cert-manager given with --certificate-authority).
StatusOr<std::string> publishedCa(const GlobalFlags& g, Connections& c, const std::string& ns) {
  auto cm = c.kube->getConfigMap(ns, g.ca_configmap);
  if (!cm.ok() && cm.status().code() == StatusCode::kNotFound) return std::string();
  if (!cm.ok())
    return cm.status().withContext("reading the CA ConfigMap " + ns + "/" + g.ca_configmap);
  auto it = cm->data.find("ca.crt");
  return it == cm->data.end() ? std::string() : it->second;
}

// The inventory API's URL: --server, or the leader Lease's annotation; then
// `ca_pem` is the published CA when there is one and the URL is https.
StatusOr<std::string> inventoryServer(const GlobalFlags& g, Connections& c, std::string* ca_pem) {
  if (!g.server.empty()) return g.server;
  if (Status s = connectKube(c); !s.ok()) {
    return s.withContext("no --server, and the kubeconfig cannot be used to find the controller");
  }
  const std::string ns = g.lease_namespace.empty() ? c.kube_config->namespace_ : g.lease_namespace;
  auto lease = c.kube->getLease(ns, g.lease_name);
  if (!lease.ok()) {
    return lease.status().withContext("no --server; reading the leader Lease " + ns + "/" +
                                      g.lease_name + " (--lease-namespace, --lease-name)");
  }
  auto it = lease->metadata.annotations.find(kInventoryUrlAnnotation);
  if (it == lease->metadata.annotations.end() || it->second.empty()) {
    return unavailable("no --server, and the leader Lease " + ns + "/" + g.lease_name +
                       " has no annotation " + kInventoryUrlAnnotation + " (no leader yet?)");
  }
  if (it->second.starts_with("https://") && g.certificate_authority.empty() &&
      !g.insecure_skip_tls_verify) {
    ASSIGN_OR_RETURN(*ca_pem, publishedCa(g, c, ns));
  }
  return it->second;
}

Status connectInventory(const GlobalFlags& g, Connections& c) {
  client::ClientConfig config;
  ASSIGN_OR_RETURN(config.server, inventoryServer(g, c, &config.ca_pem));
  while (config.server.ends_with("/")) config.server.pop_back();
  config.user_agent = kUserAgent;
  config.insecure_skip_tls_verify = g.insecure_skip_tls_verify;
  if (!g.certificate_authority.empty()) {
    auto ca = client::readConfigFile(g.certificate_authority);
    if (!ca.ok()) return ca.status().withContext("--certificate-authority");
    config.ca_pem = *ca;
  }
  if (!g.token.empty()) {
    config.bearer_token = g.token;
  } else if (!g.token_file.empty()) {
    config.token_file = g.token_file;
  } else if (c.kube_config.ok()) {
    // The kubeconfig user's token or exec plugin; client certificates are
    // for the API server only.
    config.bearer_token = c.kube_config->bearer_token;
    config.token_file = c.kube_config->token_file;
    config.exec = c.kube_config->exec;
  }
  auto transport = client::CpprestTransport::create(config, *c.clock);
  if (!transport.ok()) return transport.status().withContext("--server " + config.server);
  c.inventory = std::move(*transport);
  return okStatus();
}

int run(const std::vector<std::string>& args) {
  auto inv = parseArgs(args);
  if (!inv.ok()) {
    std::cerr << "error: " << inv.status().message() << "\n";
    return kExitError;
  }
  if (inv->help) {
    std::cout << usage(inv->command);
    return kExitOk;
  }
  const int error_exit = inv->command == "diff" ? kExitDiffError : kExitError;
  if (inv->command == "completion") {
    auto script = completionScript(inv->args[0]);
    if (!script.ok()) {
      std::cerr << "error: " << script.status().message() << "\n";
      return kExitError;
    }
    std::cout << *script;
    return kExitOk;
  }
  Connections c;
  c.clock = &RealClock::instance();
  c.kube_config = client::loadConfig(inv->global.kubeconfig,
                                     client::ConfigEnvironment::fromProcess(), inv->global.context);
  Status connected = inv->command == "slices" ? connectKube(c) : connectInventory(inv->global, c);
  if (!connected.ok()) {
    std::cerr << "error: " << connected.message() << "\n";
    return error_exit;
  }
  CtlEnv env{
      .inventory = c.inventory.get(), .kube = c.kube.get(), .clock = c.clock, .out = &std::cout};
  auto code = runCommand(*inv, env);
  if (!code.ok()) {
    std::cerr << "error: " << code.status().message() << "\n";
    return error_exit;
  }
  return *code;
}

}  // namespace
}  // namespace rsc::ctl

int main(int argc, char** argv) {
  return rsc::ctl::run(std::vector<std::string>(argv + 1, argv + argc));
}
