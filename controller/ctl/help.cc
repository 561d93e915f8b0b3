// The help texts and completion scripts of resourceslicectl (args.h).
#include <algorithm>
#include <map>
#include <string>

#include "common/flag_set.h"
#include "common/strings.h"
#include "controller/ctl/args.h"

namespace rsc::ctl {
namespace {

const std::map<std::string, std::string>& usages() {
  static const auto* texts = new std::map<std::string, std::string>{
      {"", R"(resourceslicectl: operate the resourceslice-controller's inventory API.

Usage: resourceslicectl [global flags] COMMAND [args] [flags]

Commands:
  push FILE|DIR       set pools (*.pool.json) or whole drivers (*.driver.json)
  get pools [DRIVER]  list pool statuses; get pool DRIVER POOL shows one
  diff FILE|DIR       show the slice writes a push would make (exit 1: changes)
  withdraw DRIVER POOL | DRIVER --all
                      delete a pool's slices, or every pool of a driver
  wait DRIVER POOL    wait until the pool is published
  slices DRIVER [POOL] the live ResourceSlices and whether each pool is complete
  completion bash|zsh print a shell completion script

Examples:
  resourceslicectl --server https://rsc.example:8443 --token-file /run/token get pools
  resourceslicectl push controller/inventory/examples --wait
  resourceslicectl diff gpu.example.com-node-a.pool.json
  resourceslicectl withdraw gpu.example.com node-a

Run "resourceslicectl COMMAND --help" for a command's flags and examples.
)"},
      {"push", R"(Usage: resourceslicectl push FILE|DIR [--wait[=DURATION]] [--driver DRIVER]

Sends each file as it is to the inventory API: FILE.pool.json is one pool
(PUT /v1/drivers/DRIVER/pools/POOL), FILE.driver.json a whole driver
(PUT /v1/drivers/DRIVER, pools left out are withdrawn). The names come from
the file name: DRIVER-POOL.pool.json (DRIVER is a DNS name, POOL what follows
its first "-" after the last ".") or DRIVER.driver.json; --driver DRIVER makes
POOL the rest of the name. A DIR pushes its *.pool.json and *.driver.json in
name order. Prints one line per request; stops at the first failure.

Examples:
  resourceslicectl push gpu.example.com-node-a.pool.json --wait=10s
  resourceslicectl push nic.example.com.driver.json
  resourceslicectl push --driver gpu.example.com node-a.pool.json
  resourceslicectl push controller/inventory/examples --wait
)"},
      {"get", R"(Usage: resourceslicectl get pools [DRIVER] [-o wide|json|yaml]
       resourceslicectl get pool DRIVER POOL [-o wide|json|yaml]

Shows pool statuses as a table: DRIVER POOL PHASE GENERATION SLICES
LAST-PUSH (-o wide adds the versions, lease, leader and the last error);
-o json and -o yaml print the API's answer.

Examples:
  resourceslicectl get pools
  resourceslicectl get pools gpu.example.com -o wide
  resourceslicectl get pool gpu.example.com node-a -o yaml
)"},
      {"diff", R"(Usage: resourceslicectl diff FILE|DIR [--driver DRIVER]

Sends the requests push would send with ?dryRun=All: the controller plans
them as a push and writes nothing. Prints, per pool, the slice writes it would
make (create, update with the changed field paths, delete) and whether the
pool generation would be bumped. Exit status as kubectl diff: 0 no changes,
1 changes, 2 or more an error.

Examples:
  resourceslicectl diff gpu.example.com-node-a.pool.json
  resourceslicectl diff controller/inventory/examples && echo up to date
)"},
      {"withdraw", R"(Usage: resourceslicectl withdraw DRIVER POOL [--wait[=DURATION]]
       resourceslicectl withdraw DRIVER --all [--wait[=DURATION]]

Deletes the pool's ResourceSlices (DELETE /v1/drivers/DRIVER/pools/POOL).
Without POOL it withdraws every pool of the driver (PUT /v1/drivers/DRIVER
with no pools), and only with --all, so that a forgotten argument cannot
withdraw a whole driver.

Examples:
  resourceslicectl withdraw gpu.example.com node-a --wait
  resourceslicectl withdraw nic.example.com --all
)"},
      {"wait", R"(Usage: resourceslicectl wait DRIVER POOL [--for=published] [--timeout=60s]

Polls the pool's status (once a second) until it is Published at its newest
push; fails at once when it is Failed (with the API server's message) or
unknown, and after --timeout.

Examples:
  resourceslicectl wait gpu.example.com node-a --for=published --timeout=60s
)"},
      {"slices", R"(Usage: resourceslicectl slices DRIVER [POOL] [-o wide|json|yaml]

Reads the live ResourceSlices of the driver (or one pool) from the API server
through the kubeconfig: NAME POOL GENERATION COUNT DEVICES NODE, then one
line per pool saying whether it is complete (all slices at one generation,
as many as resourceSliceCount says).

Examples:
  resourceslicectl slices gpu.example.com
  resourceslicectl --context prod slices gpu.example.com node-a -o yaml
)"},
      {"completion", R"(Usage: resourceslicectl completion bash|zsh

Prints a completion script.

Examples:
  source <(resourceslicectl completion bash)
  resourceslicectl completion zsh > "${fpath[1]}/_resourceslicectl"
)"},
  };
  return *texts;
}

// Before the flags, which bashFlags() lists.
constexpr char kBashHead[] = R"(# bash completion for resourceslicectl
_resourceslicectl() {
  local cur prev cmd i flags
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  cmd=""
)";

// After the flags and the cases that complete their values.
constexpr char kBashTail[] = R"(  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    return
  fi
  case "$cmd" in
    "") COMPREPLY=($(compgen -W "push get diff withdraw wait slices completion" -- "$cur")) ;;
    push|diff) COMPREPLY=($(compgen -f -- "$cur")) ;;
    get) COMPREPLY=($(compgen -W "pools pool" -- "$cur")) ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
  esac
}
complete -o default -F _resourceslicectl resourceslicectl
)";

// Before the flags' specs of _arguments.
constexpr char kZshHead[] = R"(#compdef resourceslicectl
# zsh completion for resourceslicectl
_resourceslicectl() {
  local -a commands
  commands=(
    'push:set pools or drivers from files'
    'get:show pool statuses'
    'diff:show the slice writes a push would make'
    'withdraw:delete a pool or every pool of a driver'
    'wait:wait until a pool is published'
    'slices:the live ResourceSlices of a driver'
    'completion:print a completion script'
  )
  _arguments -C \
)";

// After the flags' specs, which zshFlags() makes.
constexpr char kZshTail[] = R"(    '1:command:->command' \
    '*::arg:->args'
  case $state in
    command) _describe 'command' commands ;;
    args)
      case $words[1] in
        push|diff) _files ;;
        get) _values 'what' pools pool ;;
        completion) _values 'shell' bash zsh ;;
      esac ;;
  esac
}
_resourceslicectl "$@"
)";

// Where a flag's help starts, and how wide the help is.
constexpr size_t kHelpColumn = 35;
constexpr size_t kHelpWidth = 100;

// What a global flag's variable holds before parsing, for the help; "" for
// none or a command flag.
std::string defaultOf(const FlagSpec& f) {
  const GlobalFlags defaults;
  if (auto* text = std::get_if<std::string GlobalFlags::*>(&f.target)) return defaults.**text;
  if (auto* d = std::get_if<std::chrono::milliseconds GlobalFlags::*>(&f.target)) {
    return formatFlagDuration(defaults.**d);
  }
  return "";
}

// "  -s, --server URL", padded to the help column, then the help, wrapped
// under it.
std::string helpLines(const FlagSpec& f) {
  std::string line =
      f.shorthand != 0 ? std::string{' ', ' ', '-', f.shorthand, ',', ' '} : std::string(6, ' ');
  line.append("--").append(f.name);
  if (f.takes == Takes::kValue) line.append(" ").append(f.value);
  if (f.takes == Takes::kOptionalValue) line.append("[=").append(f.value).append("]");
  std::string help(f.help);
  if (const std::string d = defaultOf(f); !d.empty()) help += " (default: " + d + ")";
  line.resize(std::max(line.size() + 1, kHelpColumn), ' ');
  std::string out;
  bool line_has_help = false;
  for (const std::string_view word : fields(help)) {
    if (line_has_help && line.size() + 1 + word.size() > kHelpWidth) {
      out.append(line).append("\n");
      line = std::string(kHelpColumn, ' ');
      line_has_help = false;
    }
    if (line_has_help) line += ' ';
    line += word;
    line_has_help = true;
  }
  return out.append(line).append("\n");
}

// The help lines of the flags `command` takes ("" for the global ones).
std::string flagsHelp(std::string_view command) {
  std::string out;
  for (const FlagSpec& f : flagTable()) {
    if (command.empty() ? f.global() : f.takenBy(command)) out += helpLines(f);
  }
  return out;
}

// Each flag once, in the table's order (a flag of several commands has
// several rows).
std::vector<const FlagSpec*> distinctFlags() {
  std::vector<const FlagSpec*> out;
  for (const FlagSpec& f : flagTable()) {
    if (std::none_of(out.begin(), out.end(), [&f](const FlagSpec* o) { return o->name == f.name; }))
      out.push_back(&f);
  }
  return out;
}

// "-o|--output" for a case pattern of bash.
std::string bashPattern(const FlagSpec& f) {
  std::string out = f.shorthand != 0 ? std::string{'-', f.shorthand, '|'} : "";
  return out.append("--").append(f.name);
}

// The flags the command line's command takes, and the cases of
// `case "$prev"` that complete a flag's value.
std::string bashFlags() {
  std::string globals;
  std::string valued;
  std::vector<std::pair<std::string, std::string>> by_command;
  std::string files;
  std::string cases;
  for (const FlagSpec& f : flagTable()) {
    const std::string name = "--" + std::string(f.name);
    if (f.global()) globals += (globals.empty() ? "" : " ") + name;
    if (f.global() && f.takes == Takes::kValue) {
      valued.append(valued.empty() ? "" : "|").append(bashPattern(f));
    }
    for (const std::string& command : f.commandNames()) {
      auto it = std::find_if(by_command.begin(), by_command.end(),
                             [&command](const auto& c) { return c.first == command; });
      if (it == by_command.end()) it = by_command.insert(it, {command, ""});
      it->second += " " + name;
    }
  }
  for (const FlagSpec* f : distinctFlags()) {
    if (f->value == "FILE") files.append(files.empty() ? "" : "|").append(bashPattern(*f));
    if (!f->choices.empty()) {
      cases.append("    ").append(bashPattern(*f)).append(") COMPREPLY=($(compgen -W \"");
      cases.append(f->choices).append("\" -- \"$cur\")); return ;;\n");
    }
  }
  // The command is the first word that is neither a flag nor a global flag's value.
  std::string out = "  for ((i = 1; i < COMP_CWORD; i++)); do\n    case \"${COMP_WORDS[i]}\" in\n";
  out += "      " + valued + ") ((i++)) ;;\n";
  out += "      -*) ;;\n      *) cmd=\"${COMP_WORDS[i]}\"; break ;;\n    esac\n  done\n";
  out += "  flags=\"" + globals + "\"\n  case \"$cmd\" in\n";
  for (const auto& [command, flags] : by_command) {
    out.append("    ").append(command).append(") flags+=\"").append(flags).append("\" ;;\n");
  }
  out += "  esac\n  case \"$prev\" in\n" + cases;
  if (!files.empty())
    out += "    " + files + ") COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n";
  return out;
}

// A help text as a description of zsh's _arguments, inside single quotes.
std::string zshDescription(std::string_view help) {
  std::string out;
  for (const char c : help) {
    if (c == '\'') {
      out += R"('\'')";
    } else {
      if (c == '[' || c == ']') out += '\\';
      out += c;
    }
  }
  return out;
}

// One spec of _arguments a flag: '(-o --output)'{-o,--output}'[help]:FORMAT:(wide json yaml)'.
std::string zshFlags() {
  std::string out;
  for (const FlagSpec* f : distinctFlags()) {
    const std::string name = "--" + std::string(f->name);
    out += "    ";
    if (f->shorthand != 0) {
      const std::string letter{'-', f->shorthand};
      out.append("'(").append(letter).append(" ").append(name).append(")'{");
      out.append(letter).append(",").append(name).append("}'");
    } else {
      out += "'" + name;
    }
    out += "[" + zshDescription(f->help) + "]";
    if (f->takes == Takes::kValue) {
      out.append(":").append(f->value).append(":");
      if (f->value == "FILE") out += "_files";
      if (!f->choices.empty()) out.append("(").append(f->choices).append(")");
    }
    out += "' \\\n";
  }
  return out;
}

}  // namespace

std::string usage(const std::string& command) {
  auto it = usages().find(command);
  if (it == usages().end()) it = usages().find("");
  std::string text = it->second;
  // A command's own flags; flagsHelp("") is the global ones.
  if (const std::string own = it->first.empty() ? "" : flagsHelp(it->first); !own.empty()) {
    text += "\nFlags:\n" + own;
  }
  return text + "\nGlobal flags (before or after the command):\n" + flagsHelp("") +
         "\nEach global flag with a value but --token takes its default from the environment:\n"
         "RESOURCESLICECTL_ and its name in capitals, e.g. RESOURCESLICECTL_TOKEN_FILE (the\n"
         "chart sets them in the controller's pods, so that kubectl exec ... resourceslicectl\n"
         "get pools works there). The command line wins.\n";
}

StatusOr<std::string> completionScript(const std::string& shell) {
  if (shell == "bash") return kBashHead + bashFlags() + kBashTail;
  if (shell == "zsh") return kZshHead + zshFlags() + kZshTail;
  return invalidArgument("completion: want bash or zsh, got \"" + shell + "\"");
}

}  // namespace rsc::ctl
