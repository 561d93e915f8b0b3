// The controller binary run from kubeconfigs as kubectl reads them, against
// the real API server: a user whose credential comes from an exec plugin (a
// script that counts its runs, first printing a token the server rejects,
// then the admin's token with a short expirationTimestamp) publishes the
// example inventory after one 401 and runs the plugin again once the
// credential expired; a plugin's client certificate authenticates; a cluster with proxy-url reaches
// the API server only through an HTTP CONNECT proxy (a small one in this file). --context selects
// the working context of a kubeconfig whose current-context is broken.
#include "client/kubeconfig.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client/base64.h"
#include "common/clock.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

namespace fs = std::filesystem;
using std::chrono::seconds;

// How long the plugin's second credential is valid: long enough to start
// and publish, short enough to wait for.
constexpr int kShortLifetimeSeconds = 8;

std::string readFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeFile(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << content;
}

// An HTTP proxy that serves CONNECT only, as corporate proxies in front of
// an API server do: it records each tunnel's target and Proxy-Authorization
// and pipes bytes both ways. One thread per connection; the destructor
// closes every socket and joins them.
class ConnectProxy {
 public:
  ConnectProxy() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(::listen(listen_fd_, 64), 0);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { acceptLoop(); });
  }
  ~ConnectProxy() {
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (auto& t : tunnels_) t.join();
    std::lock_guard lock(mu_);
    for (int fd : fds_) ::close(fd);
    ::close(listen_fd_);
  }
  ConnectProxy(const ConnectProxy&) = delete;
  ConnectProxy& operator=(const ConnectProxy&) = delete;

  int port() const { return port_; }
  // "CONNECT target" lines and Proxy-Authorization values seen so far.
  std::vector<std::string> targets() const {
    std::lock_guard lock(mu_);
    return targets_;
  }
  std::vector<std::string> authorizations() const {
    std::lock_guard lock(mu_);
    return authorizations_;
  }

 private:
  void acceptLoop() {
    while (!stopping_) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;
      std::lock_guard lock(mu_);
      fds_.push_back(fd);
      tunnels_.emplace_back([this, fd] { serve(fd); });
    }
  }

  void serve(int client) {
    // The request head, up to the blank line.
    std::string head;
    char c = 0;
    while (head.size() < 8192 && !head.ends_with("\r\n\r\n") && ::read(client, &c, 1) == 1) {
      head.push_back(c);
    }
    std::istringstream lines(head);
    std::string method;
    std::string target;
    lines >> method >> target;
    std::string authorization;
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("Proxy-Authorization: ")) {
        authorization = line.substr(21, line.size() - 22);  // without "\r"
      }
    }
    {
      std::lock_guard lock(mu_);
      targets_.push_back(method + " " + target);
      authorizations_.push_back(authorization);
    }
    const size_t colon = target.rfind(':');
    if (method != "CONNECT" || colon == std::string::npos) {
      const std::string refused = "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n";
      (void)!::send(client, refused.data(), refused.size(), MSG_NOSIGNAL);
      return;
    }
    const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    {
      std::lock_guard lock(mu_);
      fds_.push_back(upstream);
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(std::stoi(target.substr(colon + 1))));
    ::inet_pton(AF_INET, target.substr(0, colon).c_str(), &addr.sin_addr);
    if (::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      const std::string failed = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n";
      (void)!::send(client, failed.data(), failed.size(), MSG_NOSIGNAL);
      return;
    }
    const std::string established = "HTTP/1.1 200 Connection established\r\n\r\n";
    (void)!::send(client, established.data(), established.size(), MSG_NOSIGNAL);
    std::array<pollfd, 2> fds{pollfd{client, POLLIN, 0}, pollfd{upstream, POLLIN, 0}};
    std::array<char, 16384> buf{};
    while (::poll(fds.data(), fds.size(), -1) > 0) {
      for (size_t i = 0; i < 2; ++i) {
        if (fds[i].revents == 0) continue;
        const ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
        if (n <= 0 ||
            ::send(fds[1 - i].fd, buf.data(), static_cast<size_t>(n), MSG_NOSIGNAL) != n) {
          ::shutdown(client, SHUT_RDWR);
          ::shutdown(upstream, SHUT_RDWR);
          return;
        }
      }
    }
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  mutable std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> tunnels_;
  std::vector<std::string> targets_;
  std::vector<std::string> authorizations_;
};

// A kubeconfig with the test cluster and `user_body` (indented four spaces)
// as user "u" in context "working", and a current-context "broken" whose
// cluster does not exist, so that only --context=working can work.
std::string kubeconfig(const std::string& cluster_extra, const std::string& user_body) {
  const ClusterEnvironment& cluster = ClusterEnvironment::get();
  return "apiVersion: v1\nkind: Config\n"
         "clusters:\n"
         "- name: test\n"
         "  cluster:\n"
         "    server: " +
         cluster.server() + "\n    certificate-authority: " + cluster.caFile().string() + "\n" +
         cluster_extra +
         "users:\n"
         "- name: u\n"
         "  user:\n" +
         user_body +
         "contexts:\n"
         "- name: working\n"
         "  context: {cluster: test, user: u}\n"
         "- name: broken\n"
         "  context: {cluster: nowhere, user: u}\n"
         "current-context: broken\n";
}

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rsc-kubeconfig-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    for (const char* node : {"node-a", "node-b", "node-c"}) env_.ensureNode(node);
  }
  void TearDown() override {
    if (controller_.process) {
      expectCleanStop(controller_);
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  // Pushes every example file (controller/inventory/examples) and expects
  // each to be published. Returns the (driver, pool) pairs.
  std::vector<std::pair<std::string, std::string>> publishExamples() {
    std::vector<std::pair<std::string, std::string>> pools;
    const fs::path examples = ClusterEnvironment::sourceRoot() / "controller/inventory/examples";
    for (const auto& entry : fs::directory_iterator(examples)) {
      const std::string name = entry.path().filename().string();
      std::string path;
      if (name.ends_with(".driver.json")) {
        const std::string driver = name.substr(0, name.size() - 12);
        path = "/v1/drivers/" + driver;
        const Json body = Json::parse(readFile(entry.path()));
        for (const auto& [pool, unused] : body["pools"].items()) pools.emplace_back(driver, pool);
      } else if (name.ends_with(".pool.json")) {
        const std::string stem = name.substr(0, name.size() - 10);
        const size_t dash = stem.find('-');
        pools.emplace_back(stem.substr(0, dash), stem.substr(dash + 1));
        path = "/v1/drivers/" + pools.back().first + "/pools/" + pools.back().second;
      } else {
        continue;
      }
      const HttpAnswer a = ServiceEnv::http("PUT", controller_.inventoryUrl() + path + "?wait=60s",
                                            readFile(entry.path()));
      EXPECT_EQ(a.code, 200) << name << ": " << a.body << "\n" << controller_.process->log();
    }
    EXPECT_GE(pools.size(), 4u);
    return pools;
  }

  // Withdraws `pools` (without waiting), so that the next test publishes
  // the examples anew.
  void withdraw(const std::vector<std::pair<std::string, std::string>>& pools) {
    for (const auto& [driver, pool] : pools) {
      ServiceEnv::http("DELETE", controller_.poolUrl(driver, pool));
    }
  }

  ServiceEnv env_;
  fs::path dir_;
  ControllerProcess controller_;
};

TEST_F(KubeconfigTest, ExecPluginCredentialRefreshedAfter401AndAfterItExpires) {
  // Run 1 prints a token the server rejects (valid for an hour: only the 401
  // can make the controller ask again); run 2 the admin's token for a few
  // seconds; later runs the admin's token for an hour.
  const fs::path runs = dir_ / "runs";
  const fs::path plugin = dir_ / "bin" / "get-token";
  writeFile(plugin,
            "#!/bin/sh\n"
            "n=$(cat '" +
                runs.string() +
                "' 2>/dev/null || echo 0)\n"
                "n=$((n + 1))\n"
                "echo $n > '" +
                runs.string() +
                "'\n"
                "echo \"$KUBERNETES_EXEC_INFO\" > '" +
                (dir_ / "exec-info").string() +
                "'\n"
                "[ \"$1\" = get-token ] && [ \"$PLUGIN_MODE\" = test ] || exit 2\n"
                "token=$(cat '" +
                (kCluster->dir() / "tokens" / "admin").string() +
                "')\n"
                "life=3600\n"
                "[ $n -eq 1 ] && token=rejected-by-the-server\n"
                "[ $n -eq 2 ] && life=" +
                std::to_string(kShortLifetimeSeconds) +
                "\n"
                "expiry=$(date -u -d \"+$life seconds\" +%Y-%m-%dT%H:%M:%SZ)\n"
                "echo \"$expiry\" > '" +
                (dir_ / "expiry").string() +
                "'-$n\n"
                "printf '{\"apiVersion\": \"client.authentication.k8s.io/v1\", \"kind\": "
                "\"ExecCredential\", \"status\": {\"token\": \"%s\", \"expirationTimestamp\": "
                "\"%s\"}}' \"$token\" \"$expiry\"\n");
  fs::permissions(plugin, fs::perms::owner_all);
  const fs::path config = dir_ / "kubeconfig";
  writeFile(config, kubeconfig("    extensions:\n"
                               "    - name: client.authentication.k8s.io/exec\n"
                               "      extension: {audience: test}\n",
                               "    exec:\n"
                               "      apiVersion: client.authentication.k8s.io/v1\n"
                               "      command: bin/get-token\n"
                               "      args: [get-token]\n"
                               "      env: [{name: PLUGIN_MODE, value: test}]\n"
                               "      interactiveMode: Never\n"
                               "      provideClusterInfo: true\n"
                               "      installHint: the test writes it\n"));
  controller_ = env_.startController(
      "exec", {"--kubeconfig=" + config.string(), "--context=working", "--auth=none", "-v=2"});
  ASSERT_TRUE(controller_.process->running()) << controller_.process->log();

  const auto pools = publishExamples();
  for (const auto& [driver, pool] : pools) {
    EXPECT_FALSE(env_.poolSlices(driver, pool).empty()) << driver << "/" << pool;
  }
  const Json info = Json::parse(readFile(dir_ / "exec-info"), nullptr, false);
  EXPECT_EQ(info["spec"]["interactive"], false);
  EXPECT_EQ(info["spec"]["cluster"]["server"], kCluster->server());
  EXPECT_EQ(info["spec"]["cluster"]["config"]["audience"], "test");
  EXPECT_EQ(info["spec"]["cluster"]["certificate-authority-data"],
            client::encodeBase64(readFile(kCluster->caFile())));

  // The rejected token cost one more run; run 2's credential expires
  // within seconds of the start.
  ASSERT_GE(std::stoi(readFile(runs)), 2) << controller_.process->log();
  const std::string expiry = readFile(dir_ / "expiry-2");
  std::printf("credential of run 2 expires at %s", expiry.c_str());
  std::this_thread::sleep_for(seconds(kShortLifetimeSeconds + 1));

  // After the expiry, a withdrawal needs the API server: the plugin runs a
  // third time (and, its credential lasting an hour, no more).
  const auto& [driver, pool] = pools.front();
  const HttpAnswer withdrawn = ServiceEnv::http("DELETE", controller_.poolUrl(driver, pool));
  EXPECT_TRUE(withdrawn.code == 200 || withdrawn.code == 202) << withdrawn.body;
  EXPECT_TRUE(ServiceEnv::eventually([&] { return env_.poolSlices(driver, pool).empty(); }))
      << controller_.process->log();
  EXPECT_EQ(std::stoi(readFile(runs)), 3) << controller_.process->log();
  EXPECT_NE(controller_.process->log().find("exec credential plugin gave a credential"),
            std::string::npos);
  // Each of the three runs gave a credential, and was counted so.
  EXPECT_EQ(env_.metric(controller_,
                        R"(rest_client_exec_plugin_call_total{call_status="no_error",code="0"})"),
            3.0);

  withdraw(pools);
}

TEST_F(KubeconfigTest, ExecPluginClientCertificateAuthenticates) {
  // The plugin answers with the admin's client certificate and no token:
  // without it every request would be anonymous and refused.
  const Json answer = {{"apiVersion", "client.authentication.k8s.io/v1beta1"},
                       {"kind", "ExecCredential"},
                       {"status",
                        {{"clientCertificateData", readFile(kCluster->dir() / "pki" / "admin.crt")},
                         {"clientKeyData", readFile(kCluster->dir() / "pki" / "admin.key")}}}};
  writeFile(dir_ / "answer.json", answer.dump());
  const fs::path plugin = dir_ / "cert-plugin";
  writeFile(plugin, "#!/bin/sh\ncat '" + (dir_ / "answer.json").string() + "'\n");
  fs::permissions(plugin, fs::perms::owner_all);
  const fs::path config = dir_ / "kubeconfig";
  writeFile(config, kubeconfig("",
                               "    exec:\n"
                               "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                               "      command: " +
                                   plugin.string() + "\n"));
  controller_ = env_.startController(
      "exec-cert", {"--kubeconfig=" + config.string(), "--context=working", "--auth=none"});
  const auto pools = publishExamples();
  EXPECT_NE(controller_.process->log().find("clientCertificate=\"yes\""), std::string::npos);
  withdraw(pools);
}

TEST_F(KubeconfigTest, MissingPluginFailsAtStartupWithItsInstallHint) {
  const fs::path config = dir_ / "kubeconfig";
  writeFile(config, kubeconfig("",
                               "    exec:\n"
                               "      apiVersion: client.authentication.k8s.io/v1beta1\n"
                               "      command: rsc-no-such-credential-plugin\n"
                               "      installHint: |\n"
                               "        Install it with: apt-get install rsc-plugin\n"));
  Process process(
      {(ClusterEnvironment::buildRoot() / "controller/resourceslice-controller").string(),
       "--kubeconfig=" + config.string(), "--context=working", "--metrics-bind-address=0",
       "--health-probe-bind-address=0",
       "--inventory-bind-address=127.0.0.1:" + std::to_string(freePort())},
      dir_ / "missing.log");
  EXPECT_EQ(process.wait(seconds(20)), 2) << process.log();
  EXPECT_NE(process.log().find("users[0].user.exec.command: executable "
                               "\"rsc-no-such-credential-plugin\" not found in $PATH"),
            std::string::npos)
      << process.log();
  EXPECT_NE(process.log().find("Install it with: apt-get install rsc-plugin"), std::string::npos)
      << process.log();
}

TEST_F(KubeconfigTest, ProxyUrlTunnelsEveryConnectionThroughConnect) {
  ConnectProxy proxy;
  const fs::path config = dir_ / "kubeconfig";
  writeFile(config,
            kubeconfig("    proxy-url: http://tester:s%40cret@127.0.0.1:" +
                           std::to_string(proxy.port()) + "\n",
                       "    tokenFile: " + (kCluster->dir() / "tokens" / "admin").string() + "\n"));
  controller_ = env_.startController(
      "proxy", {"--kubeconfig=" + config.string(), "--context=working", "--auth=none"});
  const auto pools = publishExamples();
  const std::string api_host = kCluster->server().substr(std::string("https://").size());
  const auto targets = proxy.targets();
  ASSERT_FALSE(targets.empty()) << controller_.process->log();
  for (const std::string& t : targets) EXPECT_EQ(t, "CONNECT " + api_host);
  for (const std::string& a : proxy.authorizations()) {
    EXPECT_EQ(a, "Basic " + client::encodeBase64("tester:s@cret"));
  }
  std::printf("%zu tunnels through the proxy\n", targets.size());
  withdraw(pools);
}

TEST_F(KubeconfigTest, TlsServerNameIsTheNameTheCertificateIsCheckedFor) {
  // The server's certificate names kubernetes.default.svc, not
  // elsewhere.example.com; the URL's 127.0.0.1 would pass either way.
  struct Case {
    std::string name;
    bool works;
  };
  for (const Case& c :
       {Case{"kubernetes.default.svc", true}, Case{"elsewhere.example.com", false}}) {
    const fs::path file = dir_ / ("kubeconfig-" + c.name);
    writeFile(file, kubeconfig("    tls-server-name: " + c.name + "\n",
                               "    tokenFile: " + (kCluster->dir() / "tokens" / "admin").string() +
                                   "\n"));
    const StatusOr<client::ClientConfig> config = client::loadKubeconfig({file}, "working");
    ASSERT_TRUE(config.ok()) << config.status().toString();
    EXPECT_EQ(config->tls_server_name, c.name);
    auto transport = client::CpprestTransport::create(*config, RealClock::instance());
    ASSERT_TRUE(transport.ok()) << transport.status().toString();
    client::HttpRequest request;
    request.path_and_query = "/version";
    const StatusOr<client::HttpResponse> answer = (*transport)->send(request);
    if (c.works) {
      ASSERT_TRUE(answer.ok()) << answer.status().toString();
      EXPECT_EQ(answer->code, 200) << answer->body;
    } else {
      ASSERT_FALSE(answer.ok()) << "answered " << answer->code;
      EXPECT_EQ(answer.status().reason(), client::kReasonRequestNotSent)
          << answer.status().toString();
    }
  }
}

}  // namespace
}  // namespace rsc::testing
