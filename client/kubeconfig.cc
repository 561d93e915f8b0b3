#include "client/kubeconfig.h"

#include <array>
#include <functional>
#include <map>
#include <utility>

#include "client/base64.h"
#include "client/url.h"
#include "client/yaml.h"
#include "common/strings.h"

namespace rsc::client {
namespace {

namespace fs = std::filesystem;

constexpr char kExecApiV1[] = "client.authentication.k8s.io/v1";
constexpr char kExecApiV1beta1[] = "client.authentication.k8s.io/v1beta1";
constexpr char kExecExtension[] = "client.authentication.k8s.io/exec";

struct KubeconfigFile {
  fs::path path;
  Json root;
};

// A named cluster, user or context, with where it was defined.
struct NamedEntry {
  const Json* body = nullptr;  // the "cluster", "user" or "context" mapping
  const KubeconfigFile* file = nullptr;
  std::string field;  // "clusters[0].cluster"
  // The item around the body (for a cluster's extensions).
  const Json* item = nullptr;
};

std::string filePrefix(const KubeconfigFile& file) { return "kubeconfig " + file.path.string(); }

Status entryError(const NamedEntry& entry, const std::string& key, const std::string& message) {
  return invalidArgument(filePrefix(*entry.file) + ": " + entry.field + "." + key + ": " + message);
}

// The value of `key` in `body`, or nullptr when absent or null.
const Json* valueAt(const Json& body, const std::string& key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

// A string field. A plain YAML number or boolean where a string is expected
// is taken as its text, as kubectl's YAML-to-JSON step does for string fields.
StatusOr<std::string> stringOf(const Json* value, const std::function<Status(std::string)>& fail) {
  if (value == nullptr) return std::string();
  if (value->is_string()) return value->get<std::string>();
  if (value->is_number() || value->is_boolean()) return value->dump();
  return fail("must be a string");
}

StatusOr<std::string> stringAt(const NamedEntry& entry, const std::string& key) {
  return stringOf(valueAt(*entry.body, key),
                  [&](const std::string& m) { return entryError(entry, key, m); });
}

StatusOr<bool> boolAt(const NamedEntry& entry, const std::string& key) {
  const Json* value = valueAt(*entry.body, key);
  if (value == nullptr) return false;
  if (!value->is_boolean()) return entryError(entry, key, "must be true or false");
  return value->get<bool>();
}

bool hasValue(const NamedEntry& entry, const std::string& key) {
  const Json* value = valueAt(*entry.body, key);
  if (value == nullptr) return false;
  if (value->is_string() || value->is_object() || value->is_array()) return !value->empty();
  return true;
}

// A path named by a field, relative to the kubeconfig's folder.
fs::path resolvePath(const NamedEntry& entry, const std::string& name) {
  fs::path path(name);
  return path.is_relative() ? entry.file->path.parent_path() / path : path;
}

StatusOr<std::string> readReferencedFile(const NamedEntry& entry, const std::string& key,
                                         const std::string& name) {
  auto content = readConfigFile(resolvePath(entry, name));
  if (!content.ok()) return entryError(entry, key, content.status().message());
  return content;
}

// Reads PEM data given inline (base64, "-data") or as a file.
StatusOr<std::string> pemField(const NamedEntry& entry, const std::string& file_key) {
  const std::string data_key = file_key + "-data";
  ASSIGN_OR_RETURN(std::string file, stringAt(entry, file_key));
  ASSIGN_OR_RETURN(std::string data, stringAt(entry, data_key));
  if (!file.empty() && !data.empty()) {
    return invalidArgument(filePrefix(*entry.file) + ": " + entry.field + ": " + file_key +
                           " and " + data_key + " are both set; set one");
  }
  std::string pem;
  std::string key = data_key;
  if (!data.empty()) {
    auto decoded = decodeBase64(data);
    if (!decoded) return entryError(entry, data_key, "not valid base64");
    pem = std::move(*decoded);
  } else if (!file.empty()) {
    ASSIGN_OR_RETURN(pem, readReferencedFile(entry, file_key, file));
    key = file_key;
  } else {
    return std::string();
  }
  if (pem.find("-----BEGIN ") == std::string::npos) {
    return entryError(entry, key, "does not contain PEM data");
  }
  return pem;
}

Status collectEntries(const KubeconfigFile& file, const char* list_key, const char* body_key,
                      std::map<std::string, NamedEntry>& out) {
  const Json* list = valueAt(file.root, list_key);
  if (list == nullptr) return okStatus();
  if (!list->is_array()) {
    return invalidArgument(filePrefix(file) + ": " + list_key + ": must be a list");
  }
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& item = (*list)[i];
    const std::string field = std::string(list_key) + "[" + std::to_string(i) + "]";
    if (!item.is_object()) {
      return invalidArgument(filePrefix(file) + ": " + field + ": must be a mapping");
    }
    auto name = item.find("name");
    if (name == item.end() || !name->is_string() || name->get<std::string>().empty()) {
      return invalidArgument(filePrefix(file) + ": " + field + ".name: missing");
    }
    auto body = item.find(body_key);
    if (body == item.end() || !body->is_object()) {
      return invalidArgument(filePrefix(file) + ": " + field + "." + body_key +
                             ": missing or not a mapping");
    }
    // The first definition of a name wins, as kubectl merges.
    out.try_emplace(name->get<std::string>(),
                    NamedEntry{&*body, &file, field + "." + body_key, &item});
  }
  return okStatus();
}

// proxy-url: cpprestsdk speaks to HTTP proxies only (CONNECT for https).
Status applyProxy(const NamedEntry& cluster, ClientConfig& config) {
  ASSIGN_OR_RETURN(config.proxy_url, stringAt(cluster, "proxy-url"));
  if (config.proxy_url.empty()) return okStatus();
  const StatusOr<Url> url = parseUrl(config.proxy_url);
  if (!url.ok() || url->scheme != "http") {
    return entryError(cluster, "proxy-url",
                      inQuotes(config.proxy_url) +
                          ": only http:// proxies are supported (no https:// or socks5://)");
  }
  if (url->host.empty()) {
    return entryError(cluster, "proxy-url", inQuotes(config.proxy_url) + " names no host");
  }
  return okStatus();
}

// The cluster's extension for exec plugins, passed to them with
// provideClusterInfo.
StatusOr<Json> execExtension(const NamedEntry& cluster) {
  const Json* extensions = valueAt(*cluster.body, "extensions");
  if (extensions == nullptr) return Json(nullptr);
  if (!extensions->is_array()) return entryError(cluster, "extensions", "must be a list");
  for (const Json& e : *extensions) {
    if (e.is_object() && e.value("name", "") == kExecExtension) {
      return e.value("extension", Json(nullptr));
    }
  }
  return Json(nullptr);
}

Status applyCluster(const NamedEntry& cluster, ClientConfig& config, Json& exec_extension) {
  ASSIGN_OR_RETURN(config.server, stringAt(cluster, "server"));
  if (config.server.empty()) return entryError(cluster, "server", "missing");
  if (StatusOr<Url> url = parseHttpUrl(config.server); !url.ok()) {
    return entryError(cluster, "server", url.status().message());
  }
  while (config.server.size() > 8 && config.server.back() == '/') {
    config.server.pop_back();
  }
  ASSIGN_OR_RETURN(config.ca_pem, pemField(cluster, "certificate-authority"));
  ASSIGN_OR_RETURN(config.insecure_skip_tls_verify, boolAt(cluster, "insecure-skip-tls-verify"));
  if (config.insecure_skip_tls_verify && !config.ca_pem.empty()) {
    return entryError(cluster, "insecure-skip-tls-verify",
                      "cannot be used together with a certificate authority");
  }
  ASSIGN_OR_RETURN(config.tls_server_name, stringAt(cluster, "tls-server-name"));
  RETURN_IF_ERROR(applyProxy(cluster, config));
  ASSIGN_OR_RETURN(exec_extension, execExtension(cluster));
  return okStatus();
}

// A list of strings at `key` of the exec entry.
StatusOr<std::vector<std::string>> stringList(const NamedEntry& exec, const std::string& key) {
  std::vector<std::string> out;
  const Json* list = valueAt(*exec.body, key);
  if (list == nullptr) return out;
  if (!list->is_array()) return entryError(exec, key, "must be a list of strings");
  for (size_t i = 0; i < list->size(); ++i) {
    ASSIGN_OR_RETURN(std::string s, stringOf(&(*list)[i], [&](const std::string& m) {
                       return entryError(exec, key + "[" + std::to_string(i) + "]", m);
                     }));
    out.push_back(std::move(s));
  }
  return out;
}

StatusOr<ExecConfig> parseExec(const NamedEntry& user) {
  const Json* body = valueAt(*user.body, "exec");
  if (!body->is_object()) return entryError(user, "exec", "must be a mapping");
  const NamedEntry exec{body, user.file, user.field + ".exec", nullptr};
  ExecConfig out;
  out.origin = filePrefix(*user.file) + ": " + exec.field;

  ASSIGN_OR_RETURN(out.api_version, stringAt(exec, "apiVersion"));
  if (out.api_version.empty()) {
    return entryError(exec, "apiVersion", std::string("missing; use ") + kExecApiV1);
  }
  if (out.api_version != kExecApiV1 && out.api_version != kExecApiV1beta1) {
    return entryError(exec, "apiVersion",
                      inQuotes(out.api_version) + " is not supported; use " + kExecApiV1 + " or " +
                          kExecApiV1beta1);
  }
  ASSIGN_OR_RETURN(out.command, stringAt(exec, "command"));
  if (out.command.empty()) return entryError(exec, "command", "missing");
  if (out.command.find('/') != std::string::npos) {
    out.command = resolvePath(exec, out.command).string();
  }
  ASSIGN_OR_RETURN(out.args, stringList(exec, "args"));
  if (const Json* env = valueAt(*exec.body, "env"); env != nullptr) {
    if (!env->is_array()) return entryError(exec, "env", "must be a list of {name, value}");
    for (size_t i = 0; i < env->size(); ++i) {
      const std::string field = "env[" + std::to_string(i) + "]";
      if (!(*env)[i].is_object()) return entryError(exec, field, "must be a mapping");
      const NamedEntry var{&(*env)[i], exec.file, exec.field + "." + field, nullptr};
      ASSIGN_OR_RETURN(std::string name, stringAt(var, "name"));
      ASSIGN_OR_RETURN(std::string value, stringAt(var, "value"));
      if (name.empty() || name.find('=') != std::string::npos) {
        return entryError(var, "name", "missing or contains '='");
      }
      out.env.emplace_back(std::move(name), std::move(value));
    }
  }
  ASSIGN_OR_RETURN(out.install_hint, stringAt(exec, "installHint"));
  ASSIGN_OR_RETURN(out.provide_cluster_info, boolAt(exec, "provideClusterInfo"));

  // interactiveMode: required by v1, IfAvailable by default in v1beta1. The
  // controller has no terminal, so a plugin that must have one cannot work.
  ASSIGN_OR_RETURN(out.interactive_mode, stringAt(exec, "interactiveMode"));
  if (out.interactive_mode.empty()) {
    if (out.api_version == kExecApiV1) {
      return entryError(exec, "interactiveMode", "missing; use Never or IfAvailable");
    }
    out.interactive_mode = "IfAvailable";
  }
  if (out.interactive_mode == "Always") {
    return entryError(exec, "interactiveMode",
                      "Always needs a terminal, and the controller never has one; use Never or "
                      "IfAvailable with a plugin that can work without one");
  }
  if (out.interactive_mode != "Never" && out.interactive_mode != "IfAvailable") {
    return entryError(exec, "interactiveMode",
                      inQuotes(out.interactive_mode) + " is not Never, IfAvailable or Always");
  }
  return out;
}

Status applyUser(const NamedEntry& user, ClientConfig& config) {
  struct Unsupported {
    const char* key;
    const char* what;
  };
  static constexpr auto kUnsupported = std::to_array<Unsupported>({
      {"auth-provider", "auth providers are not supported"},
      {"username", "basic authentication is not supported"},
      {"password", "basic authentication is not supported"},
      {"as", "impersonation is not supported"},
      {"as-uid", "impersonation is not supported"},
      {"as-groups", "impersonation is not supported"},
      {"as-user-extra", "impersonation is not supported"},
  });
  for (const auto& u : kUnsupported) {
    if (hasValue(user, u.key)) {
      return entryError(
          user, u.key,
          std::string(u.what) + "; use a token, tokenFile, client certificate or exec plugin");
    }
  }
  ASSIGN_OR_RETURN(config.client_cert_pem, pemField(user, "client-certificate"));
  ASSIGN_OR_RETURN(config.client_key_pem, pemField(user, "client-key"));
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    const char* missing = config.client_cert_pem.empty() ? "client-certificate" : "client-key";
    const char* present = config.client_cert_pem.empty() ? "client-key" : "client-certificate";
    return entryError(user, missing, std::string("missing, but ") + present + " is set");
  }
  ASSIGN_OR_RETURN(config.bearer_token, stringAt(user, "token"));
  ASSIGN_OR_RETURN(std::string token_file, stringAt(user, "tokenFile"));
  if (!token_file.empty()) {
    // Read once now so that a missing file fails at startup, not at the
    // first request.
    RETURN_IF_ERROR(readReferencedFile(user, "tokenFile", token_file).status());
    config.token_file = resolvePath(user, token_file).string();
  }
  if (hasValue(user, "exec")) {
    if (!config.bearer_token.empty() || !config.token_file.empty() ||
        !config.client_cert_pem.empty()) {
      return entryError(user, "exec",
                        "cannot be combined with token, tokenFile or a client certificate; set "
                        "one way to authenticate");
    }
    ASSIGN_OR_RETURN(config.exec, parseExec(user));
  }
  return okStatus();
}

StatusOr<KubeconfigFile> readKubeconfigFile(const fs::path& path) {
  KubeconfigFile file{path, Json()};
  auto text = readConfigFile(path);
  if (!text.ok()) return text.status().withContext("kubeconfig");
  auto root = yamlToJson(*text);
  if (!root.ok()) return root.status().withContext(filePrefix(file));
  file.root = std::move(*root);
  if (file.root.is_null()) file.root = Json::object();
  if (!file.root.is_object()) {
    return invalidArgument(filePrefix(file) + ": the top level must be a mapping");
  }
  return file;
}

std::string joinPaths(const std::vector<fs::path>& files) {
  std::string out;
  for (const auto& f : files) {
    if (!out.empty()) out += ", ";
    out += f.string();
  }
  return out;
}

}  // namespace

StatusOr<ClientConfig> loadKubeconfig(const std::vector<fs::path>& paths,
                                      const std::string& context_override) {
  if (paths.empty()) return invalidArgument("kubeconfig: no file given");
  // Parse every file; entries point into `files`, which must not move.
  std::vector<KubeconfigFile> files;
  files.reserve(paths.size());
  for (const auto& path : paths) {
    ASSIGN_OR_RETURN(KubeconfigFile file, readKubeconfigFile(path));
    files.push_back(std::move(file));
  }

  // Merge: the first file to define a name (or current-context) wins.
  std::map<std::string, NamedEntry> clusters;
  std::map<std::string, NamedEntry> users;
  std::map<std::string, NamedEntry> contexts;
  std::string current_context;
  const KubeconfigFile* current_context_file = nullptr;
  for (const auto& file : files) {
    RETURN_IF_ERROR(collectEntries(file, "clusters", "cluster", clusters));
    RETURN_IF_ERROR(collectEntries(file, "users", "user", users));
    RETURN_IF_ERROR(collectEntries(file, "contexts", "context", contexts));
    const Json* current = valueAt(file.root, "current-context");
    if (current == nullptr) continue;
    if (!current->is_string()) {
      return invalidArgument(filePrefix(file) + ": current-context: must be a string");
    }
    if (current_context.empty() && !current->get<std::string>().empty()) {
      current_context = current->get<std::string>();
      current_context_file = &file;
    }
  }

  // Select the context (--context wins over current-context), then its
  // cluster and user.
  const std::string context_name = context_override.empty() ? current_context : context_override;
  auto context_it = contexts.find(context_name);
  if (context_it == contexts.end()) {
    if (!context_override.empty()) {
      return invalidArgument("kubeconfig " + joinPaths(paths) + ": context \"" + context_name +
                             "\" (--context) not found");
    }
    if (current_context_file == nullptr) {  // set with a non-empty current_context
      return invalidArgument("kubeconfig " + joinPaths(paths) + ": current-context is not set");
    }
    return invalidArgument(filePrefix(*current_context_file) + ": current-context: context \"" +
                           context_name + "\" not found");
  }
  const NamedEntry& context = context_it->second;
  ASSIGN_OR_RETURN(std::string cluster_name, stringAt(context, "cluster"));
  ASSIGN_OR_RETURN(std::string user_name, stringAt(context, "user"));
  ASSIGN_OR_RETURN(std::string namespace_name, stringAt(context, "namespace"));
  if (cluster_name.empty()) return entryError(context, "cluster", "missing");
  auto cluster_it = clusters.find(cluster_name);
  if (cluster_it == clusters.end()) {
    return entryError(context, "cluster", "cluster \"" + cluster_name + "\" not found");
  }

  ClientConfig config;
  Json exec_extension;
  RETURN_IF_ERROR(applyCluster(cluster_it->second, config, exec_extension));
  if (!user_name.empty()) {
    auto user_it = users.find(user_name);
    if (user_it == users.end()) {
      return entryError(context, "user", "user \"" + user_name + "\" not found");
    }
    RETURN_IF_ERROR(applyUser(user_it->second, config));
  }
  if (config.exec) config.exec->cluster_config = std::move(exec_extension);
  if (!namespace_name.empty()) config.namespace_ = namespace_name;
  config.source = "kubeconfig " + joinPaths(paths) + ", context " + context_name;
  return config;
}

}  // namespace rsc::client
