#include "test/integration/cluster_env.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

namespace rsc::testing {
namespace {

ClusterEnvironment* g_env = nullptr;

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

// Quotes `word` for /bin/sh, so that a flag such as "--x=a#0" arrives as is.
std::string shellQuoted(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return quoted + "'";
}

}  // namespace

ClusterEnvironment* ClusterEnvironment::install(std::vector<std::string> apiserver_args) {
  if (g_env == nullptr) {
    g_env = new ClusterEnvironment();  // owned by gtest
    g_env->apiserver_args_ = std::move(apiserver_args);
    ::testing::AddGlobalTestEnvironment(g_env);
  } else if (!apiserver_args.empty() && apiserver_args != g_env->apiserver_args_) {
    // One cluster per binary: a second, different wish cannot be honoured.
    std::fprintf(stderr, "ClusterEnvironment::install: the cluster's flags are already set\n");
    std::abort();
  }
  return g_env;
}

ClusterEnvironment& ClusterEnvironment::get() { return *g_env; }

std::filesystem::path ClusterEnvironment::sourceRoot() { return RSC_SOURCE_ROOT; }
std::filesystem::path ClusterEnvironment::buildRoot() { return RSC_BUILD_ROOT; }

void ClusterEnvironment::SetUp() {
  char tmpl[] = "/tmp/rsc-cluster-XXXXXX";
  const char* made = mkdtemp(tmpl);
  ASSERT_NE(made, nullptr) << "mkdtemp failed";
  dir_ = made;
  std::string cmd =
      (sourceRoot() / "test/cluster/start").string() + " --owner-pid " + std::to_string(getpid());
  for (const std::string& arg : apiserver_args_) {
    cmd += " " + shellQuoted("--apiserver-arg=" + arg);
  }
  cmd += " " + dir_.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << "could not start the test cluster: " << cmd;
  server_ = readFile(dir_ / "server");
}

void ClusterEnvironment::TearDown() {
  if (dir_.empty()) return;
  const std::string cmd = (sourceRoot() / "test/cluster/stop").string() + " " + dir_.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "could not stop the test cluster: " << cmd;
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string ClusterEnvironment::etcdServer() const { return readFile(dir_ / "etcd"); }

std::string ClusterEnvironment::token(const std::string& identity) const {
  return readFile(dir_ / "tokens" / identity);
}

}  // namespace rsc::testing
