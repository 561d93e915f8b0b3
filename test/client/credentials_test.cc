#include "client/credentials.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/exec_credential.h"
#include "test/fakes/fake_clock.h"
#include "test/metrics/temp_dir.h"

namespace rsc::client {
namespace {

namespace fs = std::filesystem;
using metrics::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kV1[] = "client.authentication.k8s.io/v1";
constexpr std::string_view kCertPem =
    "-----BEGIN CERTIFICATE-----\nY2xpZW50IGNlcnQ=\n-----END CERTIFICATE-----\n";
constexpr std::string_view kKeyPem =
    "-----BEGIN EC PRIVATE KEY-----\na2V5\n-----END EC PRIVATE KEY-----\n";

std::string readAll(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes an executable shell script.
fs::path script(const TempDir& dir, const std::string& name, const std::string& body) {
  fs::path p = dir.write(name, "#!/bin/sh\n" + body);
  fs::permissions(p, fs::perms::owner_all);
  return p;
}

// A plugin that counts its runs in `count` and prints token-<run>, expiring
// at the time written in `expiry` (FakeClock's wall time starts at
// 2026-01-01T00:00:00Z).
fs::path countingPlugin(const TempDir& dir) {
  const std::string count = (dir.path() / "count").string();
  const std::string expiry = (dir.path() / "expiry").string();
  return script(dir, "plugin",
                "n=$(cat \"" + count +
                    "\" 2>/dev/null || echo 0)\n"
                    "n=$((n + 1))\n"
                    "echo $n > \"" +
                    count +
                    "\"\n"
                    "printf '{\"apiVersion\": \"client.authentication.k8s.io/v1\", \"kind\": "
                    "\"ExecCredential\", \"status\": {\"token\": \"token-%s\", "
                    "\"expirationTimestamp\": \"%s\"}}' \"$n\" \"$(cat \"" +
                    expiry + "\")\"\n");
}

ClientConfig execConfig(const fs::path& command, const std::string& api_version = kV1) {
  ClientConfig config;
  config.server = "https://api.example.com:6443";
  config.exec = ExecConfig{};
  config.exec->command = command.string();
  config.exec->api_version = api_version;
  config.exec->origin = "kubeconfig /k: users[0].user.exec";
  return config;
}

int runs(const TempDir& dir) { return std::stoi("0" + readAll(dir.path() / "count")); }

// ---------------------------------------------------------------------------
// Tokens and token files.

TEST(CredentialSource, FixedTokenNeverChanges) {
  testing::FakeClock clock;
  ClientConfig config;
  config.bearer_token = "fixed";
  CredentialSource source(config, clock);
  auto c = source.get();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->token, "fixed");
  EXPECT_EQ(c->identity, nullptr);
  EXPECT_FALSE(source.refreshAfterUnauthorized(*c));
  EXPECT_EQ(source.get()->token, "fixed");
}

// A source reading dir/token, first holding `initial`.
class TokenFileTest : public ::testing::Test {
 protected:
  CredentialSource& source(const std::string& initial) {
    ClientConfig config;
    config.token_file = dir_.write("token", initial).string();
    source_.emplace(config, clock_);
    return *source_;
  }

  TempDir dir_;
  testing::FakeClock clock_;
  std::optional<CredentialSource> source_;
};

TEST_F(TokenFileTest, RereadsTheFileAfterAMinuteOrA401) {
  CredentialSource& tokens = source("one\n");
  EXPECT_EQ(tokens.get()->token, "one");

  dir_.write("token", "two");
  clock_.advance(std::chrono::seconds(59));
  EXPECT_EQ(tokens.get()->token, "one") << "re-read before the interval";
  clock_.advance(std::chrono::seconds(1));
  EXPECT_EQ(tokens.get()->token, "two");

  dir_.write("token", "three");
  EXPECT_TRUE(tokens.refreshAfterUnauthorized(Credential{"two", nullptr}));
  EXPECT_EQ(tokens.get()->token, "three");
  EXPECT_FALSE(tokens.refreshAfterUnauthorized(Credential{"three", nullptr})) << "unchanged token";
}

TEST_F(TokenFileTest, KeepsTheLastTokenWhenTheFileVanishes) {
  CredentialSource& tokens = source("kept");
  EXPECT_EQ(tokens.get()->token, "kept");
  fs::remove(dir_.path() / "token");
  clock_.advance(std::chrono::minutes(2));
  EXPECT_EQ(tokens.get()->token, "kept");
  dir_.write("token", "   \n");
  EXPECT_FALSE(tokens.refreshAfterUnauthorized(Credential{"kept", nullptr}))
      << "an empty file does not replace the token";
  EXPECT_EQ(tokens.get()->token, "kept");
}

// ---------------------------------------------------------------------------
// Exec plugins.

TEST(CredentialSource, ExecCredentialIsCachedUntilItExpiresAndRefreshedAfter401) {
  TempDir dir;
  testing::FakeClock clock;
  dir.write("expiry", "2026-01-01T00:10:00Z");
  CredentialSource source(execConfig(countingPlugin(dir)), clock);

  auto first = source.get();
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_EQ(first->token, "token-1");
  EXPECT_EQ(source.get()->token, "token-1");
  clock.advance(std::chrono::minutes(9));
  EXPECT_EQ(source.get()->token, "token-1") << "cached until it expires";
  EXPECT_EQ(runs(dir), 1);

  dir.write("expiry", "2026-01-01T01:00:00Z");
  clock.advance(std::chrono::minutes(1));
  EXPECT_EQ(source.get()->token, "token-2") << "expired: the plugin runs again";
  EXPECT_EQ(runs(dir), 2);

  // A 401: the plugin runs again at once; a second request that failed with
  // the same old token takes the new one without another run.
  const Credential used = *source.get();
  EXPECT_TRUE(source.refreshAfterUnauthorized(used));
  EXPECT_EQ(source.get()->token, "token-3");
  EXPECT_TRUE(source.refreshAfterUnauthorized(used));
  EXPECT_EQ(runs(dir), 3);
}

TEST(CredentialSource, ConcurrentRequestsAfterA401RunThePluginOnce) {
  TempDir dir;
  testing::FakeClock clock;
  dir.write("expiry", "2026-01-01T01:00:00Z");
  CredentialSource source(execConfig(countingPlugin(dir)), clock);
  const Credential used = *source.get();
  // Eight requests fail with the same token at once: one runs the plugin,
  // the others wait for it and take its answer.
  std::vector<std::thread> threads;
  std::atomic<int> refreshed{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      if (source.refreshAfterUnauthorized(used)) ++refreshed;
      EXPECT_EQ(source.get()->token, "token-2");
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(refreshed.load(), 8);
  EXPECT_EQ(runs(dir), 2);
}

TEST(CredentialSource, ExecWithoutExpiryIsKeptUntilA401) {
  TempDir dir;
  testing::FakeClock clock;
  fs::path plugin = script(dir, "plugin",
                           "printf '{\"apiVersion\": \"client.authentication.k8s.io/v1beta1\", "
                           "\"kind\": \"ExecCredential\", \"status\": {\"token\": \"same\"}}'\n");
  CredentialSource source(execConfig(plugin, "client.authentication.k8s.io/v1beta1"), clock);
  auto c = source.get();
  ASSERT_TRUE(c.ok()) << c.status().toString();
  clock.advance(std::chrono::hours(24 * 365));
  EXPECT_EQ(*source.get(), *c);
  EXPECT_FALSE(source.refreshAfterUnauthorized(*c)) << "the plugin gave the same token again";
}

TEST(CredentialSource, ExecClientCertificateIsANewIdentityPerAnswer) {
  TempDir dir;
  testing::FakeClock clock;
  Json credential = {{"apiVersion", kV1},
                     {"kind", "ExecCredential"},
                     {"status",
                      {{"clientCertificateData", kCertPem},
                       {"clientKeyData", kKeyPem},
                       {"expirationTimestamp", "2026-01-01T00:00:30+00:00"}}}};
  dir.write("answer.json", credential.dump());
  fs::path plugin =
      script(dir, "plugin", "cat \"" + (dir.path() / "answer.json").string() + "\"\n");
  CredentialSource source(execConfig(plugin), clock);
  auto first = source.get();
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_TRUE(first->token.empty());
  ASSERT_NE(first->identity, nullptr);
  EXPECT_EQ(first->identity->cert_pem, kCertPem);
  EXPECT_EQ(first->identity->key_pem, kKeyPem);
  EXPECT_EQ(source.get()->identity, first->identity);
  clock.advance(std::chrono::seconds(30));
  auto second = source.get();
  ASSERT_TRUE(second.ok());
  EXPECT_NE(second->identity, first->identity) << "a new answer is a new identity";
}

TEST(CredentialSource, OneSharedSourcePerExecConfiguration) {
  testing::FakeClock clock;
  ClientConfig a = execConfig("/bin/plugin-a");
  auto first = CredentialSource::shared(a, clock);
  EXPECT_EQ(CredentialSource::shared(a, clock), first) << "the leader election's client shares it";
  ClientConfig b = a;
  b.exec->args = {"--other"};
  EXPECT_NE(CredentialSource::shared(b, clock), first);
  ClientConfig token;
  token.bearer_token = "t";
  EXPECT_NE(CredentialSource::shared(token, clock), CredentialSource::shared(token, clock));
}

TEST(ExecPlugin, RunsWithArgsEnvAndExecInfoWithoutATerminal) {
  TempDir dir;
  const fs::path seen = dir.path() / "seen";
  fs::path plugin = script(
      dir, "plugin",
      "{ echo \"args=$*\"; echo \"profile=$AWS_PROFILE\"; echo \"info=$KUBERNETES_EXEC_INFO\";\n"
      "  if [ -t 0 ]; then echo stdin=tty; else echo \"stdin=$(cat)\"; fi; } > \"" +
          seen.string() +
          "\"\n"
          "echo 'diagnostics go to stderr' >&2\n"
          "printf '{\"apiVersion\": \"client.authentication.k8s.io/v1\", \"kind\": "
          "\"ExecCredential\", \"status\": {\"token\": \"t\"}}'\n");
  ClientConfig config = execConfig(plugin);
  config.ca_pem = "-----BEGIN CERTIFICATE-----\nQ0E=\n-----END CERTIFICATE-----\n";
  config.tls_server_name = "api.internal";
  config.proxy_url = "http://proxy:3128";
  config.exec->args = {"get-token", "--cluster", "a b"};
  config.exec->env = {{"AWS_PROFILE", "prod"}};
  config.exec->provide_cluster_info = true;
  config.exec->cluster_config = {{"audience", "sts"}};
  auto credential = runExecPlugin(*config.exec, config);
  ASSERT_TRUE(credential.ok()) << credential.status().toString();
  EXPECT_EQ(credential->token, "t");
  EXPECT_FALSE(credential->expiry.has_value());

  const std::string out = readAll(seen);
  EXPECT_THAT(out, HasSubstr("args=get-token --cluster a b\n"));
  EXPECT_THAT(out, HasSubstr("profile=prod\n"));
  EXPECT_THAT(out, HasSubstr("stdin=\n")) << "stdin is /dev/null";
  const size_t info_at = out.find("info=") + 5;
  const Json info = Json::parse(out.substr(info_at, out.find('\n', info_at) - info_at));
  EXPECT_EQ(info, Json::parse(R"({
    "apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
    "spec": {"interactive": false, "cluster": {
      "server": "https://api.example.com:6443", "tls-server-name": "api.internal",
      "certificate-authority-data": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tClEwRT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
      "proxy-url": "http://proxy:3128", "config": {"audience": "sts"}}}})"));

  config.exec->provide_cluster_info = false;
  EXPECT_EQ(Json::parse(execInfo(*config.exec, config)),
            Json::parse(R"({"apiVersion": "client.authentication.k8s.io/v1",
                            "kind": "ExecCredential", "spec": {"interactive": false}})"));
}

TEST(ExecPlugin, MissingCommandNamesItAndTheInstallHint) {
  TempDir dir;
  ClientConfig config = execConfig("no-such-plugin-rsc-test");
  config.exec->install_hint = "Install it with: apt-get install no-such-plugin\n";
  auto missing = runExecPlugin(*config.exec, config);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              StartsWith("kubeconfig /k: users[0].user.exec.command: executable "
                         "\"no-such-plugin-rsc-test\" not found in $PATH ("));
  EXPECT_THAT(missing.status().message(),
              HasSubstr("); Install it with: apt-get install no-such-plugin"));

  config = execConfig(dir.path() / "bin/plugin");
  missing = runExecPlugin(*config.exec, config);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "kubeconfig /k: users[0].user.exec.command: executable \"" +
                                            (dir.path() / "bin/plugin").string() + "\" not found");

  // Not executable counts as missing too.
  config = execConfig(dir.write("not-executable", "#!/bin/sh\n"));
  EXPECT_FALSE(runExecPlugin(*config.exec, config).ok());
}

TEST(ExecPlugin, BadAnswersAreErrors) {
  struct Case {
    std::string body;
    std::string want;
  };
  const std::string head =
      "printf '{\"apiVersion\": \"client.authentication.k8s.io/v1\", "
      "\"kind\": \"ExecCredential\", ";
  const std::vector<Case> cases = {
      {"echo 'not json'\n",
       "the plugin's output is not an ExecCredential JSON object: \"not json\""},
      {"printf '{\"apiVersion\": \"client.authentication.k8s.io/v1beta1\", \"kind\": "
       "\"ExecCredential\", \"status\": {\"token\": \"t\"}}'\n",
       "printed apiVersion \"client.authentication.k8s.io/v1beta1\", expected "
       "\"client.authentication.k8s.io/v1\""},
      {"printf '{\"apiVersion\": \"client.authentication.k8s.io/v1\", \"kind\": \"Other\"}'\n",
       "printed kind \"Other\", expected \"ExecCredential\""},
      {head + "\"spec\": {}}'\n", "the plugin's ExecCredential has no status"},
      {head + "\"status\": {}}'\n",
       "status: neither a token nor clientCertificateData and clientKeyData"},
      {head + "\"status\": {\"clientCertificateData\": \"c\"}}'\n",
       "status: clientCertificateData and clientKeyData must be given together"},
      {head + "\"status\": {\"token\": 7}}'\n", "status.token: not a string"},
      {head + "\"status\": {\"token\": \"t\", \"expirationTimestamp\": \"tomorrow\"}}'\n",
       "status.expirationTimestamp: \"tomorrow\" is not an RFC 3339 time"},
      {"echo 'token expired: run login' >&2\nexit 3\n",
       "failed with exit code 3: token expired: run login"},
      {"kill -9 $$\n", "was killed by signal 9"},
  };
  for (const auto& c : cases) {
    TempDir dir;
    ClientConfig config = execConfig(script(dir, "plugin", c.body));
    auto answer = runExecPlugin(*config.exec, config);
    ASSERT_FALSE(answer.ok()) << c.body;
    EXPECT_EQ(answer.status().code(), StatusCode::kUnavailable);
    EXPECT_THAT(answer.status().message(), StartsWith("kubeconfig /k: users[0].user.exec: "));
    EXPECT_THAT(answer.status().message(), HasSubstr(c.want)) << c.body;
  }
}

TEST(ExecPlugin, OutputAndTimeAreBounded) {
  TempDir dir;
  ClientConfig config = execConfig(script(dir, "chatty", "yes token\n"));
  config.exec_run.max_output_bytes = 1000;
  auto answer = runExecPlugin(*config.exec, config);
  ASSERT_FALSE(answer.ok());
  EXPECT_THAT(answer.status().message(), HasSubstr("printed more than 1000 bytes; killed"));

  // A plugin that hangs (and started a child that holds its output open) is
  // killed with its process group at the timeout.
  config = execConfig(script(dir, "hangs", "sleep 60 &\nsleep 60\n"));
  config.exec_run.timeout = std::chrono::milliseconds(100);
  answer = runExecPlugin(*config.exec, config);
  ASSERT_FALSE(answer.ok());
  EXPECT_THAT(answer.status().message(), HasSubstr("gave no answer within 100 ms; killed"));
}

// Every run is reported as client-go's rest_client_exec_plugin_call_total
// counts it, the limits under statuses of their own.
TEST(ExecPlugin, EachRunIsReportedWithItsCodeAndCallStatus) {
  const std::string good =
      "printf '{\"apiVersion\": \"client.authentication.k8s.io/v1\", \"kind\": "
      "\"ExecCredential\", \"status\": {\"token\": \"t\"}}'\n";
  struct Case {
    std::string name;
    std::string body;  // empty: the command does not exist
    int want_code;
    std::string want_status;
  };
  const std::vector<Case> cases = {
      {"credential", good, 0, "no_error"},
      {"missing", "", -1, "plugin_not_found_error"},
      {"exit 3", "exit 3\n", 3, "plugin_execution_error"},
      {"killed", "kill -9 $$\n", -1, "plugin_execution_error"},
      {"not a credential", "echo hello\n", -1, "plugin_execution_error"},
      {"too much output", "yes token\n", -1, "plugin_output_limit_error"},
      {"hangs", "sleep 60\n", -1, "plugin_timeout_error"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    ClientConfig config =
        execConfig(c.body.empty() ? dir.path() / "absent" : script(dir, "plugin", c.body));
    config.exec_run.max_output_bytes = 1000;
    config.exec_run.timeout = std::chrono::milliseconds(200);
    std::vector<ExecPluginCall> calls;
    config.exec_run.observer = [&](const ExecPluginCall& call) { calls.push_back(call); };
    const bool ok = runExecPlugin(*config.exec, config).ok();
    EXPECT_EQ(ok, c.want_code == 0);
    ASSERT_EQ(calls.size(), 1U);
    EXPECT_EQ(calls[0].code, c.want_code);
    EXPECT_EQ(calls[0].call_status, c.want_status);
  }
}

TEST(CredentialSource, AFailingPluginIsAnErrorAndRunsAgainAfterAWhile) {
  TempDir dir;
  testing::FakeClock clock;
  const fs::path ok_marker = dir.path() / "ok";
  fs::path plugin = script(dir, "plugin",
                           "[ -e \"" + ok_marker.string() +
                               "\" ] || { echo 'not logged in' >&2; exit 1; }\n"
                               "printf '{\"apiVersion\": \"client.authentication.k8s.io/v1\", "
                               "\"kind\": \"ExecCredential\", \"status\": {\"token\": \"t\"}}'\n");
  CredentialSource source(execConfig(plugin), clock);
  auto failed = source.get();
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("failed with exit code 1: not logged in"));
  dir.write("ok", "");
  // For a while requests get the same error without a run.
  clock.advance(CredentialSource::kExecFailureHold - std::chrono::seconds(1));
  EXPECT_EQ(source.get().status(), failed.status());
  clock.advance(std::chrono::seconds(1));
  auto c = source.get();
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->token, "t");
}

}  // namespace
}  // namespace rsc::client
