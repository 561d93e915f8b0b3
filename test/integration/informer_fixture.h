// What the Informer's integration tests share (informer_test, informer_gone_test):
// slices labelled by test case, a Recorder of handler calls and watch restarts,
// and a fixture with an admin connection to the binary's cluster that runs one
// Informer. The Recorder is fed on the informer's thread and read by the
// test's; the rest is used from the test's thread only.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "client/http_transport.h"
#include "client/informer.h"
#include "client/rest_kube_api.h"

namespace rsc::testing {

// The label that keeps each test case to its own slices.
inline constexpr std::string_view kTestLabel = "rsc-test/case";
// Waits on the informer's thread; the server answers within milliseconds, so
// this only bounds a broken test.
inline constexpr auto kWait = std::chrono::seconds(60);

// A one-device slice of `pool`, labelled with `test_case`, named by the server.
client::ResourceSlice newSlice(const std::string& test_case, const std::string& pool);

// Handler calls as lines ("add <name>", "update <name>", "delete <name>"),
// and watch restarts by reason.
class Recorder {
 public:
  client::InformerHandlers<client::ResourceSlices> handlers();
  void restarted(std::string_view reason);
  // Each waits up to kWait; false if it did not happen.
  bool waitFor(const std::string& line);
  bool waitForRestarts(const std::string& reason, int n);
  std::vector<std::string> lines();
  std::map<std::string, int> restarts();

 private:
  void record(std::string line);

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  std::map<std::string, int> restarts_;
};

class InformerIntegration : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Watches only the slices of `test_case`, reporting restarts to recorder_.
  client::InformerOptions<client::ResourceSlices> optionsFor(const std::string& test_case);
  // Starts informer_ over the fixture's connection, or over `api`.
  void start(client::InformerOptions<client::ResourceSlices> options);
  void start(client::InformerOptions<client::ResourceSlices> options, client::KubeApi& api);
  client::ResourceSlice create(const std::string& test_case, const std::string& pool);

  std::unique_ptr<client::CpprestTransport> transport_;
  std::unique_ptr<client::RestKubeApi> api_;
  Recorder recorder_;
  std::unique_ptr<client::Informer<client::ResourceSlices>> informer_;
};

}  // namespace rsc::testing
