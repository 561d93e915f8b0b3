#include "client/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "test/fakes/fake_clock.h"

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

// A temporary folder, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = "/tmp/rsc-config-test-XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const fs::path& relative, std::string_view content) const {
    fs::path p = path_ / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  fs::path path_;
};

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

// ---------------------------------------------------------------------------
// The YAML subset.

TEST(KubeconfigYaml, ParsesKubectlOutput) {
  auto j = parseKubeconfigText(dataKubeconfig());
  ASSERT_TRUE(j.ok()) << j.status().toString();
  EXPECT_EQ((*j)["apiVersion"], "v1");
  EXPECT_EQ((*j)["preferences"], Json::object());
  ASSERT_TRUE((*j)["clusters"].is_array());
  ASSERT_EQ((*j)["clusters"].size(), 1u);
  EXPECT_EQ((*j)["clusters"][0]["name"], "test");
  EXPECT_EQ((*j)["clusters"][0]["cluster"]["server"], "https://10.0.0.1:6443");
  EXPECT_EQ((*j)["contexts"][0]["context"]["namespace"], "kube-system");
  EXPECT_EQ((*j)["users"][0]["user"]["client-key-data"], base64(kKeyPem));
}

TEST(KubeconfigYaml, ScalarsQuotesCommentsAndFlowCollections) {
  const char* text = R"(# leading comment
---
plain: hello world   # trailing comment
url: https://host:6443/path#frag
dq: "a \"quoted\" \\ value\t\u00e9 # not a comment"
sq: 'it''s # kept'
empty:
tilde: ~
null_word: null
yes: true
no: False
number: -42
version: 1.30
flow_seq: [a, "b c", 'd', 3]
flow_map: {k: v, n: {x: [1, 2]}, e: {}}
empty_seq: []
"quoted key": 1
nested:
  - - x
    - y
  -
    inner: 2
  - z
)";
  auto j = parseKubeconfigText(text);
  ASSERT_TRUE(j.ok()) << j.status().toString();
  EXPECT_EQ((*j)["plain"], "hello world");
  EXPECT_EQ((*j)["url"], "https://host:6443/path#frag");
  EXPECT_EQ((*j)["dq"], "a \"quoted\" \\ value\t\xC3\xA9 # not a comment");
  EXPECT_EQ((*j)["sq"], "it's # kept");
  EXPECT_TRUE((*j)["empty"].is_null());
  EXPECT_TRUE((*j)["tilde"].is_null());
  EXPECT_TRUE((*j)["null_word"].is_null());
  EXPECT_EQ((*j)["yes"], true);
  EXPECT_EQ((*j)["no"], false);
  EXPECT_EQ((*j)["number"], -42);
  EXPECT_EQ((*j)["version"], "1.30");
  EXPECT_EQ((*j)["flow_seq"], Json::parse(R"(["a", "b c", "d", 3])"));
  EXPECT_EQ((*j)["flow_map"], Json::parse(R"({"k": "v", "n": {"x": [1, 2]}, "e": {}})"));
  EXPECT_EQ((*j)["empty_seq"], Json::array());
  EXPECT_EQ((*j)["quoted key"], 1);
  EXPECT_EQ((*j)["nested"], Json::parse(R"([["x", "y"], {"inner": 2}, "z"])"));
}

TEST(KubeconfigYaml, SequencesIndentedUnderTheirKey) {
  auto j = parseKubeconfigText(
      "users:\n  - name: a\n    user:\n      token: t\n  - name: b\nkind: Config\n");
  ASSERT_TRUE(j.ok()) << j.status().toString();
  EXPECT_EQ((*j)["users"][0]["user"]["token"], "t");
  EXPECT_EQ((*j)["users"][1]["name"], "b");
  EXPECT_EQ((*j)["kind"], "Config");
}

TEST(KubeconfigYaml, EmptyTextIsNull) {
  auto j = parseKubeconfigText("# nothing\n\n");
  ASSERT_TRUE(j.ok());
  EXPECT_TRUE(j->is_null());
}

TEST(KubeconfigYaml, JsonIsParsedAsJson) {
  auto j = parseKubeconfigText(R"(  {"kind": "Config", "clusters": [{"name": "a"}]})");
  ASSERT_TRUE(j.ok()) << j.status().toString();
  EXPECT_EQ((*j)["clusters"][0]["name"], "a");
}

TEST(KubeconfigYaml, ErrorsCarryTheLineNumber) {
  struct Case {
    const char* text;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"a: 1\n\tb: 2\n", "line 2: tabs are not allowed"},
      {"a: 1\na: 2\n", "line 2: duplicate key 'a'"},
      {"a: 1\n   b: 2\n", "line 2: unexpected indentation"},
      {"a:\n  b: 1\n c: 2\n", "line 3: unexpected indentation"},
      {"x: 1\na: \"open\n", "line 2: unterminated double-quoted value"},
      {"a: &anchor 1\n", "line 1: anchors, aliases and tags are not supported"},
      {"a: *anchor\n", "line 1: anchors, aliases and tags are not supported"},
      {"a: !!str 1\n", "line 1: anchors, aliases and tags are not supported"},
      {"a: |\n  text\n", "line 1: block scalars"},
      {"a: [1, 2\n", "line 1: unterminated '['"},
      {"a: \"x\" y\n", "line 1: unexpected text after the value"},
      {"a: 1\n- b\n", "line 2: a list item where a mapping key was expected"},
      {"a: 1\njust text\n", "line 2: expected 'key: value'"},
      {"a: \"\\q\"\n", "line 1: unknown escape \\q"},
      {"a: 1\n---\nb: 2\n", "line 2: more than one YAML document"},
      {"? complex\n", "line 1: complex mapping keys"},
  };
  for (const auto& c : cases) {
    auto j = parseKubeconfigText(c.text);
    ASSERT_FALSE(j.ok()) << "parsed: " << c.text;
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(j.status().message(), HasSubstr(c.want)) << c.text;
  }
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
                          "      command: aws\n      args: [eks, get-token]\n"),
       "kubeconfig " + cfg + ": users[0].user.exec: exec credential plugins are not supported"},
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
      {"clusters:\n- name: c\n  cluster: {server: 'https://x', proxy-url: 'http://proxy'}\n"
       "contexts:\n- name: a\n  context: {cluster: c}\ncurrent-context: a\n",
       "clusters[0].cluster.proxy-url: is not supported"},
      {"clusters:\n- cluster: {server: 'https://x'}\n",
       "kubeconfig " + cfg + ": clusters[0].name: missing"},
      {"clusters: {}\n", "kubeconfig " + cfg + ": clusters: must be a list"},
      {"- a\n- b\n", "kubeconfig " + cfg + ": the top level must be a mapping"},
      {"kind: Config\n  bad: indent\n", "kubeconfig " + cfg + ": line 2: unexpected indentation"},
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

// ---------------------------------------------------------------------------
// Token rotation.

TEST(BearerTokenSource, FixedTokenNeverChanges) {
  testing::FakeClock clock;
  BearerTokenSource source("fixed", "", clock);
  EXPECT_EQ(source.token(), "fixed");
  EXPECT_FALSE(source.reloadAfterUnauthorized());
  EXPECT_EQ(source.token(), "fixed");
}

TEST(BearerTokenSource, RereadsTheFileAfterAMinuteOrA401) {
  TempDir dir;
  testing::FakeClock clock;
  fs::path file = dir.write("token", "one\n");
  BearerTokenSource source("", file.string(), clock);
  EXPECT_EQ(source.token(), "one");

  dir.write("token", "two");
  clock.advance(std::chrono::seconds(59));
  EXPECT_EQ(source.token(), "one") << "re-read before the interval";
  clock.advance(std::chrono::seconds(1));
  EXPECT_EQ(source.token(), "two");

  dir.write("token", "three");
  EXPECT_TRUE(source.reloadAfterUnauthorized());
  EXPECT_EQ(source.token(), "three");
  EXPECT_FALSE(source.reloadAfterUnauthorized()) << "unchanged token";
}

TEST(BearerTokenSource, KeepsTheLastTokenWhenTheFileVanishes) {
  TempDir dir;
  testing::FakeClock clock;
  fs::path file = dir.write("token", "kept");
  BearerTokenSource source("", file.string(), clock);
  EXPECT_EQ(source.token(), "kept");
  fs::remove(file);
  clock.advance(std::chrono::minutes(2));
  EXPECT_EQ(source.token(), "kept");
  dir.write("token", "   \n");
  EXPECT_FALSE(source.reloadAfterUnauthorized()) << "an empty file does not replace the token";
  EXPECT_EQ(source.token(), "kept");
}

}  // namespace
}  // namespace rsc::client
