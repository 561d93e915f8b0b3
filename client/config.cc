#include "client/config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace rsc::client {

namespace fs = std::filesystem;

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

}  // namespace rsc::client
