#include "client/in_cluster.h"

#include <utility>

#include "common/strings.h"

namespace rsc::client {

StatusOr<ClientConfig> loadInClusterConfig(const ConfigEnvironment& env) {
  auto host = env.get("KUBERNETES_SERVICE_HOST");
  auto port = env.get("KUBERNETES_SERVICE_PORT");
  if (!host || !port) {
    return failedPrecondition(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
  }
  ClientConfig config;
  // An IPv6 literal needs brackets in a URL.
  const bool ipv6 = host->find(':') != std::string::npos && host->front() != '[';
  config.server = "https://" + (ipv6 ? "[" + *host + "]" : *host) + ":" + *port;

  const std::filesystem::path token_file = env.service_account_dir / "token";
  auto token = readConfigFile(token_file);
  if (!token.ok()) return token.status().withContext("in-cluster config: token");
  config.token_file = token_file.string();

  auto ca = readConfigFile(env.service_account_dir / "ca.crt");
  if (!ca.ok()) return ca.status().withContext("in-cluster config: CA");
  if (ca->find("-----BEGIN ") == std::string::npos) {
    return invalidArgument(
        "in-cluster config: CA: " + (env.service_account_dir / "ca.crt").string() +
        " does not contain PEM data");
  }
  config.ca_pem = std::move(*ca);

  if (auto ns = env.get("POD_NAMESPACE")) {
    config.namespace_ = *ns;
  } else if (auto file = readConfigFile(env.service_account_dir / "namespace"); file.ok()) {
    std::string ns_name = trimBlanks(*file);
    if (!ns_name.empty()) config.namespace_ = ns_name;
  }
  config.source = "in-cluster";
  return config;
}

}  // namespace rsc::client
