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
#include "client/inventory_api.h"
#include "client/load_config.h"
#include "client/rest_kube_api.h"
#include "common/clock.h"
#include "common/strings.h"
#include "controller/ctl/args.h"
#include "controller/ctl/commands.h"

namespace rsc::ctl {
namespace {

using client::kInventoryServerNameAnnotation;
using client::kInventoryUrlAnnotation;
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
// or "" when the ConfigMap does not exist or holds no ca.crt.
StatusOr<std::string> publishedCa(const GlobalFlags& g, Connections& c, const std::string& ns) {
  auto cm = c.kube->getConfigMap(ns, g.ca_configmap);
  if (!cm.ok() && cm.status().code() == StatusCode::kNotFound) return std::string();
  if (!cm.ok())
    return cm.status().withContext("reading the CA ConfigMap " + ns + "/" + g.ca_configmap);
  auto it = cm->data.find("ca.crt");
  return it == cm->data.end() ? std::string() : it->second;
}

// Where the inventory API is, and whom its certificate must chain to.
struct InventoryTarget {
  std::string url = {};
  // Set when the URL came from the leader Lease: "Lease NS/NAME announces
  // URL", for messages.
  std::string from_lease = {};
  std::string ca_pem = {};  // the CA a URL of the Lease is verified against
  // The name its certificate is verified against ("": the URL's host).
  std::string server_name = {};
};

// The refusal of a URL from the Lease: one line naming the Lease, the URL,
// why, and what to do.
Status leaseUrlRefused(const InventoryTarget& t, const std::string& why) {
  return failedPrecondition("the leader " + t.from_lease + ": " + why +
                            "; resourceslicectl sends credentials to a URL of the Lease only "
                            "over https verified against the controller's published CA; give "
                            "the controller's URL with --server");
}

// The inventory API's URL: --server, as given; or the leader Lease's
// annotation, which anyone who may patch Leases can rewrite, so its URL must
// be https and is verified against the CA the controller publishes
// (--ca-configmap) or --certificate-authority, never the system store; plain
// http only with --allow-insecure-lease-url.
StatusOr<InventoryTarget> inventoryServer(const GlobalFlags& g, Connections& c) {
  if (!g.server.empty()) return InventoryTarget{.url = g.server};
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
  InventoryTarget t{.url = it->second,
                    .from_lease = "Lease " + ns + "/" + g.lease_name + " announces " + it->second};
  if (t.url.starts_with("http://") && g.allow_insecure_lease_url) return t;
  // A pod's address is in no certificate: the leader names the one its
  // certificate carries. Only a Service's name in the Lease's own namespace
  // is taken, so that whoever may patch the Lease cannot point the check at
  // another name the same CA may have signed.
  if (auto name = lease->metadata.annotations.find(kInventoryServerNameAnnotation);
      name != lease->metadata.annotations.end() && !name->second.empty()) {
    if (!name->second.ends_with("." + ns + ".svc")) {
      return leaseUrlRefused(t, "its server name " + inQuotes(name->second) + " (annotation " +
                                    kInventoryServerNameAnnotation +
                                    ") is not a Service name in namespace " + ns + " (NAME." + ns +
                                    ".svc)");
    }
    t.server_name = name->second;
    t.from_lease += " (certificate name " + name->second + ")";
  }
  if (!t.url.starts_with("https://")) {
    return leaseUrlRefused(t,
                           "not an https URL (--allow-insecure-lease-url allows plain http "
                           "for a local test)");
  }
  if (g.insecure_skip_tls_verify) {
    return leaseUrlRefused(t, "--insecure-skip-tls-verify applies to --server only");
  }
  if (!g.certificate_authority.empty()) return t;  // the user's CA, read by the caller
  ASSIGN_OR_RETURN(t.ca_pem, publishedCa(g, c, ns));
  if (t.ca_pem.empty()) {
    return leaseUrlRefused(t, "no CA to verify it: ConfigMap " + ns + "/" + g.ca_configmap +
                                  " has no ca.crt (--ca-configmap, or --certificate-authority)");
  }
  return t;
}

// Before credentials go to a URL of the Lease, one request without them
// (the public OpenAPI document) proves that the server's certificate
// verifies against the CA: a server that fails the TLS handshake never sees
// a byte of a request.
Status verifyLeaseUrl(const InventoryTarget& t, const client::ClientConfig& config, Clock& clock) {
  client::ClientConfig bare;
  bare.server = config.server;
  bare.ca_pem = config.ca_pem;
  bare.tls_server_name = config.tls_server_name;
  bare.user_agent = config.user_agent;
  auto transport = client::CpprestTransport::create(bare, clock);
  if (!transport.ok()) return leaseUrlRefused(t, transport.status().message());
  client::HttpRequest probe;
  probe.method = "GET";
  probe.path_and_query = "/openapi.json";
  probe.timeout = std::chrono::seconds(10);
  auto answer = (*transport)->send(probe);
  if (!answer.ok()) {
    return leaseUrlRefused(
        t, "its certificate cannot be verified (" + answer.status().message() + ")");
  }
  return okStatus();
}

Status connectInventory(const GlobalFlags& g, Connections& c) {
  client::ClientConfig config;
  ASSIGN_OR_RETURN(InventoryTarget target, inventoryServer(g, c));
  config.server = target.url;
  config.ca_pem = target.ca_pem;
  config.tls_server_name = target.server_name;
  while (config.server.ends_with("/")) config.server.pop_back();
  config.user_agent = kUserAgent;
  config.insecure_skip_tls_verify = g.insecure_skip_tls_verify && target.from_lease.empty();
  if (!g.certificate_authority.empty()) {
    auto ca = client::readConfigFile(g.certificate_authority);
    if (!ca.ok()) return ca.status().withContext("--certificate-authority");
    config.ca_pem = *ca;
  }
  if (!target.from_lease.empty() && config.server.starts_with("https://")) {
    RETURN_IF_ERROR(verifyLeaseUrl(target, config, *c.clock));
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
