// The command line of resourceslicectl, kubectl-like: `resourceslicectl
// [global flags] COMMAND [args] [flags]`, flags before or after the command.
// Parsing is a pure function (main and the unit tests call it); it knows
// every command's flags and help text, so a typo fails before any request.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/status.h"

namespace rsc::ctl {

// The chart's defaults (charts/resourceslice-controller: leaderElection.id
// is the release's full name, "resourceslice-controller" for a release of
// that name; the Lease lives in the release namespace).
inline constexpr char kDefaultLeaseName[] = "resourceslice-controller";
// The ConfigMap (key ca.crt) where the chart's controller publishes the CA of
// its self-signed inventory certificate (--inventory-ca-configmap), in the
// Lease's namespace.
inline constexpr char kDefaultCaConfigMap[] = "resourceslice-controller-ca";
// kubectl's default: no timeout of its own, the server's idle timeout rules;
// the inventory API holds a ?wait= answer for at most 60 s.
inline constexpr std::chrono::milliseconds kDefaultRequestTimeout = std::chrono::seconds(90);
// How long `push --wait` and `withdraw --wait` hold the answer when given no
// duration: the inventory API's longest ?wait=.
inline constexpr char kDefaultPushWaitText[] = "60s";
inline constexpr std::chrono::milliseconds kDefaultWaitTimeout = std::chrono::seconds(60);
inline constexpr char kDefaultWaitTimeoutText[] = "60s";

struct GlobalFlags {
  std::string server;  // the controller's inventory API; empty: found via the kubeconfig
  std::string token;
  std::string token_file;
  std::string certificate_authority;
  bool insecure_skip_tls_verify = false;  // for --server only
  // Lets a plain-http URL of the leader Lease be used, credentials and all
  // (a local test without TLS); https URLs of the Lease are always verified.
  bool allow_insecure_lease_url = false;
  std::string kubeconfig;
  std::string context;
  std::string lease_namespace;  // empty: the kubeconfig context's namespace
  std::string lease_name = kDefaultLeaseName;
  std::string ca_configmap = kDefaultCaConfigMap;
  std::chrono::milliseconds request_timeout = kDefaultRequestTimeout;
};

struct Invocation {
  GlobalFlags global;
  // "push", "get", "diff", "withdraw", "wait", "slices", "completion", or ""
  // (no command: help).
  std::string command;
  std::vector<std::string> args;  // positional arguments after the command
  // Command flags by name, as given ("--wait" without a value is "").
  std::map<std::string, std::string> flags;
  bool help = false;

  bool has(const std::string& flag) const { return flags.contains(flag); }
  std::string flag(const std::string& name, const std::string& fallback = "") const;
};

// How a flag takes its value.
enum class Takes {
  kValue,          // --flag VALUE, --flag=VALUE
  kSwitch,         // --flag, --flag=false
  kOptionalValue,  // --flag, --flag=VALUE
};

// One flag: the one table that the parser, the help and the completion
// scripts are made from, so that a flag is added in one line.
struct FlagSpec {
  // Where a global flag's value goes; command flags go to Invocation::flags.
  using Target = std::variant<std::monostate, std::string GlobalFlags::*, bool GlobalFlags::*,
                              std::chrono::milliseconds GlobalFlags::*>;

  std::string_view name;
  char shorthand;
  Takes takes;
  // The commands that take it, space-separated; "" for a global flag.
  std::string_view commands;
  // The value's name in the help; a FILE is completed as a file name, a
  // DURATION is checked to be one.
  std::string_view value;
  // The only values taken, space-separated, which completion offers; "" for any.
  std::string_view choices;
  std::string_view help;
  Target target;

  bool global() const { return commands.empty(); }
  bool takenBy(std::string_view command) const;
  std::vector<std::string> commandNames() const;
};

// Every flag, global ones first, in the order the help lists them.
std::span<const FlagSpec> flagTable();

// Reads an environment variable: its value, or nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The variable that sets a global flag's default: RESOURCESLICECTL_ and the
// flag's name in capitals with '_' for '-' (RESOURCESLICECTL_TOKEN_FILE).
// Every global flag that takes a value has one, but --token (a secret is not
// left in the environment of every process the shell starts).
std::string envVariable(const FlagSpec& spec);

// Parses argv[1..]. Fails with a one-line message naming the flag or
// argument ("unknown flag --foo for push", "get pool needs DRIVER POOL").
// A --help anywhere sets `help` and skips the argument count checks. Global
// flags take their defaults from `env` (envVariable); the command line wins.
StatusOr<Invocation> parseArgs(const std::vector<std::string>& args, const EnvLookup& env);
// The same with the process's environment.
StatusOr<Invocation> parseArgs(const std::vector<std::string>& args);

// The help of one command ("" for the top level), with examples.
std::string usage(const std::string& command);

// A completion script for "bash" or "zsh".
StatusOr<std::string> completionScript(const std::string& shell);

}  // namespace rsc::ctl
