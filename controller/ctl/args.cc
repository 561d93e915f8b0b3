#include "controller/ctl/args.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string_view>

#include "common/duration.h"
#include "common/flag_set.h"
#include "common/strings.h"

namespace rsc::ctl {
namespace {

using G = GlobalFlags;

constexpr std::array kFlags = {
    FlagSpec{"server", 's', Takes::kValue, "", "URL", "",
             "the controller's inventory API; default: the URL the leader Lease announces "
             "(annotation resourceslice.dra.k8s.io/inventory-url), read through the kubeconfig, "
             "used only if https and verified against --ca-configmap's CA",
             &G::server},
    FlagSpec{"token", 0, Takes::kValue, "", "TOKEN", "",
             "bearer token; default: the kubeconfig user's credentials", &G::token},
    FlagSpec{"token-file", 0, Takes::kValue, "", "FILE", "", "file holding the bearer token",
             &G::token_file},
    FlagSpec{"certificate-authority", 0, Takes::kValue, "", "FILE", "",
             "PEM CA of the inventory API's certificate", &G::certificate_authority},
    FlagSpec{"insecure-skip-tls-verify", 0, Takes::kSwitch, "", "", "",
             "do not check the certificate of --server (testing only; never for the Lease's URL)",
             &G::insecure_skip_tls_verify},
    FlagSpec{"allow-insecure-lease-url", 0, Takes::kSwitch, "", "", "",
             "send credentials to a plain-http URL of the leader Lease (local tests only: "
             "whoever may patch the Lease could redirect them)",
             &G::allow_insecure_lease_url},
    FlagSpec{"kubeconfig", 0, Takes::kValue, "", "FILE", "",
             "kubeconfig (default: $KUBECONFIG, ~/.kube/config)", &G::kubeconfig},
    FlagSpec{"context", 0, Takes::kValue, "", "NAME", "", "kubeconfig context", &G::context},
    FlagSpec{"lease-namespace", 0, Takes::kValue, "", "NS", "",
             "namespace of the leader Lease (default: the context's)", &G::lease_namespace},
    FlagSpec{"lease-name", 0, Takes::kValue, "", "NAME", "", "name of the leader Lease",
             &G::lease_name},
    FlagSpec{"ca-configmap", 0, Takes::kValue, "", "NAME", "",
             "without --server and --certificate-authority, the https URL of the Lease is "
             "verified against this ConfigMap's ca.crt in the Lease's namespace (never the "
             "system store); the chart publishes it",
             &G::ca_configmap},
    FlagSpec{"request-timeout", 0, Takes::kValue, "", "DURATION", "",
             "longest wait for a byte of an answer", &G::request_timeout},
    FlagSpec{"help", 'h', Takes::kSwitch, "", "", "", "show the help", {}},
    FlagSpec{"wait",
             0,
             Takes::kOptionalValue,
             "push",
             "DURATION",
             "",
             "hold each answer until the pool is published, up to DURATION (default 60s, the "
             "API's longest)",
             {}},
    FlagSpec{"driver", 0, Takes::kValue, "push diff", "DRIVER", "", "the driver of pool files", {}},
    FlagSpec{"output",
             'o',
             Takes::kValue,
             "get slices",
             "FORMAT",
             "wide json yaml",
             "output format: wide, json or yaml",
             {}},
    FlagSpec{"all", 0, Takes::kSwitch, "withdraw", "", "", "withdraw every pool of DRIVER", {}},
    FlagSpec{"wait",
             0,
             Takes::kOptionalValue,
             "withdraw",
             "DURATION",
             "",
             "hold the answer until the slices are deleted, up to DURATION (default 60s)",
             {}},
    FlagSpec{"for",
             0,
             Takes::kValue,
             "wait",
             "CONDITION",
             "published",
             "the condition: published (the only one)",
             {}},
    FlagSpec{
        "timeout", 0, Takes::kValue, "wait", "DURATION", "", "how long to wait (default 60s)", {}},
};

constexpr std::array<std::string_view, 7> kCommands = {"push", "get",    "diff",      "withdraw",
                                                       "wait", "slices", "completion"};

// The words of a space-separated list.
std::vector<std::string> words(std::string_view list) {
  const std::vector<std::string_view> found = fields(list);
  return {found.begin(), found.end()};
}

// Checks a command flag's value against what the table says it takes.
Status checkValue(const FlagSpec& spec, const std::string& value) {
  if (!spec.choices.empty()) RETURN_IF_ERROR(FlagSet::checkChoice(value, words(spec.choices)));
  if (spec.value == "DURATION" && !value.empty()) return parseDuration(value).status();
  return okStatus();
}

// Binds the flags `command` takes ("" for none) to inv.
void addFlags(FlagSet& fs, std::string_view command, Invocation& inv) {
  for (const FlagSpec& spec : kFlags) {
    if (!spec.global() && !spec.takenBy(command)) continue;
    const std::string name(spec.name);
    const std::string help(spec.help);
    if (auto* text = std::get_if<std::string G::*>(&spec.target)) {
      fs.addText(name, help, &(inv.global.*(*text)));
    } else if (auto* on = std::get_if<bool G::*>(&spec.target)) {
      fs.addSwitch(name, help, &(inv.global.*(*on)));
    } else if (auto* d = std::get_if<std::chrono::milliseconds G::*>(&spec.target)) {
      fs.addDuration(name, help, &(inv.global.*(*d)));
    } else if (name == "help") {
      fs.addSwitch(name, help, &inv.help);
    } else {
      fs.add(name, help, "",
             [&spec, &flags = inv.flags](const std::string& v) -> std::optional<std::string> {
               const std::string key(spec.name);
               if (spec.takes == Takes::kSwitch) {
                 const StatusOr<bool> on = FlagSet::parseSwitch(v);
                 if (!on.ok()) return on.status().message();
                 if (*on) flags[key] = "";
                 if (!*on) flags.erase(key);
               } else if (Status refused = checkValue(spec, v); !refused.ok()) {
                 return refused.message();
               } else {
                 flags[key] = v;
               }
               return std::nullopt;
             });
      if (spec.takes != Takes::kValue)
        fs.optionalValue(name, spec.takes == Takes::kSwitch ? "true" : "");
    }
    if (spec.shorthand != 0) fs.shorthand(name, spec.shorthand);
  }
  fs.setScope(std::string(command));
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
  if (c == "wait") return need(n == 2, "DRIVER POOL");
  if (c == "slices") return need(n == 1 || n == 2, "DRIVER [POOL]");
  // completion
  return need(n == 1, "bash or zsh");
}

}  // namespace

std::string Invocation::flag(const std::string& name, const std::string& fallback) const {
  auto it = flags.find(name);
  return it == flags.end() ? fallback : it->second;
}

std::vector<std::string> FlagSpec::commandNames() const { return words(commands); }

bool FlagSpec::takenBy(std::string_view command) const {
  const std::vector<std::string_view> takers = fields(commands);
  return std::find(takers.begin(), takers.end(), command) != takers.end();
}

std::span<const FlagSpec> flagTable() { return kFlags; }

std::string envVariable(const FlagSpec& spec) {
  if (!spec.global() || spec.takes != Takes::kValue || spec.name == "token") return "";
  std::string name = "RESOURCESLICECTL_";
  for (const char c : spec.name) {
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

StatusOr<Invocation> parseArgs(const std::vector<std::string>& args) {
  return parseArgs(args, [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

StatusOr<Invocation> parseArgs(const std::vector<std::string>& args, const EnvLookup& env) {
  Invocation inv;
  // Defaults from the environment go first, as flags of their own, so that
  // they are checked like flags and the command line overrides them.
  std::vector<std::string> rest;
  for (const FlagSpec& spec : kFlags) {
    const std::string variable = envVariable(spec);
    if (variable.empty()) continue;
    if (const std::optional<std::string> value = env(variable); value && !value->empty()) {
      rest.push_back("--" + std::string(spec.name) + "=" + *value);
    }
  }
  // The command is the first argument past the global flags; its own flags
  // are known once it is. "help COMMAND" is COMMAND --help.
  rest.insert(rest.end(), args.begin(), args.end());
  FlagSet globals;
  addFlags(globals, "", inv);
  std::optional<size_t> at = globals.firstArgument(rest);
  if (at && rest[*at] == "help") {
    inv.help = true;
    rest.erase(rest.begin() + static_cast<ptrdiff_t>(*at));
    at = globals.firstArgument(rest);
  }
  if (at) inv.command = rest[*at];
  if (!inv.command.empty() &&
      std::find(kCommands.begin(), kCommands.end(), inv.command) == kCommands.end()) {
    std::string known;
    for (const std::string_view c : kCommands) known.append(known.empty() ? "" : ", ").append(c);
    return invalidArgument("unknown command " + inQuotes(inv.command) + " (commands: " + known +
                           ")");
  }
  FlagSet fs;
  addFlags(fs, inv.command, inv);
  ASSIGN_OR_RETURN(inv.args, fs.parseInterspersed(rest));
  if (!inv.args.empty()) inv.args.erase(inv.args.begin());  // the command
  if (inv.help || inv.command.empty()) {
    inv.help = true;
    return inv;
  }
  RETURN_IF_ERROR(checkArgs(inv));
  return inv;
}

}  // namespace rsc::ctl
