#include "common/flag_set.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace rsc {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Variables of every kind, bound to a set as a component's Options would be.
struct Bound {
  std::string name = "resourceslice-controller";
  std::string note;
  bool on = false;
  bool events = true;
  size_t size = 1024;
  int workers = 4;
  double qps = 20;
  milliseconds timeout{10'000};
  Clock::Duration interval = seconds(30);
  std::vector<std::string> names;
  std::string mode = "fast";
  FlagSet fs;

  Bound() {
    fs.addText("name", "A name.", &name);
    fs.addString("note", "A note.", &note);
    fs.addSwitch("on", "A switch.", &on);
    fs.addSwitch("events", "Events.", &events);
    fs.addNumber("size", "A size.", &size, size_t{1024});
    fs.addNumber("workers", "Workers.", &workers, 1);
    fs.addRate("qps", "A rate.", &qps);
    fs.addDuration("timeout", "A timeout.", &timeout, seconds(1));
    fs.addDuration("interval", "An interval.", &interval);
    fs.addList("names", "Names.", &names);
    fs.addChoice("mode", "A mode.", &mode, {"fast", "safe", "off"});
  }

  // The error of parsing args, or "" when they are accepted.
  std::string error(const std::vector<std::string>& args) {
    Status s = fs.parse(args);
    return s.ok() ? "" : s.message();
  }
};

TEST(FlagSet, SetsTheVariablesItIsBoundTo) {
  Bound b;
  ASSERT_EQ(
      b.error({"--name=dra", "--note", "", "-on", "--events=false", "--size", "4096", "--workers=2",
               "--qps=0.5", "--timeout=1m30s", "--interval=1.5s", "--names=a,b", "--mode=safe"}),
      "");
  EXPECT_EQ(b.name, "dra");
  EXPECT_EQ(b.note, "");
  EXPECT_TRUE(b.on);
  EXPECT_FALSE(b.events);
  EXPECT_EQ(b.size, 4096u);
  EXPECT_EQ(b.workers, 2);
  EXPECT_EQ(b.qps, 0.5);
  EXPECT_EQ(b.timeout, seconds(90));
  EXPECT_EQ(b.interval, milliseconds(1500));
  EXPECT_EQ(b.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(b.mode, "safe");
}

TEST(FlagSet, LeavesWhatIsNotGivenAtItsDefault) {
  Bound b;
  ASSERT_EQ(b.error({}), "");
  EXPECT_EQ(b.name, "resourceslice-controller");
  EXPECT_EQ(b.size, 1024u);
  EXPECT_EQ(b.interval, seconds(30));
}

TEST(FlagSet, RoundsADurationToItsVariablesUnit) {
  Bound b;
  ASSERT_EQ(b.error({"--timeout=1.0004s"}), "");
  EXPECT_EQ(b.timeout, milliseconds(1000));
  ASSERT_EQ(b.error({"--timeout=1.0006s"}), "");
  EXPECT_EQ(b.timeout, milliseconds(1001));
}

TEST(FlagSet, RefusalsNameTheFlagAndWhy) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--name="}, "flag --name: must not be empty"},
      {{"--on=maybe"}, "flag --on: must be true or false, not \"maybe\""},
      {{"--size=1023"}, "flag --size: must be at least 1024"},
      {{"--workers=two"}, "flag --workers: must be a number, not \"two\""},
      {{"--workers=-1"}, "flag --workers: must be at least 1"},
      {{"--qps=0"}, "flag --qps: must be a positive number, not \"0\""},
      {{"--timeout=500ms"}, "flag --timeout: must be at least 1s"},
      {{"--interval=5"}, "flag --interval: "},
      {{"--names=a,,b"}, "flag --names: must be a comma-separated list without empty items"},
      {{"--mode=slow"}, "flag --mode: must be fast, safe or off, not \"slow\""},
      {{"--size"}, "flag --size needs a value"},
      {{"--nope"}, "unknown flag --nope (see --help)"},
      {{"name"}, "unexpected argument \"name\" (flags start with --)"},
  };
  for (const auto& [args, want] : cases) {
    Bound b;
    const std::string got = b.error(args);
    EXPECT_TRUE(got.starts_with(want)) << args[0] << ": " << got;
    EXPECT_EQ(b.name, "resourceslice-controller") << args[0];
    EXPECT_EQ(b.size, 1024u) << args[0];
  }
}

// A command line in kubectl's way: flags before and after the arguments,
// shorthands, a flag whose value is optional.
struct Command {
  std::string output;
  std::string wait = "none";
  bool all = false;
  std::string server;
  FlagSet fs;

  Command() {
    fs.addString("output", "Output format.", &output);
    fs.shorthand("output", 'o');
    fs.addString("wait", "How long to wait.", &wait);
    fs.optionalValue("wait", "60s");
    fs.addSwitch("all", "Every pool.", &all);
    fs.addText("server", "The server.", &server);
    fs.shorthand("server", 's');
    fs.setScope("get");
  }
};

TEST(FlagSet, TakesShorthandsAndOptionalValuesBetweenArguments) {
  Command c;
  auto args = c.fs.parseInterspersed(
      {"-s", "https://a", "get", "-ojson", "pools", "--wait", "d", "--all", "--", "--x", "-"});
  ASSERT_TRUE(args.ok()) << args.status().message();
  EXPECT_EQ(*args, (std::vector<std::string>{"get", "pools", "d", "--x", "-"}));
  EXPECT_EQ(c.server, "https://a");
  EXPECT_EQ(c.output, "json");
  EXPECT_EQ(c.wait, "60s") << "--wait alone takes its bare value, not the next argument";
  EXPECT_TRUE(c.all);

  Command d;
  args = d.fs.parseInterspersed({"-o=yaml", "--wait=5s", "-s=https://b", "x"});
  ASSERT_TRUE(args.ok()) << args.status().message();
  EXPECT_EQ(*args, std::vector<std::string>{"x"});
  EXPECT_EQ(d.output, "yaml");
  EXPECT_EQ(d.wait, "5s");
  EXPECT_EQ(d.server, "https://b");
}

TEST(FlagSet, RefusalsOfACommandLineNameTheFlagAndTheScope) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"get", "--frob"}, "unknown flag --frob for get (see --help)"},
      {{"-x", "get"}, "unknown flag -x for get (see --help)"},
      {{"get", "-o"}, "flag --output needs a value"},
      {{"-s="}, "flag --server: must not be empty"},
      {{"--all=maybe"}, "flag --all: must be true or false, not \"maybe\""},
  };
  for (const auto& [args, want] : cases) {
    Command c;
    auto got = c.fs.parseInterspersed(args);
    ASSERT_FALSE(got.ok()) << ::testing::PrintToString(args);
    EXPECT_EQ(got.status().message(), want);
  }
}

TEST(FlagSet, FindsTheFirstArgumentPastTheFlagsItKnows) {
  const Command c;
  using Args = std::vector<std::string>;
  EXPECT_EQ(c.fs.firstArgument(Args{"-s", "https://a", "--all", "get", "pools"}), 3u);
  EXPECT_EQ(c.fs.firstArgument(Args{"--wait", "push", "dir"}), 1u);
  EXPECT_EQ(c.fs.firstArgument(Args{"--server=https://a", "-ojson", "slices"}), 2u);
  EXPECT_EQ(c.fs.firstArgument(Args{"--frob", "get"}), 1u) << "unknown flags stand alone";
  EXPECT_EQ(c.fs.firstArgument(Args{"--", "-s"}), 1u);
  EXPECT_EQ(c.fs.firstArgument(Args{"-s", "https://a"}), std::nullopt);
  EXPECT_EQ(c.server, "") << "sets nothing";
}

TEST(FlagSet, UsageShowsEachFlagWithItsDefaultUnlessZero) {
  Bound b;
  const std::string usage = b.fs.usage();
  EXPECT_NE(usage.find("  --name value\n      A name. (default resourceslice-controller)\n"),
            std::string::npos)
      << usage;
  EXPECT_NE(usage.find("  --on\n      A switch.\n"), std::string::npos) << usage;
  EXPECT_NE(usage.find("  --events\n      Events. (default true)\n"), std::string::npos);
  EXPECT_NE(usage.find("A size. (default 1024)"), std::string::npos);
  EXPECT_NE(usage.find("A rate. (default 20)"), std::string::npos);
  EXPECT_NE(usage.find("A timeout. (default 10s)"), std::string::npos);
  EXPECT_NE(usage.find("An interval. (default 30s)"), std::string::npos);
  EXPECT_NE(usage.find("  --note value\n      A note.\n"), std::string::npos);
  EXPECT_NE(usage.find("  --names value\n      Names.\n"), std::string::npos);
  EXPECT_LT(usage.find("--name "), usage.find("--mode ")) << "in the order they were added";

  const std::string command = Command().fs.usage();
  EXPECT_NE(command.find("  -o, --output value\n"), std::string::npos) << command;
  EXPECT_NE(command.find("  --wait[=value]\n      How long to wait. (default none)\n"),
            std::string::npos)
      << command;
}

TEST(FlagSet, FormatsDurationsInTheirLargestWholeUnit) {
  EXPECT_EQ(formatFlagDuration(std::chrono::hours(24 * 365)), "8760h");
  EXPECT_EQ(formatFlagDuration(std::chrono::minutes(2)), "2m");
  EXPECT_EQ(formatFlagDuration(seconds(90)), "90s");
  EXPECT_EQ(formatFlagDuration(milliseconds(100)), "100ms");
  EXPECT_EQ(formatFlagDuration(Clock::Duration::zero()), "0s");
}

}  // namespace
}  // namespace rsc
