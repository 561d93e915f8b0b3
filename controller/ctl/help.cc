// The help texts and completion scripts of resourceslicectl (args.h).
#include <map>
#include <string>

#include "controller/ctl/args.h"

namespace rsc::ctl {
namespace {

constexpr char kGlobalFlags[] = R"(
Global flags (before or after the command):
  -s, --server URL                 the controller's inventory API; default: the URL the leader
                                   Lease announces (annotation resourceslice.dra.k8s.io/inventory-url),
                                   read through the kubeconfig
      --token TOKEN                bearer token; default: the kubeconfig user's credentials
      --token-file FILE            file holding the bearer token
      --certificate-authority FILE PEM CA of the inventory API's certificate
      --insecure-skip-tls-verify   do not check the certificate (testing only)
      --kubeconfig FILE            kubeconfig (default: $KUBECONFIG, ~/.kube/config)
      --context NAME               kubeconfig context
      --lease-namespace NS         namespace of the leader Lease (default: the context's)
      --lease-name NAME            name of the leader Lease (default: resourceslice-controller)
      --ca-configmap NAME          without --server and --certificate-authority, an https URL of
                                   the Lease is checked against this ConfigMap's ca.crt in the
                                   Lease's namespace, when it exists (default:
                                   resourceslice-controller-ca, the chart's)
      --request-timeout DURATION   longest wait for a byte of an answer (default: 90s)
)";

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

Flags:
      --wait[=DURATION]  hold each answer until the pool is published (default 60s)
      --driver DRIVER    the driver of pool files

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

constexpr char kBash[] = R"(# bash completion for resourceslicectl
_resourceslicectl() {
  local cur prev cmd i
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      -*) ;;
      *) cmd="${COMP_WORDS[i]}"; break ;;
    esac
  done
  case "$prev" in
    --kubeconfig|--token-file|--certificate-authority)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -o|--output) COMPREPLY=($(compgen -W "wide json yaml" -- "$cur")); return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "--server --token --token-file --certificate-authority --insecure-skip-tls-verify --kubeconfig --context --lease-namespace --lease-name --ca-configmap --request-timeout --help --wait --driver --output --all --for --timeout" -- "$cur"))
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

constexpr char kZsh[] = R"(#compdef resourceslicectl
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
    '(-s --server)'{-s,--server}'[inventory API URL]:url:' \
    '--token[bearer token]:token:' \
    '--token-file[file holding the token]:file:_files' \
    '--certificate-authority[CA file]:file:_files' \
    '--insecure-skip-tls-verify[do not check the certificate]' \
    '--kubeconfig[kubeconfig file]:file:_files' \
    '--context[kubeconfig context]:context:' \
    '--lease-namespace[namespace of the leader Lease]:namespace:' \
    '--lease-name[name of the leader Lease]:name:' \
    '--ca-configmap[ConfigMap with the CA]:name:' \
    '--request-timeout[idle timeout]:duration:' \
    '(-o --output)'{-o,--output}'[output format]:format:(wide json yaml)' \
    '--wait[wait until published]' \
    '--driver[driver of pool files]:driver:' \
    '--all[every pool of the driver]' \
    '--for[condition]:condition:(published)' \
    '--timeout[how long to wait]:duration:' \
    '1:command:->command' \
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

}  // namespace

std::string usage(const std::string& command) {
  auto it = usages().find(command);
  const std::string& text = it == usages().end() ? usages().at("") : it->second;
  return text + kGlobalFlags;
}

StatusOr<std::string> completionScript(const std::string& shell) {
  if (shell == "bash") return std::string(kBash);
  if (shell == "zsh") return std::string(kZsh);
  return invalidArgument("completion: want bash or zsh, got \"" + shell + "\"");
}

}  // namespace rsc::ctl
