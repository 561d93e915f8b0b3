#include "controller/ctl/args.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rsc::ctl {
namespace {

using ::testing::HasSubstr;

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
      {{"get", "pools", "--all"}, "unknown flag --all for get"},
      {{"push"}, "push needs one FILE or DIR"},
      {{"push", "a", "b"}, "push needs one FILE or DIR"},
      {{"get"}, "get needs pools [DRIVER] or pool DRIVER POOL"},
      {{"get", "pool", "d"}, "get needs DRIVER POOL after pool"},
      {{"get", "pools", "-o", "xml"}, "flag -o: want wide, json or yaml"},
      {{"withdraw", "d.example.com"}, "say so with --all"},
      {{"withdraw", "d.example.com", "p", "--all"}, "--all goes without POOL"},
      {{"wait", "d", "p", "--for=deleted"}, "flag --for: only \"published\""},
      {{"wait", "d", "p", "--timeout=soon"}, "flag --timeout"},
      {{"push", "x", "--wait=1 hour"}, "flag --wait"},
      {{"--server"}, "flag --server needs a value"},
      {{"--request-timeout=x", "get", "pools"}, "flag --request-timeout"},
      {{"--insecure-skip-tls-verify=maybe", "get", "pools"}, "want true or false"},
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
}

TEST(Usage, EveryCommandHasExamplesAndTheGlobalFlags) {
  for (const char* command :
       {"", "push", "get", "diff", "withdraw", "wait", "slices", "completion"}) {
    const std::string text = usage(command);
    EXPECT_THAT(text, HasSubstr("Examples:")) << command;
    EXPECT_THAT(text, HasSubstr("resourceslicectl " + std::string(command))) << command;
    EXPECT_THAT(text, HasSubstr("--server")) << command;
  }
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

}  // namespace
}  // namespace rsc::ctl
