// The service binary and its signals while the API server cannot be reached:
// SIGTERM and SIGINT stop it at once with code 0 before its cache has ever
// synced, with and without leader election; a shutdown that hangs on an API
// server that never answers abandons its calls and still ends cleanly within
// --shutdown-timeout, and a second signal ends it at once (code 1). Needs no cluster: the "API
// server" is a closed loopback port, or a socket that accepts connections and never answers.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "test/integration/cluster_env.h"
#include "test/integration/process.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A loopback socket that completes TCP handshakes (the kernel does) but whose
// owner never reads or answers: requests to it hang until their timeout.
class SilentServer {
 public:
  SilentServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentServer() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class SignalsTest : public ::testing::Test {
 protected:
  // A kubeconfig whose server is http://127.0.0.1:<port>.
  std::string kubeconfig(int port) {
    const std::filesystem::path path = dir_ / ("kubeconfig-" + std::to_string(port));
    std::ofstream out(path);
    out << "apiVersion: v1\nkind: Config\n"
        << "clusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:" << port << "\n"
        << "users:\n- name: u\n  user:\n    token: t\n"
        << "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
        << "current-context: c\n";
    return path.string();
  }

  // Starts the controller against `port` and waits until it has tried to
  // list ResourceSlices (so it is past start-up and blocked on the server).
  std::unique_ptr<Process> start(const std::string& name, int port,
                                 std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {
        (ClusterEnvironment::buildRoot() / "controller/resourceslice-controller").string(),
        "--kubeconfig=" + kubeconfig(port),
        "--auth=none",
        "--inventory-bind-address=127.0.0.1:0",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
        "--leader-election-namespace=default",
        "--v=2",
    };
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = std::make_unique<Process>(argv, dir_ / (name + ".log"));
    EXPECT_TRUE(waitForLog(*p, "\"Serving\"", seconds(30))) << p->log();
    return p;
  }

  static bool waitForLog(Process& p, const std::string& text, milliseconds timeout) {
    return ServiceEnv::eventually(
               [&] { return p.log().find(text) != std::string::npos || !p.running(); }, timeout) &&
           p.log().find(text) != std::string::npos;
  }

  void SetUp() override {
    char tmpl[] = "/tmp/rsc-signals-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }

  std::filesystem::path dir_;
};

TEST_F(SignalsTest, SigtermBeforeTheCacheEverSyncedExitsAtOnceWithZero) {
  const int closed = freePort();
  auto p = start("sigterm", closed);
  ASSERT_TRUE(waitForLog(*p, "informer: list failed", seconds(30))) << p->log();
  p->signal(SIGTERM);
  EXPECT_EQ(p->wait(seconds(10)), 0) << p->log();
}

TEST_F(SignalsTest, SigintWhileCampaigningForTheLeaseExitsAtOnceWithZero) {
  const int closed = freePort();
  auto p = start("sigint-leader", closed, {"--leader-elect"});
  ASSERT_TRUE(waitForLog(*p, "Campaigning", seconds(30))) << p->log();
  p->signal(SIGINT);
  EXPECT_EQ(p->wait(seconds(10)), 0) << p->log();
}

TEST_F(SignalsTest, ShutdownAbandonsCallsStuckOnASilentServerAndExitsCleanly) {
  SilentServer silent;
  auto p = start("stuck", silent.port(), {"--shutdown-timeout=4s"});
  const auto sent = std::chrono::steady_clock::now();
  p->signal(SIGTERM);
  // The informer's list would wait a minute for an answer; three quarters
  // into --shutdown-timeout it is abandoned, and the rest of the shutdown
  // runs to its end instead of being cut off by the watchdog.
  EXPECT_EQ(p->wait(seconds(15)), 0) << p->log();
  EXPECT_LT(std::chrono::steady_clock::now() - sent, seconds(4));
  EXPECT_NE(p->log().find("abandoning API calls under way"), std::string::npos) << p->log();
  EXPECT_NE(p->log().find("\"Stopped\""), std::string::npos) << p->log();
}

TEST_F(SignalsTest, SecondSignalEndsAHangingShutdownAtOnce) {
  SilentServer silent;
  auto p = start("second", silent.port(), {"--shutdown-timeout=60s"});
  p->signal(SIGTERM);
  ASSERT_TRUE(waitForLog(*p, "Shutting down", seconds(10))) << p->log();
  p->signal(SIGTERM);
  EXPECT_EQ(p->wait(seconds(10)), 1) << p->log();
  EXPECT_NE(p->log().find("Second signal"), std::string::npos) << p->log();
}

}  // namespace
}  // namespace rsc::testing
