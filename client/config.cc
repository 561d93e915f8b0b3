#include "client/config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

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

StatusOr<std::string> readConfigFile(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Status(StatusCode::kNotFound, "file " + path.string() + " not found");
  }
  if (fs::is_directory(path, ec)) {
    return invalidArgument("file " + path.string() + " is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return failedPrecondition("cannot read file " + path.string() + ": " + std::strerror(errno));
  }
  // Read one byte past the bound to tell a file of exactly the bound from a
  // larger one (the size of a named pipe or /proc file is not known ahead).
  std::string content(kMaxConfigFileBytes + 1, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  if (in.bad()) return failedPrecondition("cannot read file " + path.string());
  content.resize(static_cast<size_t>(in.gcount()));
  if (content.size() > kMaxConfigFileBytes) {
    return invalidArgument("file " + path.string() + " is larger than " +
                           std::to_string(kMaxConfigFileBytes >> 20) + " MiB");
  }
  return content;
}

std::optional<std::string> ConfigEnvironment::get(const std::string& name) const {
  auto it = variables.find(name);
  if (it == variables.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

ConfigEnvironment ConfigEnvironment::fromProcess() {
  ConfigEnvironment env;
  for (const char* name : {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "POD_NAMESPACE",
                           "KUBECONFIG", "HOME"}) {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read once at startup.
    if (const char* value = std::getenv(name)) {
      env.variables[name] = value;
    }
  }
  return env;
}

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
