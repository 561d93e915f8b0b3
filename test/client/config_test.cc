#include "client/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "client/in_cluster.h"
#include "client/kubeconfig.h"
#include "client/load_config.h"
#include "test/metrics/temp_dir.h"

namespace rsc::client {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr std::string_view kCaPem =
    "-----BEGIN CERTIFICATE-----\nQ0EgY2VydA==\n-----END CERTIFICATE-----\n";
constexpr std::string_view kCertPem =
    "-----BEGIN CERTIFICATE-----\nY2xpZW50IGNlcnQ=\n-----END CERTIFICATE-----\n";
constexpr std::string_view kKeyPem =
    "-----BEGIN EC PRIVATE KEY-----\na2V5\n-----END EC PRIVATE KEY-----\n";

std::string base64(std::string_view in) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    for (int s = 18; s >= 0; s -= 6) {
      out.push_back(kAlphabet[(v >> s) & 63]);
    }
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += {kAlphabet[(v >> 18) & 63], kAlphabet[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += {kAlphabet[(v >> 18) & 63], kAlphabet[(v >> 12) & 63], kAlphabet[(v >> 6) & 63], '='};
  }
  return out;
}

using metrics::testing::TempDir;

// A kubeconfig as kubectl writes it, with inline data.
std::string dataKubeconfig(const std::string& server = "https://10.0.0.1:6443") {
  return "apiVersion: v1\n"
         "clusters:\n"
         "- cluster:\n"
         "    certificate-authority-data: " +
         base64(kCaPem) +
         "\n"
         "    server: " +
         server +
         "\n"
         "  name: test\n"
         "contexts:\n"
         "- context:\n"
         "    cluster: test\n"
         "    user: admin\n"
         "    namespace: kube-system\n"
         "  name: test\n"
         "current-context: test\n"
         "kind: Config\n"
         "preferences: {}\n"
         "users:\n"
         "- name: admin\n"
         "  user:\n"
         "    client-certificate-data: " +
         base64(kCertPem) +
         "\n"
         "    client-key-data: " +
         base64(kKeyPem) + "\n";
}

// A kubeconfig whose only user has `user_body` (indented four spaces).
std::string kubeconfigWithUser(const std::string& user_body) {
  return "clusters:\n"
         "- name: c\n"
         "  cluster:\n"
         "    server: https://api.example.com\n"
         "users:\n"
         "- name: u\n"
         "  user:\n" +
         user_body +
         "contexts:\n"
         "- name: ctx\n"
         "  context: {cluster: c, user: u}\n"
         "current-context: ctx\n";
}

// Writes `text` to `name` in `dir` and loads it; the test fails when it does
// not load.
ClientConfig loaded(const TempDir& dir, const std::string& name, const std::string& text,
                    const std::string& context = "") {
  auto config = loadKubeconfig({dir.write(name, text)}, context);
  EXPECT_TRUE(config.ok()) << config.status().toString();
  return config.ok() ? *config : ClientConfig{};
}

// ---------------------------------------------------------------------------
// Kubeconfig loading.

TEST(Kubeconfig, InlineDataIsDecoded) {
  TempDir dir;
  fs::path file = dir.write("config", dataKubeconfig());
  auto config = loadKubeconfig({file});
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://10.0.0.1:6443");
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_EQ(config->client_cert_pem, kCertPem);
  EXPECT_EQ(config->client_key_pem, kKeyPem);
  EXPECT_EQ(config->namespace_, "kube-system");
  EXPECT_FALSE(config->insecure_skip_tls_verify);
  EXPECT_TRUE(config->bearer_token.empty());
  EXPECT_EQ(config->source, "kubeconfig " + file.string() + ", context test");
}

TEST(Kubeconfig, RelativeFilesResolveAgainstTheKubeconfigFolder) {
  TempDir dir;
  dir.write("kube/pki/ca.crt", kCaPem);
  dir.write("kube/pki/admin.crt", kCertPem);
  dir.write("kube/pki/admin.key", kKeyPem);
  const fs::path token = dir.write("kube/token", "file-token\n");
  fs::path file = dir.write("kube/config", R"(clusters:
- name: c
  cluster:
    server: https://api.example.com:443/
    certificate-authority: pki/ca.crt
    tls-server-name: kubernetes.default.svc
users:
- name: u
  user:
    client-certificate: pki/admin.crt
    client-key: ./pki/admin.key
    tokenFile: token
contexts:
- name: ctx
  context:
    cluster: c
    user: u
current-context: ctx
)");
  // Load from another working folder: resolution must not depend on it.
  auto config = loadKubeconfig({file});
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://api.example.com:443");
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_EQ(config->client_cert_pem, kCertPem);
  EXPECT_EQ(config->client_key_pem, kKeyPem);
  EXPECT_EQ(config->tls_server_name, "kubernetes.default.svc");
  EXPECT_EQ(fs::path(config->token_file), token);
  EXPECT_EQ(config->namespace_, "default");
}

TEST(Kubeconfig, CurrentContextSelectsClusterUserAndNamespace) {
  TempDir dir;
  fs::path file = dir.write("config", R"(clusters:
- name: one
  cluster: {server: "https://one:6443", insecure-skip-tls-verify: true}
- name: two
  cluster: {server: "https://two:6443"}
users:
- name: alice
  user: {token: alice-token}
- name: bob
  user: {token: bob-token}
contexts:
- name: first
  context: {cluster: one, user: alice}
- name: second
  context: {cluster: two, user: bob, namespace: team-b}
current-context: second
)");
  auto config = loadKubeconfig({file});
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://two:6443");
  EXPECT_EQ(config->bearer_token, "bob-token");
  EXPECT_EQ(config->namespace_, "team-b");
  EXPECT_FALSE(config->insecure_skip_tls_verify);
}

TEST(Kubeconfig, InsecureSkipTlsVerifyIsRead) {
  TempDir dir;
  fs::path file = dir.write("config", R"(clusters:
- name: c
  cluster:
    server: https://x
    insecure-skip-tls-verify: true
contexts:
- name: ctx
  context:
    cluster: c
current-context: ctx
)");
  auto config = loadKubeconfig({file});
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_TRUE(config->insecure_skip_tls_verify);
  EXPECT_TRUE(config->bearer_token.empty());
  EXPECT_TRUE(config->client_cert_pem.empty());
}

TEST(Kubeconfig, JsonKubeconfigWorks) {
  TempDir dir;
  fs::path file = dir.write("config.json", R"({
    "clusters": [{"name": "c", "cluster": {"server": "https://json:6443"}}],
    "users": [{"name": "u", "user": {"token": "json-token"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x"})");
  auto config = loadKubeconfig({file});
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://json:6443");
  EXPECT_EQ(config->bearer_token, "json-token");
}

TEST(Kubeconfig, MergedFilesFirstDefinitionWins) {
  TempDir dir;
  fs::path a = dir.write("a/config", R"(clusters:
- name: shared
  cluster: {server: "https://from-a"}
current-context: ctx
)");
  // b defines the context and user, and a second "shared" cluster that must
  // lose; its relative CA path resolves against b's folder.
  dir.write("b/ca.crt", kCaPem);
  fs::path b = dir.write("b/config", R"(clusters:
- name: shared
  cluster: {server: "https://from-b", certificate-authority: ca.crt}
- name: other
  cluster: {server: "https://other", certificate-authority: ca.crt}
users:
- name: u
  user: {token: b-token}
contexts:
- name: ctx
  context: {cluster: shared, user: u}
- name: ctx2
  context: {cluster: other, user: u}
current-context: ctx2
)");
  auto config = loadKubeconfig({a, b});
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://from-a");
  EXPECT_TRUE(config->ca_pem.empty());
  EXPECT_EQ(config->bearer_token, "b-token");

  // In the other order b wins, and its relative CA file is found.
  auto reversed = loadKubeconfig({b, a});
  ASSERT_TRUE(reversed.ok()) << reversed.status().toString();
  EXPECT_EQ(reversed->server, "https://other");
  EXPECT_EQ(reversed->ca_pem, kCaPem);
}

TEST(Kubeconfig, ErrorsNameTheFileAndField) {
  TempDir dir;
  const std::string cfg = (dir.path() / "config").string();
  struct Case {
    std::string text;
    std::string want;
  };
  const std::string missing = (dir.path() / "missing.crt").string();
  const std::vector<Case> cases = {
      {kubeconfigWithUser(
           "    client-certificate: missing.crt\n    client-key-data: " + base64(kKeyPem) + "\n"),
       "kubeconfig " + cfg + ": users[0].user.client-certificate: file " + missing + " not found"},
      {kubeconfigWithUser("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                          "      args: [eks, get-token]\n      interactiveMode: Never\n"),
       "kubeconfig " + cfg + ": users[0].user.exec.command: missing"},
      {kubeconfigWithUser("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                          "      command: aws\n"),
       "users[0].user.exec.interactiveMode: missing; use Never or IfAvailable"},
      {kubeconfigWithUser("    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n"
                          "      command: kubelogin\n      interactiveMode: Always\n"),
       "users[0].user.exec.interactiveMode: Always needs a terminal"},
      {kubeconfigWithUser("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                          "      command: x\n      interactiveMode: Sometimes\n"),
       "users[0].user.exec.interactiveMode: \"Sometimes\" is not Never, IfAvailable or Always"},
      {kubeconfigWithUser("    exec:\n      apiVersion: client.authentication.k8s.io/v1alpha1\n"
                          "      command: x\n"),
       "users[0].user.exec.apiVersion: \"client.authentication.k8s.io/v1alpha1\" is not "
       "supported"},
      {kubeconfigWithUser("    exec:\n      command: x\n"),
       "users[0].user.exec.apiVersion: missing"},
      {kubeconfigWithUser("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                          "      command: x\n      interactiveMode: Never\n"
                          "      env: [{value: v}]\n"),
       "users[0].user.exec.env[0].name: missing"},
      {kubeconfigWithUser("    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                          "      command: x\n      interactiveMode: Never\n"
                          "      args: [a, {b: c}]\n"),
       "users[0].user.exec.args[1]: must be a string"},
      {kubeconfigWithUser("    token: t\n    exec:\n      apiVersion: "
                          "client.authentication.k8s.io/v1\n      command: x\n"),
       "users[0].user.exec: cannot be combined with token"},
      {kubeconfigWithUser("    exec: [x]\n"), "users[0].user.exec: must be a mapping"},
      {kubeconfigWithUser("    auth-provider:\n      name: gcp\n"),
       "users[0].user.auth-provider: auth providers are not supported"},
      {kubeconfigWithUser("    username: admin\n    password: secret\n"),
       "users[0].user.username: basic authentication is not supported"},
      {kubeconfigWithUser("    as: someone\n    token: t\n"),
       "users[0].user.as: impersonation is not supported"},
      {kubeconfigWithUser("    client-certificate-data: " + base64(kCertPem) + "\n"),
       "users[0].user.client-key: missing, but client-certificate is set"},
      {kubeconfigWithUser("    client-certificate-data: not*base64\n    client-key-data: " +
                          base64(kKeyPem) + "\n"),
       "users[0].user.client-certificate-data: not valid base64"},
      {kubeconfigWithUser("    client-certificate-data: " + base64("DER bytes") +
                          "\n    client-key-data: " + base64(kKeyPem) + "\n"),
       "users[0].user.client-certificate-data: does not contain PEM data"},
      {kubeconfigWithUser("    client-key: a.key\n    client-key-data: " + base64(kKeyPem) +
                          "\n    client-certificate-data: " + base64(kCertPem) + "\n"),
       "users[0].user: client-key and client-key-data are both set"},
      {kubeconfigWithUser("    tokenFile: /nonexistent/token\n"),
       "users[0].user.tokenFile: file /nonexistent/token not found"},
      {kubeconfigWithUser("    token: [1]\n"), "users[0].user.token: must be a string"},
      {"clusters:\n- name: c\n  cluster: {server: 'https://x'}\ncontexts:\n"
       "- name: a\n  context: {cluster: c}\ncurrent-context: b\n",
       "kubeconfig " + cfg + ": current-context: context \"b\" not found"},
      {"clusters:\n- name: c\n  cluster: {server: 'https://x'}\ncontexts:\n"
       "- name: a\n  context: {cluster: c}\n",
       "kubeconfig " + cfg + ": current-context is not set"},
      {"contexts:\n- name: a\n  context: {cluster: nowhere}\ncurrent-context: a\n",
       "contexts[0].context.cluster: cluster \"nowhere\" not found"},
      {"clusters:\n- name: c\n  cluster: {server: 'https://x'}\ncontexts:\n"
       "- name: a\n  context: {cluster: c, user: nobody}\ncurrent-context: a\n",
       "contexts[0].context.user: user \"nobody\" not found"},
      {"clusters:\n- name: c\n  cluster: {insecure-skip-tls-verify: true}\ncontexts:\n"
       "- name: a\n  context: {cluster: c}\ncurrent-context: a\n",
       "clusters[0].cluster.server: missing"},
      {"clusters:\n- name: c\n  cluster: {server: 'ftp://x'}\ncontexts:\n"
       "- name: a\n  context: {cluster: c}\ncurrent-context: a\n",
       "clusters[0].cluster.server: \"ftp://x\" is not an http:// or https:// URL"},
      {"clusters:\n- name: c\n  cluster:\n    server: https://x\n    insecure-skip-tls-verify: "
       "true\n    certificate-authority-data: " +
           base64(kCaPem) + "\ncontexts:\n- name: a\n  context: {cluster: c}\ncurrent-context: a\n",
       "clusters[0].cluster.insecure-skip-tls-verify: cannot be used together with a certificate "
       "authority"},
      {"clusters:\n- name: c\n  cluster: {server: 'https://x', proxy-url: 'socks5://proxy:1080'}\n"
       "contexts:\n- name: a\n  context: {cluster: c}\ncurrent-context: a\n",
       "clusters[0].cluster.proxy-url: \"socks5://proxy:1080\": only http:// proxies are "
       "supported"},
      {"clusters:\n- name: c\n  cluster: {server: 'https://x', proxy-url: 'http://'}\n"
       "contexts:\n- name: a\n  context: {cluster: c}\ncurrent-context: a\n",
       "clusters[0].cluster.proxy-url: \"http://\" names no host"},
      {"clusters:\n- name: c\n  cluster: {server: 'https://x', insecure-skip-tls-verify: 'yes'}\n"
       "contexts:\n- name: a\n  context: {cluster: c}\ncurrent-context: a\n",
       "clusters[0].cluster.insecure-skip-tls-verify: must be true or false"},
      {"clusters:\n- cluster: {server: 'https://x'}\n",
       "kubeconfig " + cfg + ": clusters[0].name: missing"},
      {"clusters: {}\n", "kubeconfig " + cfg + ": clusters: must be a list"},
      {"- a\n- b\n", "kubeconfig " + cfg + ": the top level must be a mapping"},
      {"kind: Config\n  bad: indent\n", "kubeconfig " + cfg + ": line 2, column 6: "},
      {"kind: Config\nkind: Config\n", "kubeconfig " + cfg + ": line 2: duplicate key \"kind\""},
  };
  for (const auto& c : cases) {
    fs::path file = dir.write("config", c.text);
    auto config = loadKubeconfig({file});
    ASSERT_FALSE(config.ok()) << "loaded:\n" << c.text;
    EXPECT_THAT(config.status().message(), HasSubstr(c.want)) << c.text;
  }
}

TEST(Kubeconfig, MissingFileIsNotFound) {
  auto config = loadKubeconfig({"/nonexistent/kubeconfig"});
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(config.status().message(), "kubeconfig: file /nonexistent/kubeconfig not found");
}

// ---------------------------------------------------------------------------
// In-cluster and the loading order.

// A service account folder as the kubelet mounts it.
fs::path writeServiceAccount(const TempDir& dir, const std::string& ns = "controllers") {
  dir.write("sa/token", "sa-token\n");
  dir.write("sa/ca.crt", kCaPem);
  if (!ns.empty()) {
    dir.write("sa/namespace", ns);
  }
  return dir.path() / "sa";
}

TEST(InClusterConfig, ReadsTheServiceAccount) {
  TempDir dir;
  ConfigEnvironment env;
  env.service_account_dir = writeServiceAccount(dir);
  env.variables = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}};
  auto config = loadInClusterConfig(env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->ca_pem, kCaPem);
  EXPECT_EQ(config->token_file, (env.service_account_dir / "token").string());
  EXPECT_EQ(config->namespace_, "controllers");
  EXPECT_EQ(config->source, "in-cluster");
}

TEST(InClusterConfig, PodNamespaceWinsAndIpv6IsBracketed) {
  TempDir dir;
  ConfigEnvironment env;
  env.service_account_dir = writeServiceAccount(dir);
  env.variables = {{"KUBERNETES_SERVICE_HOST", "fd00::1"},
                   {"KUBERNETES_SERVICE_PORT", "6443"},
                   {"POD_NAMESPACE", "from-env"}};
  auto config = loadInClusterConfig(env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://[fd00::1]:6443");
  EXPECT_EQ(config->namespace_, "from-env");
}

TEST(InClusterConfig, NamespaceDefaultsWithoutFile) {
  TempDir dir;
  ConfigEnvironment env;
  env.service_account_dir = writeServiceAccount(dir, /*ns=*/"");
  env.variables = {{"KUBERNETES_SERVICE_HOST", "h"}, {"KUBERNETES_SERVICE_PORT", "1"}};
  auto config = loadInClusterConfig(env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->namespace_, "default");
}

TEST(InClusterConfig, MissingCaNamesTheFile) {
  TempDir dir;
  dir.write("sa/token", "t");
  ConfigEnvironment env;
  env.service_account_dir = dir.path() / "sa";
  env.variables = {{"KUBERNETES_SERVICE_HOST", "h"}, {"KUBERNETES_SERVICE_PORT", "1"}};
  auto config = loadInClusterConfig(env);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message(), "in-cluster config: CA: file " +
                                           (env.service_account_dir / "ca.crt").string() +
                                           " not found");
}

TEST(LoadConfig, ExplicitKubeconfigComesFirst) {
  TempDir dir;
  ConfigEnvironment env;
  env.service_account_dir = writeServiceAccount(dir);
  env.variables = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}};
  fs::path file = dir.write("explicit", dataKubeconfig("https://explicit:6443"));
  auto config = loadConfig(file.string(), env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://explicit:6443");

  auto missing = loadConfig((dir.path() / "nope").string(), env);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(LoadConfig, InClusterComesBeforeKubeconfigVariable) {
  TempDir dir;
  ConfigEnvironment env;
  env.service_account_dir = writeServiceAccount(dir);
  fs::path file = dir.write("env-config", dataKubeconfig("https://from-env:6443"));
  env.variables = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                   {"KUBERNETES_SERVICE_PORT", "443"},
                   {"KUBECONFIG", file.string()}};
  auto config = loadConfig("", env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");

  // --context names a kubeconfig context: in-cluster is skipped.
  config = loadConfig("", env, "test");
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://from-env:6443");
  ConfigEnvironment without_kubeconfig = env;
  without_kubeconfig.variables.erase("KUBECONFIG");
  config = loadConfig("", without_kubeconfig, "test");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("in-cluster (skipped: --context"));

  // Without a mounted token the pod is not configured in-cluster.
  fs::remove(env.service_account_dir / "token");
  config = loadConfig("", env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://from-env:6443");
}

TEST(LoadConfig, KubeconfigListSkipsMissingFilesAndMerges) {
  TempDir dir;
  fs::path a = dir.write("a", "current-context: ctx\n");
  fs::path b = dir.write(
      "b", dataKubeconfig("https://from-b:6443") + "# b's own current-context loses to a's\n");
  ConfigEnvironment env;
  env.service_account_dir = dir.path() / "no-sa";
  env.variables = {
      {"KUBECONFIG", (dir.path() / "missing").string() + ":" + a.string() + "::" + b.string()},
      {"HOME", (dir.path() / "home").string()}};
  dir.write("home/.kube/config", dataKubeconfig("https://from-home:6443"));
  // a names context "ctx", which nobody defines.
  auto config = loadConfig("", env);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("context \"ctx\" not found"));

  dir.write("a", "current-context: test\n");
  config = loadConfig("", env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://from-b:6443");
  EXPECT_EQ(config->source, "kubeconfig " + a.string() + ", " + b.string() + ", context test");
}

TEST(LoadConfig, HomeKubeconfigIsTheLastResort) {
  TempDir dir;
  ConfigEnvironment env;
  env.service_account_dir = dir.path() / "no-sa";
  env.variables = {{"KUBECONFIG", (dir.path() / "missing").string()},
                   {"HOME", (dir.path() / "home").string()}};
  auto config = loadConfig("", env);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(config.status().message(), HasSubstr("KUBERNETES_SERVICE_HOST/PORT not set"));
  EXPECT_THAT(config.status().message(), HasSubstr((dir.path() / "missing").string()));
  EXPECT_THAT(config.status().message(),
              HasSubstr((dir.path() / "home/.kube/config").string() + " (not found)"));

  dir.write("home/.kube/config", dataKubeconfig("https://from-home:6443"));
  config = loadConfig("", env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://from-home:6443");
}

TEST(Kubeconfig, BlockScalarsAnchorsAndFlowStyle) {
  TempDir dir;
  // The CA as a literal block (base64 wrapped over lines), the users sharing
  // one exec entry through an anchor and a merge key, a context in flow style.
  std::string ca = base64(kCaPem);
  std::string wrapped;
  for (size_t i = 0; i < ca.size(); i += 20) wrapped += "      " + ca.substr(i, 20) + "\n";
  const ClientConfig config =
      loaded(dir, "config",
             "clusters:\n"
             "- name: c\n"
             "  cluster:\n"
             "    server: >-\n"
             "      https://folded.example.com:6443\n"
             "    certificate-authority-data: |\n" +
                 wrapped +
                 "users:\n"
                 "- name: base\n"
                 "  user:\n"
                 "    exec: &plugin\n"
                 "      apiVersion: client.authentication.k8s.io/v1\n"
                 "      command: get-token\n"
                 "      interactiveMode: Never\n"
                 "      args: [--cluster, one]\n"
                 "- name: derived\n"
                 "  user:\n"
                 "    exec:\n"
                 "      <<: *plugin\n"
                 "      args: [--cluster, two]\n"
                 "contexts: [{name: ctx, context: {cluster: c, user: derived}}]\n"
                 "current-context: ctx\n");
  EXPECT_EQ(config.server, "https://folded.example.com:6443");
  EXPECT_EQ(config.ca_pem, kCaPem);
  ASSERT_TRUE(config.exec.has_value());
  EXPECT_EQ(config.exec->command, "get-token");
  EXPECT_EQ(config.exec->args, (std::vector<std::string>{"--cluster", "two"}));
  EXPECT_EQ(config.exec->interactive_mode, "Never");
}

TEST(Kubeconfig, ExecEntryIsRead) {
  TempDir dir;
  const ClientConfig config = loaded(dir, "kube/config", R"(clusters:
- name: c
  cluster:
    server: https://api.example.com
    tls-server-name: api.internal
    proxy-url: http://user:secret@proxy.example.com:3128
    extensions:
    - name: other
      extension: {x: 1}
    - name: client.authentication.k8s.io/exec
      extension: {audience: sts.example.com, region: 3}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: bin/plugin
      args: ["get", 'token']
      env:
      - {name: AWS_PROFILE, value: prod}
      - name: EMPTY
      installHint: |
        Install the plugin from https://example.com/plugin.
      provideClusterInfo: true
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
)");
  EXPECT_EQ(config.tls_server_name, "api.internal");
  EXPECT_EQ(config.proxy_url, "http://user:secret@proxy.example.com:3128");
  ASSERT_TRUE(config.exec.has_value());
  const ExecConfig& exec = *config.exec;
  EXPECT_EQ(exec.command, (dir.path() / "kube/bin/plugin").string()) << "relative to the file";
  EXPECT_EQ(exec.args, (std::vector<std::string>{"get", "token"}));
  EXPECT_EQ(exec.env, (std::vector<std::pair<std::string, std::string>>{{"AWS_PROFILE", "prod"},
                                                                        {"EMPTY", ""}}));
  EXPECT_EQ(exec.api_version, "client.authentication.k8s.io/v1beta1");
  EXPECT_EQ(exec.interactive_mode, "IfAvailable") << "v1beta1's default";
  EXPECT_EQ(exec.install_hint, "Install the plugin from https://example.com/plugin.\n");
  EXPECT_TRUE(exec.provide_cluster_info);
  EXPECT_EQ(exec.cluster_config, Json::parse(R"({"audience": "sts.example.com", "region": 3})"));
  EXPECT_EQ(exec.origin,
            "kubeconfig " + (dir.path() / "kube/config").string() + ": users[0].user.exec");
  EXPECT_TRUE(config.bearer_token.empty());
}

TEST(Kubeconfig, ContextFlagSelectsAnotherContext) {
  TempDir dir;
  fs::path file = dir.write("config", R"(clusters:
- {name: one, cluster: {server: "https://one:6443"}}
- {name: two, cluster: {server: "https://two:6443"}}
users:
- {name: alice, user: {token: alice-token}}
contexts:
- {name: first, context: {cluster: one, user: alice}}
- {name: second, context: {cluster: two, user: alice, namespace: team-b}}
current-context: first
)");
  auto config = loadKubeconfig({file}, "second");
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://two:6443");
  EXPECT_EQ(config->namespace_, "team-b");
  EXPECT_EQ(config->source, "kubeconfig " + file.string() + ", context second");

  auto missing = loadKubeconfig({file}, "third");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "kubeconfig " + file.string() + ": context \"third\" (--context) not found");

  // Without current-context, --context is enough.
  fs::path bare = dir.write("bare",
                            "clusters:\n- {name: one, cluster: {server: 'https://one'}}\n"
                            "contexts:\n- {name: only, context: {cluster: one}}\n");
  auto selected = loadKubeconfig({bare}, "only");
  ASSERT_TRUE(selected.ok()) << selected.status().toString();
  EXPECT_EQ(selected->server, "https://one");
}

TEST(Kubeconfig, ThreeFilesMergeInOrder) {
  TempDir dir;
  // a: current-context only; b: the context, its user, and a cluster "c"
  // that c's file also defines (b's wins); c: the same user name (loses),
  // and a current-context that loses to a's.
  fs::path a = dir.write("a", "current-context: from-a\n");
  fs::path b = dir.write("b", R"(clusters:
- {name: c, cluster: {server: "https://from-b"}}
users:
- {name: u, user: {token: b-token}}
contexts:
- {name: from-a, context: {cluster: c, user: u}}
- {name: from-c, context: {cluster: c, user: u, namespace: b-ns}}
)");
  fs::path c = dir.write("c", R"(clusters:
- {name: c, cluster: {server: "https://from-c"}}
users:
- {name: u, user: {token: c-token}}
contexts:
- {name: from-c, context: {cluster: c, user: u, namespace: c-ns}}
current-context: from-c
)");
  ConfigEnvironment env;
  env.service_account_dir = dir.path() / "no-sa";
  env.variables = {{"KUBECONFIG", a.string() + ":" + b.string() + ":" + c.string()}};
  auto config = loadConfig("", env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://from-b");
  EXPECT_EQ(config->bearer_token, "b-token");
  EXPECT_EQ(config->source, "kubeconfig " + a.string() + ", " + b.string() + ", " + c.string() +
                                ", context from-a");

  // --context picks c's current context by name, but b defined it first.
  config = loadConfig("", env, "from-c");
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->namespace_, "b-ns");

  // In c, b, a order everything comes from c.
  env.variables["KUBECONFIG"] = c.string() + ":" + b.string() + ":" + a.string();
  config = loadConfig("", env);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  EXPECT_EQ(config->server, "https://from-c");
  EXPECT_EQ(config->bearer_token, "c-token");
  EXPECT_EQ(config->namespace_, "c-ns");
}

}  // namespace
}  // namespace rsc::client
