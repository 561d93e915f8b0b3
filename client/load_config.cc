#include "client/load_config.h"

#include <filesystem>
#include <sstream>
#include <vector>

#include "client/in_cluster.h"
#include "client/kubeconfig.h"

namespace rsc::client {
namespace {

namespace fs = std::filesystem;

bool fileExists(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

}  // namespace

StatusOr<ClientConfig> loadConfig(const std::string& explicit_kubeconfig_path,
                                  const ConfigEnvironment& env, const std::string& context) {
  // 1. --kubeconfig: it must exist.
  if (!explicit_kubeconfig_path.empty()) {
    return loadKubeconfig({explicit_kubeconfig_path}, context);
  }

  // 2. In-cluster, when the environment says so and a token is mounted (a pod
  // without automounted credentials may still bring its own kubeconfig).
  // --context names a kubeconfig context, which in-cluster has not.
  std::string tried;
  if (!context.empty()) {
    tried = "in-cluster (skipped: --context names a kubeconfig context)";
  } else if (env.get("KUBERNETES_SERVICE_HOST") && env.get("KUBERNETES_SERVICE_PORT")) {
    if (fileExists(env.service_account_dir / "token")) return loadInClusterConfig(env);
    tried = "in-cluster (" + (env.service_account_dir / "token").string() + " not found)";
  } else {
    tried = "in-cluster (KUBERNETES_SERVICE_HOST/PORT not set)";
  }

  // 3. $KUBECONFIG: the files of the list that exist, merged.
  if (auto list = env.get("KUBECONFIG")) {
    std::vector<fs::path> existing;
    std::stringstream items(*list);
    std::string item;
    while (std::getline(items, item, ':')) {
      if (!item.empty() && fileExists(item)) existing.emplace_back(item);
    }
    if (!existing.empty()) return loadKubeconfig(existing, context);
    tried += ", $KUBECONFIG (no file of \"" + *list + "\" exists)";
  } else {
    tried += ", $KUBECONFIG (not set)";
  }

  // 4. ~/.kube/config.
  if (auto home = env.get("HOME")) {
    fs::path path = fs::path(*home) / ".kube" / "config";
    if (fileExists(path)) return loadKubeconfig({path}, context);
    tried += ", " + path.string() + " (not found)";
  } else {
    tried += ", ~/.kube/config ($HOME not set)";
  }
  return failedPrecondition("no Kubernetes client configuration found; tried " + tried +
                            "; pass --kubeconfig");
}

}  // namespace rsc::client
