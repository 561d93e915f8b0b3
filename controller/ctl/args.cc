#include "controller/ctl/args.h"

#include <algorithm>
#include <array>
#include <set>
#include <string_view>

#include "common/duration.h"
#include "controller/flags.h"

namespace rsc::ctl {
namespace {

enum class Takes { kValue, kBool, kOptionalValue };

// One field table for every flag: which command takes it ("" for the global
// ones) and what it takes.
struct FlagSpec {
  std::string_view name;
  std::string_view shorthand;
  Takes takes;
  std::string_view command;
  std::string_view help;
};

constexpr std::array kFlags = {
    FlagSpec{"server", "s", Takes::kValue, "",
             "The controller's inventory API (https://host:port). Default: the URL in the leader "
             "Lease's annotation, read through the kubeconfig."},
    FlagSpec{"token", "", Takes::kValue, "",
             "Bearer token for the inventory API. Default: the kubeconfig user's credentials."},
    FlagSpec{"token-file", "", Takes::kValue, "", "File holding the bearer token."},
    FlagSpec{"certificate-authority", "", Takes::kValue, "",
             "PEM file of the CA that signed the inventory API's certificate."},
    FlagSpec{"insecure-skip-tls-verify", "", Takes::kBool, "",
             "Do not check the inventory API's certificate (testing only)."},
    FlagSpec{"kubeconfig", "", Takes::kValue, "",
             "Kubeconfig for the API server (slices, finding the controller, credentials)."},
    FlagSpec{"context", "", Takes::kValue, "", "The kubeconfig context to use."},
    FlagSpec{"lease-namespace", "", Takes::kValue, "",
             "Namespace of the leader Lease. Default: the context's namespace."},
    FlagSpec{"lease-name", "", Takes::kValue, "", "Name of the leader Lease."},
    FlagSpec{"ca-configmap", "", Takes::kValue, "",
             "ConfigMap (key ca.crt) with the inventory API's CA, next to the Lease."},
    FlagSpec{"request-timeout", "", Takes::kValue, "",
             "Longest wait for a byte of an answer (90s)."},
    FlagSpec{"help", "h", Takes::kBool, "*", "Show help."},
    FlagSpec{"wait", "", Takes::kOptionalValue, "push",
             "Hold the answer until published, up to DURATION (60s, the API's longest)."},
    FlagSpec{"driver", "", Takes::kValue, "push", "The driver of a pool file."},
    FlagSpec{"driver", "", Takes::kValue, "diff", "The driver of a pool file."},
    FlagSpec{"output", "o", Takes::kValue, "get", "Output format: wide, json or yaml."},
    FlagSpec{"output", "o", Takes::kValue, "slices", "Output format: wide, json or yaml."},
    FlagSpec{"all", "", Takes::kBool, "withdraw", "Withdraw every pool of DRIVER."},
    FlagSpec{"wait", "", Takes::kOptionalValue, "withdraw",
             "Hold the answer until the slices are deleted, up to DURATION (60s)."},
    FlagSpec{"for", "", Takes::kValue, "wait", "The condition: published (the only one)."},
    FlagSpec{"timeout", "", Takes::kValue, "wait", "How long to wait (60s)."},
};

constexpr std::array<std::string_view, 7> kCommands = {"push", "get",    "diff",      "withdraw",
                                                       "wait", "slices", "completion"};

const FlagSpec* findFlag(std::string_view name, bool shorthand, const std::string& command) {
  for (const FlagSpec& f : kFlags) {
    if ((shorthand ? f.shorthand : f.name) != name) continue;
    if (f.command.empty() || f.command == "*" || f.command == command) return &f;
  }
  return nullptr;
}

StatusOr<bool> parseBool(const std::string& flag, const std::string& value) {
  if (value == "true" || value.empty()) return true;
  if (value == "false") return false;
  return invalidArgument("flag --" + flag + ": want true or false, got \"" + value + "\"");
}

// Stores a global flag's value.
Status setGlobal(GlobalFlags& g, std::string_view name, const std::string& value) {
  const std::map<std::string_view, std::string*> strings = {
      {"server", &g.server},
      {"token", &g.token},
      {"token-file", &g.token_file},
      {"certificate-authority", &g.certificate_authority},
      {"kubeconfig", &g.kubeconfig},
      {"context", &g.context},
      {"lease-namespace", &g.lease_namespace},
      {"lease-name", &g.lease_name},
      {"ca-configmap", &g.ca_configmap},
  };
  if (auto it = strings.find(name); it != strings.end()) {
    if (value.empty()) return invalidArgument("flag --" + std::string(name) + " needs a value");
    *it->second = value;
    return okStatus();
  }
  if (name == "insecure-skip-tls-verify") {
    ASSIGN_OR_RETURN(g.insecure_skip_tls_verify, parseBool(std::string(name), value));
    return okStatus();
  }
  // request-timeout
  auto d = parseDuration(value);
  if (!d.ok()) return invalidArgument("flag --request-timeout: " + d.status().message());
  g.request_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  return okStatus();
}

// Checks the positional arguments of a parsed command.
Status checkArgs(const Invocation& inv) {
  const size_t n = inv.args.size();
  const std::string& c = inv.command;
  const auto need = [&](bool ok, const std::string& what) {
    return ok ? okStatus() : invalidArgument(c + " needs " + what + " (see " + c + " --help)");
  };
  if (c == "push" || c == "diff") return need(n == 1, "one FILE or DIR");
  if (c == "get") {
    if (n >= 1 && inv.args[0] == "pools") return need(n <= 2, "at most one DRIVER after pools");
    if (n >= 1 && inv.args[0] == "pool") return need(n == 3, "DRIVER POOL after pool");
    return need(false, "pools [DRIVER] or pool DRIVER POOL");
  }
  if (c == "withdraw") {
    RETURN_IF_ERROR(need(n == 1 || n == 2, "DRIVER [POOL]"));
    if (n == 1 && !inv.has("all")) {
      return invalidArgument(
          "withdraw DRIVER without POOL withdraws every pool of the driver: "
          "say so with --all");
    }
    if (n == 2 && inv.has("all")) return invalidArgument("withdraw: --all goes without POOL");
    return okStatus();
  }
  if (c == "wait") {
    RETURN_IF_ERROR(need(n == 2, "DRIVER POOL"));
    const std::string cond = inv.flag("for", "published");
    if (cond != "published") {
      return invalidArgument(R"(flag --for: only "published" is known, got ")" + cond + "\"");
    }
    return okStatus();
  }
  if (c == "slices") return need(n == 1 || n == 2, "DRIVER [POOL]");
  // completion
  return need(n == 1, "bash or zsh");
}

// Checks the values of command flags that have a fixed set or a form.
Status checkFlagValues(const Invocation& inv) {
  if (inv.has("output")) {
    const std::string o = inv.flag("output");
    if (o != "wide" && o != "json" && o != "yaml" && o != "table") {
      return invalidArgument("flag -o: want wide, json or yaml, got \"" + o + "\"");
    }
  }
  for (const char* name : {"wait", "timeout"}) {
    if (!inv.has(name) || inv.flag(name).empty()) continue;
    auto d = parseDuration(inv.flag(name));
    if (!d.ok())
      return invalidArgument("flag --" + std::string(name) + ": " + d.status().message());
  }
  return okStatus();
}

}  // namespace

std::string Invocation::flag(const std::string& name, const std::string& fallback) const {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

StatusOr<Invocation> parseArgs(const std::vector<std::string>& args) {
  Invocation inv;
  // The command is the first positional argument; flags may come before it,
  // so the command flags are resolved once it is known (a second pass).
  std::vector<std::string> positional;
  bool only_positional = false;
  for (size_t i = 0; i < args.size() && inv.command.empty(); ++i) {
    const std::string& a = args[i];
    if (only_positional || !a.starts_with("-")) {
      inv.command = a;
    } else if (a == "--") {
      only_positional = true;
    } else if (a.find('=') == std::string::npos) {
      // Skips the value of a global flag given as "--server URL".
      const bool shorthand = !a.starts_with("--");
      const FlagSpec* spec = findFlag(a.substr(shorthand ? 1 : 2), shorthand, "");
      if (spec != nullptr && spec->takes == Takes::kValue) ++i;
    }
  }
  if (inv.command == "help") {
    inv.help = true;
    inv.command.clear();
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "help") inv.command = args[i + 1];
    }
  }
  if (!inv.command.empty() &&
      std::find(kCommands.begin(), kCommands.end(), inv.command) == kCommands.end()) {
    return invalidArgument("unknown command \"" + inv.command +
                           "\" (commands: push, get, diff, withdraw, wait, slices, completion)");
  }
  only_positional = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_positional || a == "-" || !a.starts_with("-")) {
      positional.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    // --name=value, --name value, -o value, -ovalue.
    const bool shorthand = !a.starts_with("--");
    std::string name = a.substr(shorthand ? 1 : 2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (shorthand && name.size() > 1) {
      value = name.substr(1);
      name.resize(1);
    }
    const FlagSpec* spec = findFlag(name, shorthand, inv.command);
    if (spec == nullptr) {
      return invalidArgument("unknown flag " + a.substr(0, a.find('=')) +
                             (inv.command.empty() ? "" : " for " + inv.command));
    }
    if (spec->takes == Takes::kValue && !value) {
      if (i + 1 >= args.size())
        return invalidArgument("flag --" + std::string(spec->name) + " needs a value");
      value = args[++i];
    }
    if (spec->name == "help") {
      inv.help = true;
    } else if (spec->command.empty()) {
      RETURN_IF_ERROR(setGlobal(inv.global, spec->name, value.value_or("")));
    } else {
      inv.flags[std::string(spec->name)] = value.value_or("");
    }
  }
  if (!positional.empty() && positional.front() == "help") positional.erase(positional.begin());
  if (!positional.empty() && positional.front() == inv.command) {
    positional.erase(positional.begin());
  }
  inv.args = std::move(positional);
  if (inv.help || inv.command.empty()) {
    inv.help = true;
    return inv;
  }
  RETURN_IF_ERROR(checkArgs(inv));
  RETURN_IF_ERROR(checkFlagValues(inv));
  return inv;
}

}  // namespace rsc::ctl
