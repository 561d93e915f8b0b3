#include "client/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "client/base64.h"
#include "client/resource_slice.h"
#include "common/strings.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX names it nowhere else

namespace rsc::client {
namespace {

constexpr char kEnvExecInfo[] = "KUBERNETES_EXEC_INFO";
constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

Status execError(const ExecConfig& exec, const std::string& message) {
  return Status(StatusCode::kUnavailable, exec.origin + ": " + message);
}

bool isExecutable(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The file to run: the command itself when it has a '/', else the first
// executable of that name in $PATH.
StatusOr<std::string> findExecutable(const ExecConfig& exec) {
  std::string searched;
  if (exec.command.find('/') != std::string::npos) {
    if (isExecutable(exec.command)) return exec.command;
  } else {
    // NOLINTNEXTLINE(concurrency-mt-unsafe): PATH is not changed after startup.
    const char* path_env = std::getenv("PATH");
    searched = path_env != nullptr && *path_env != '\0' ? path_env : kDefaultPath;
    for (const std::string_view dir : split(searched, ':')) {
      const std::string candidate = (dir.empty() ? "." : std::string(dir)) + "/" + exec.command;
      if (isExecutable(candidate)) return candidate;
    }
  }
  std::string message = "command: executable \"" + exec.command + "\" not found";
  if (!searched.empty()) message += " in $PATH (" + searched + ")";
  if (!exec.install_hint.empty()) message += "; " + trimBlanks(exec.install_hint);
  return Status(StatusCode::kFailedPrecondition, exec.origin + "." + message);
}

// The controller's environment with the plugin's variables set over it.
std::vector<std::string> childEnvironment(const ExecConfig& exec, const ClientConfig& cluster) {
  std::vector<std::pair<std::string, std::string>> overrides = exec.env;
  overrides.emplace_back(kEnvExecInfo, execInfo(exec, cluster));
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : overrides) replaced = replaced || k == name;
    if (!replaced) out.emplace_back(entry);
  }
  for (const auto& [k, v] : overrides) {
    std::string entry = k;
    entry += '=';
    entry += v;
    out.push_back(std::move(entry));
  }
  return out;
}

struct Pipe {
  std::array<int, 2> fds{-1, -1};
  Pipe() {
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) fds = {-1, -1};
  }
  ~Pipe() {
    closeRead();
    closeWrite();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  bool ok() const { return fds[0] >= 0; }
  void closeRead() {
    if (fds[0] >= 0) ::close(fds[0]);
    fds[0] = -1;
  }
  void closeWrite() {
    if (fds[1] >= 0) ::close(fds[1]);
    fds[1] = -1;
  }
};

struct ChildOutput {
  std::string out;
  std::string err;
  int wait_status = 0;
  bool timed_out = false;
  bool too_large = false;
};

// Starts `file` in a process group of its own (so that a timeout kills what
// it started too), stdin from /dev/null, and collects its output.
StatusOr<ChildOutput> runChild(const std::string& file, const ExecConfig& exec,
                               const ClientConfig& cluster, const ExecRunOptions& options) {
  std::vector<std::string> argv_strings{exec.command};
  argv_strings.insert(argv_strings.end(), exec.args.begin(), exec.args.end());
  std::vector<std::string> env_strings = childEnvironment(exec, cluster);
  std::vector<char*> argv;
  std::vector<char*> envp;
  argv.reserve(argv_strings.size() + 1);
  envp.reserve(env_strings.size() + 1);
  for (auto& s : argv_strings) argv.push_back(s.data());
  for (auto& s : env_strings) envp.push_back(s.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);

  Pipe out;
  Pipe err;
  if (!out.ok() || !err.ok()) return execError(exec, std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err.fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The controller blocks its shutdown signals and ignores SIGPIPE; the
  // plugin starts with neither.
  sigset_t none;
  sigemptyset(&none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, file.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (spawned != 0) {
    return execError(exec, "cannot run \"" + file + "\": " + std::strerror(spawned));
  }
  out.closeWrite();
  err.closeWrite();

  // Read both pipes until they close, the output is too large, or time is up.
  ChildOutput result;
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  std::array<char, 4096> buf{};
  bool out_open = true;
  bool err_open = true;
  while (out_open || err_open) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    std::array<pollfd, 2> fds{pollfd{out_open ? out.fds[0] : -1, POLLIN, 0},
                              pollfd{err_open ? err.fds[0] : -1, POLLIN, 0}};
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) break;
    for (size_t i = 0; i < fds.size(); ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
        continue;
      }
      if (i == 0) {
        result.out.append(buf.data(), static_cast<size_t>(n));
      } else if (result.err.size() < kMaxExecStderrInError) {
        result.err.append(buf.data(), static_cast<size_t>(n));
      }
    }
    if (result.out.size() > options.max_output_bytes) {
      result.too_large = true;
      break;
    }
  }
  if (result.timed_out || result.too_large) {
    ::kill(-pid, SIGKILL);  // the group: what the plugin started too
    ::kill(pid, SIGKILL);   // in case it left its group
  }
  while (::waitpid(pid, &result.wait_status, 0) < 0 && errno == EINTR) {
  }
  return result;
}

std::string stderrSuffix(const std::string& err) {
  std::string text = excerpt(err, kMaxExecStderrInError);
  return text.empty() ? "" : ": " + text;
}

}  // namespace

std::string execInfo(const ExecConfig& exec, const ClientConfig& cluster) {
  Json spec = {{"interactive", false}};
  if (exec.provide_cluster_info) {
    Json c = {{"server", cluster.server}};
    if (!cluster.tls_server_name.empty()) c["tls-server-name"] = cluster.tls_server_name;
    if (cluster.insecure_skip_tls_verify) c["insecure-skip-tls-verify"] = true;
    if (!cluster.ca_pem.empty()) c["certificate-authority-data"] = encodeBase64(cluster.ca_pem);
    if (!cluster.proxy_url.empty()) c["proxy-url"] = cluster.proxy_url;
    if (!exec.cluster_config.is_null()) c["config"] = exec.cluster_config;
    spec["cluster"] = std::move(c);
  }
  return Json{{"apiVersion", exec.api_version}, {"kind", "ExecCredential"}, {"spec", spec}}.dump();
}

StatusOr<ExecCredential> parseExecCredential(std::string_view output, const ExecConfig& exec) {
  const Json j = Json::parse(output, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return execError(exec, "the plugin's output is not an ExecCredential JSON object: " +
                               inQuotes(excerpt(output, 200)));
  }
  const std::string api_version = j.value("apiVersion", "");
  if (api_version != exec.api_version) {
    return execError(exec, "the plugin printed apiVersion \"" + api_version + "\", expected \"" +
                               exec.api_version + "\"");
  }
  if (j.value("kind", "") != "ExecCredential") {
    return execError(exec, "the plugin printed kind \"" + j.value("kind", "") +
                               R"(", expected "ExecCredential")");
  }
  auto status = j.find("status");
  if (status == j.end() || !status->is_object()) {
    return execError(exec, "the plugin's ExecCredential has no status");
  }
  ExecCredential out;
  for (auto [key, member] :
       {std::pair{"token", &out.token}, std::pair{"clientCertificateData", &out.client_cert_pem},
        std::pair{"clientKeyData", &out.client_key_pem}}) {
    auto it = status->find(key);
    if (it == status->end() || it->is_null()) continue;
    if (!it->is_string()) return execError(exec, std::string("status.") + key + ": not a string");
    *member = it->get<std::string>();
  }
  if (out.client_cert_pem.empty() != out.client_key_pem.empty()) {
    return execError(exec,
                     "status: clientCertificateData and clientKeyData must be given together");
  }
  if (out.token.empty() && out.client_cert_pem.empty()) {
    return execError(exec, "status: neither a token nor clientCertificateData and clientKeyData");
  }
  if (auto it = status->find("expirationTimestamp"); it != status->end() && !it->is_null()) {
    const std::optional<int64_t> seconds =
        it->is_string() ? rfc3339Seconds(it->get<std::string>()) : std::nullopt;
    if (!seconds) {
      return execError(exec,
                       "status.expirationTimestamp: " + it->dump() + " is not an RFC 3339 time");
    }
    out.expiry = Clock::SystemTime(std::chrono::seconds(*seconds));
  }
  return out;
}

namespace {

// Runs the plugin and parses its output; `call` is set to how the run went.
StatusOr<ExecCredential> runAndParse(const ExecConfig& exec, const ClientConfig& cluster,
                                     ExecPluginCall& call) {
  const ExecRunOptions& options = cluster.exec_run;
  call = {-1, "plugin_not_found_error"};
  ASSIGN_OR_RETURN(std::string file, findExecutable(exec));
  call = {-1, "client_internal_error"};
  ASSIGN_OR_RETURN(ChildOutput child, runChild(file, exec, cluster, options));
  if (child.timed_out) {
    call = {-1, "plugin_timeout_error"};
    return execError(exec, inQuotes(exec.command) + " gave no answer within " +
                               std::to_string(options.timeout.count()) + " ms; killed");
  }
  if (child.too_large) {
    call = {-1, "plugin_output_limit_error"};
    return execError(exec, inQuotes(exec.command) + " printed more than " +
                               std::to_string(options.max_output_bytes) + " bytes; killed");
  }
  call = {-1, "plugin_execution_error"};
  if (WIFSIGNALED(child.wait_status)) {
    return execError(exec, inQuotes(exec.command) + " was killed by signal " +
                               std::to_string(WTERMSIG(child.wait_status)) +
                               stderrSuffix(child.err));
  }
  if (!WIFEXITED(child.wait_status) || WEXITSTATUS(child.wait_status) != 0) {
    call.code = WIFEXITED(child.wait_status) ? WEXITSTATUS(child.wait_status) : -1;
    return execError(exec, inQuotes(exec.command) + " failed with exit code " +
                               std::to_string(WEXITSTATUS(child.wait_status)) +
                               stderrSuffix(child.err));
  }
  // Exited 0 but printed no usable credential: an execution error, with
  // code -1 so that code 0 keeps meaning a credential was given.
  StatusOr<ExecCredential> parsed = parseExecCredential(child.out, exec);
  if (parsed.ok()) call = {0, "no_error"};
  return parsed;
}

}  // namespace

StatusOr<ExecCredential> runExecPlugin(const ExecConfig& exec, const ClientConfig& cluster) {
  ExecPluginCall call;
  StatusOr<ExecCredential> answer = runAndParse(exec, cluster, call);
  if (cluster.exec_run.observer) cluster.exec_run.observer(call);
  return answer;
}

}  // namespace rsc::client
