// ClusterEnvironment: one real kube-apiserver + etcd (test/cluster) per
// integration test binary, started before the first test and stopped after
// the last, also when tests fail; if the binary crashes, the cluster's
// watchdog stops it. Tests reach it through ClusterEnvironment::get().
// Set up and torn down on the main thread; the accessors are thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace rsc::testing {

class ClusterEnvironment : public ::testing::Environment {
 public:
  // Registers the environment with gtest; call once from main() or a static
  // initializer. `apiserver_args` are extra kube-apiserver flags this binary's
  // cluster needs ("--watch-cache=false"); they follow any flags from
  // TESTCLUSTER_APISERVER_ARGS (see test/cluster/start). Returns it for
  // convenience.
  static ClusterEnvironment* install(std::vector<std::string> apiserver_args = {});
  // Returns the installed environment (set up by the time tests run).
  static ClusterEnvironment& get();

  void SetUp() override;
  void TearDown() override;

  const std::filesystem::path& dir() const { return dir_; }
  // "https://127.0.0.1:PORT".
  const std::string& server() const { return server_; }
  // etcd's client URL, "http://127.0.0.1:PORT".
  std::string etcdServer() const;
  std::filesystem::path kubeconfig() const { return dir_ / "kubeconfig"; }
  std::filesystem::path caFile() const { return dir_ / "pki" / "ca.crt"; }
  // The bearer token of a static identity: admin, nobody, node-a, node-b.
  std::string token(const std::string& identity) const;
  // The root of the source tree (to find test/cluster and the binaries).
  static std::filesystem::path sourceRoot();
  // The build folder (where controller/resourceslice-controller is).
  static std::filesystem::path buildRoot();

 private:
  std::vector<std::string> apiserver_args_;
  std::filesystem::path dir_;
  std::string server_;
};

}  // namespace rsc::testing
