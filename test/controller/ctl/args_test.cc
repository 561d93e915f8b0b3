#include "controller/ctl/args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>

namespace rsc::ctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Whether `command` takes the flag: a flag of several commands has a row for
// each help text.
bool takes(std::string_view command, std::string_view flag) {
  const auto table = flagTable();
  return std::any_of(table.begin(), table.end(), [&](const FlagSpec& f) {
    return f.name == flag && (f.global() || f.takenBy(command));
  });
}

TEST(ParseArgs, GlobalFlagsBeforeAndAfterTheCommand) {
  auto inv = parseArgs({"--server", "https://rsc:8443", "--token=t", "get", "pools",
                        "gpu.example.com", "--insecure-skip-tls-verify", "-o", "wide",
                        "--request-timeout=5s", "--context", "prod"});
  ASSERT_TRUE(inv.ok()) << inv.status().message();
  EXPECT_EQ(inv->command, "get");
  EXPECT_EQ(inv->args, (std::vector<std::string>{"pools", "gpu.example.com"}));
  EXPECT_EQ(inv->global.server, "https://rsc:8443");
  EXPECT_EQ(inv->global.token, "t");
  EXPECT_EQ(inv->global.context, "prod");
  EXPECT_TRUE(inv->global.insecure_skip_tls_verify);
  EXPECT_EQ(inv->global.request_timeout, std::chrono::seconds(5));
  EXPECT_EQ(inv->flag("output"), "wide");
  EXPECT_FALSE(inv->help);
}

TEST(ParseArgs, GlobalFlagDefaultsFromTheEnvironmentTheCommandLineWins) {
  const std::map<std::string, std::string> vars = {
      {"RESOURCESLICECTL_TOKEN_FILE", "/run/token"},
      {"RESOURCESLICECTL_LEASE_NAME", "rsc"},
      {"RESOURCESLICECTL_CA_CONFIGMAP", "rsc-ca"},
      {"RESOURCESLICECTL_REQUEST_TIMEOUT", "7s"},
      // Never from the environment: a secret, and a switch.
      {"RESOURCESLICECTL_TOKEN", "secret"},
      {"RESOURCESLICECTL_INSECURE_SKIP_TLS_VERIFY", "true"},
  };
  const EnvLookup env = [&vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  auto inv = parseArgs({"get", "pools", "--lease-name", "other"}, env);
  ASSERT_TRUE(inv.ok()) << inv.status().message();
  EXPECT_EQ(inv->command, "get");
  EXPECT_EQ(inv->args, (std::vector<std::string>{"pools"}));
  EXPECT_EQ(inv->global.token_file, "/run/token");
  EXPECT_EQ(inv->global.lease_name, "other");
  EXPECT_EQ(inv->global.ca_configmap, "rsc-ca");
  EXPECT_EQ(inv->global.request_timeout, std::chrono::seconds(7));
  EXPECT_EQ(inv->global.token, "");
  EXPECT_FALSE(inv->global.insecure_skip_tls_verify);

  // A bad value is refused like the flag's.
  const EnvLookup bad = [](const std::string& name) -> std::optional<std::string> {
    if (name == "RESOURCESLICECTL_REQUEST_TIMEOUT") return "soon";
    return std::nullopt;
  };
  auto refused = parseArgs({"get", "pools"}, bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("request-timeout"));
}

TEST(ParseArgs, ShortFlagWithAttachedValueAndOptionalValueFlag) {
  auto inv = parseArgs({"get", "pool", "d.example.com", "p", "-ojson"});
  ASSERT_TRUE(inv.ok()) << inv.status().message();
  EXPECT_EQ(inv->flag("output"), "json");

  inv = parseArgs({"push", "--wait", "dir"});
  ASSERT_TRUE(inv.ok()) << inv.status().message();
  EXPECT_TRUE(inv->has("wait"));
  EXPECT_EQ(inv->flag("wait"), "");
  EXPECT_EQ(inv->args, std::vector<std::string>{"dir"});

  inv = parseArgs({"push", "--wait=10s", "--driver", "gpu.example.com", "node-a.pool.json"});
  ASSERT_TRUE(inv.ok()) << inv.status().message();
  EXPECT_EQ(inv->flag("wait"), "10s");
  EXPECT_EQ(inv->flag("driver"), "gpu.example.com");
}

TEST(ParseArgs, HelpAnywhereAndTheHelpCommand) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"diff", "--help"}, {"-h", "diff"}, {"help", "diff"}, {"diff", "-h", "x", "y"}}) {
    auto inv = parseArgs(args);
    ASSERT_TRUE(inv.ok()) << inv.status().message();
    EXPECT_TRUE(inv->help);
    EXPECT_EQ(inv->command, "diff");
  }
  auto inv = parseArgs({});
  ASSERT_TRUE(inv.ok());
  EXPECT_TRUE(inv->help);
  EXPECT_EQ(inv->command, "");
}

TEST(ParseArgs, EveryMistakeIsOneLineNamingWhatIsWrong) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"frob"}, "unknown command \"frob\""},
      {{"push", "--frob", "x"}, "unknown flag --frob for push"},
      {{"-x", "get", "pools"}, "unknown flag -x for get"},
      {{"get", "pools", "--all"}, "unknown flag --all for get"},
      {{"push"}, "push needs one FILE or DIR"},
      {{"push", "a", "b"}, "push needs one FILE or DIR"},
      {{"get"}, "get needs pools [DRIVER] or pool DRIVER POOL"},
      {{"get", "pool", "d"}, "get needs DRIVER POOL after pool"},
      {{"get", "pools", "-o", "xml"}, "flag --output: must be wide, json or yaml, not \"xml\""},
      {{"withdraw", "d.example.com"}, "say so with --all"},
      {{"withdraw", "d.example.com", "p", "--all"}, "--all goes without POOL"},
      {{"wait", "d", "p", "--for=deleted"}, "flag --for: must be published, not \"deleted\""},
      {{"wait", "d", "p", "--timeout=soon"}, "flag --timeout"},
      {{"push", "x", "--wait=1 hour"}, "flag --wait"},
      {{"--server"}, "flag --server needs a value"},
      {{"--request-timeout=x", "get", "pools"}, "flag --request-timeout"},
      {{"--insecure-skip-tls-verify=maybe", "get", "pools"},
       "flag --insecure-skip-tls-verify: must be true or false"},
      {{"withdraw", "d", "--all=maybe"}, "flag --all: must be true or false"},
      {{"--server=", "get", "pools"}, "flag --server: must not be empty"},
      {{"slices"}, "slices needs DRIVER [POOL]"},
      {{"completion"}, "completion needs bash or zsh"},
  };
  for (const auto& [args, want] : cases) {
    auto inv = parseArgs(args);
    ASSERT_FALSE(inv.ok()) << ::testing::PrintToString(args);
    EXPECT_THAT(inv.status().message(), HasSubstr(want)) << ::testing::PrintToString(args);
    EXPECT_EQ(inv.status().message().find('\n'), std::string::npos);
  }
}

TEST(ParseArgs, WithdrawOfAWholeDriverNeedsAll) {
  auto inv = parseArgs({"withdraw", "nic.example.com", "--all"});
  ASSERT_TRUE(inv.ok()) << inv.status().message();
  EXPECT_TRUE(inv->has("all"));
  EXPECT_EQ(inv->args, std::vector<std::string>{"nic.example.com"});

  inv = parseArgs({"withdraw", "nic.example.com", "p", "--all=false"});
  ASSERT_TRUE(inv.ok()) << inv.status().message();
  EXPECT_FALSE(inv->has("all"));
}

TEST(ParseArgs, ValuesOfGlobalFlagsAreNotTakenForTheCommand) {
  auto inv = parseArgs({"--context", "help", "-s", "https://rsc", "--", "get", "pools"});
  ASSERT_TRUE(inv.ok()) << inv.status().message();
  EXPECT_EQ(inv->command, "get");
  EXPECT_EQ(inv->global.context, "help");
  EXPECT_EQ(inv->args, std::vector<std::string>{"pools"});
  EXPECT_FALSE(inv->help);
}

TEST(ParseArgs, EveryFlagOfTheTableIsTakenByItsCommandsOnly) {
  for (const FlagSpec& f : flagTable()) {
    if (f.name == "help") continue;
    const std::string flag =
        "--" + std::string(f.name) + (f.takes == Takes::kValue ? "=" + std::string(f.value) : "");
    for (const char* command : {"push", "get", "diff", "withdraw", "wait", "slices"}) {
      auto inv = parseArgs({command, flag});
      const bool known =
          inv.ok() || inv.status().message().find("unknown flag") == std::string::npos;
      EXPECT_EQ(known, takes(command, f.name)) << command << " " << flag;
    }
  }
}

TEST(Usage, EveryCommandHasExamplesItsFlagsAndTheGlobalFlags) {
  for (const char* command :
       {"", "push", "get", "diff", "withdraw", "wait", "slices", "completion"}) {
    const std::string text = usage(command);
    EXPECT_THAT(text, HasSubstr("Examples:")) << command;
    EXPECT_THAT(text, HasSubstr("resourceslicectl " + std::string(command))) << command;
    const size_t globals = text.find("\nGlobal flags (before or after the command):\n");
    ASSERT_NE(globals, std::string::npos) << command;
    const size_t own = text.find("\nFlags:\n");
    const std::string own_flags = own == std::string::npos ? "" : text.substr(own, globals - own);
    for (const FlagSpec& f : flagTable()) {
      const std::string name = "--" + std::string(f.name);
      if (f.global()) {
        EXPECT_NE(text.find(name, globals), std::string::npos) << command << " " << name;
      } else {
        EXPECT_EQ(own_flags.find(name) != std::string::npos, takes(command, f.name))
            << command << " " << name;
      }
    }
  }
  EXPECT_THAT(usage(""), HasSubstr("--lease-name NAME            name of the leader Lease "
                                   "(default: resourceslice-controller)\n"));
  EXPECT_THAT(usage(""), HasSubstr("(default: 90s)\n"));
  EXPECT_THAT(usage("push"), HasSubstr("\nFlags:\n      --wait[=DURATION]  "));
  EXPECT_THAT(usage("get"), HasSubstr("\nFlags:\n  -o, --output FORMAT  "));
}

TEST(Completion, BashAndZshOnly) {
  auto bash = completionScript("bash");
  ASSERT_TRUE(bash.ok());
  EXPECT_THAT(*bash, HasSubstr("complete -o default -F _resourceslicectl resourceslicectl"));
  auto zsh = completionScript("zsh");
  ASSERT_TRUE(zsh.ok());
  EXPECT_THAT(*zsh, HasSubstr("#compdef resourceslicectl"));
  EXPECT_FALSE(completionScript("fish").ok());
}

// What the bash script completes for a command line whose last word is
// being typed, run in a real bash.
std::string bashCompletes(const std::string& script, const std::vector<std::string>& words) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("rsc-completion-" + std::to_string(getpid()));
  std::ofstream run(file);
  run << script << "COMP_WORDS=(";
  for (const std::string& w : words) run << "'" << w << "' ";
  run << ")\nCOMP_CWORD=" << words.size() - 1 << "\n_resourceslicectl\necho \"${COMPREPLY[*]}\"\n";
  run.close();
  std::string out;
  if (FILE* bash = popen(("bash " + file.string()).c_str(), "r")) {
    char buf[4096];
    while (const size_t n = fread(buf, 1, sizeof buf, bash)) out.append(buf, n);
    pclose(bash);
  }
  std::filesystem::remove(file);
  return out;
}

TEST(Completion, BashCompletesTheFlagsOfTheCommandAndTheirValues) {
  auto bash = completionScript("bash");
  ASSERT_TRUE(bash.ok());
  const std::string withdraw =
      bashCompletes(*bash, {"resourceslicectl", "--server", "https://rsc", "withdraw", "--"});
  EXPECT_THAT(withdraw, HasSubstr("--all"));
  EXPECT_THAT(withdraw, HasSubstr("--wait"));
  EXPECT_THAT(withdraw, HasSubstr("--request-timeout"));
  EXPECT_THAT(withdraw, Not(HasSubstr("--output")));
  EXPECT_EQ(bashCompletes(*bash, {"resourceslicectl", "get", "pools", "-o", ""}),
            "wide json yaml\n");
  EXPECT_EQ(bashCompletes(*bash, {"resourceslicectl", "wait", "--for", "p"}), "published\n");
  EXPECT_EQ(bashCompletes(*bash, {"resourceslicectl", "--context", "help", "w"}), "withdraw wait\n")
      << "a global flag's value is not the command";
}

}  // namespace
}  // namespace rsc::ctl
