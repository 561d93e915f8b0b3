#include "test/integration/informer_fixture.h"

#include <algorithm>
#include <utility>

#include "client/config.h"
#include "client/load_config.h"
#include "test/integration/cluster_env.h"

namespace rsc::testing {

using client::ResourceSlice;

ResourceSlice newSlice(const std::string& test_case, const std::string& pool) {
  ResourceSlice slice;
  slice.metadata.generate_name = "rsc-it-informer-" + test_case + "-";
  slice.metadata.labels[std::string(kTestLabel)] = test_case;
  slice.spec.driver = "gpu.example.com";
  slice.spec.pool = client::ResourcePool{pool, 1, 1};
  slice.spec.all_nodes = true;
  client::Device device;
  device.name = "gpu-0";
  device.attributes["model"].string_value = "A100";
  slice.spec.devices.push_back(device);
  return slice;
}

client::InformerHandlers<client::ResourceSlices> Recorder::handlers() {
  client::InformerHandlers<client::ResourceSlices> h;
  h.on_add = [this](const ResourceSlice& s) { record("add " + s.metadata.name); };
  h.on_update = [this](const ResourceSlice&, const ResourceSlice& s) {
    record("update " + s.metadata.name);
  };
  h.on_delete = [this](const ResourceSlice& s) { record("delete " + s.metadata.name); };
  return h;
}

void Recorder::restarted(std::string_view reason) {
  std::lock_guard lock(mu_);
  ++restarts_[std::string(reason)];
  cv_.notify_all();
}

bool Recorder::waitFor(const std::string& line) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(
      lock, kWait, [&] { return std::find(lines_.begin(), lines_.end(), line) != lines_.end(); });
}

bool Recorder::waitForRestarts(const std::string& reason, int n) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, kWait, [&] { return restarts_[reason] >= n; });
}

std::vector<std::string> Recorder::lines() {
  std::lock_guard lock(mu_);
  return lines_;
}

std::map<std::string, int> Recorder::restarts() {
  std::lock_guard lock(mu_);
  return restarts_;
}

void Recorder::record(std::string line) {
  std::lock_guard lock(mu_);
  lines_.push_back(std::move(line));
  cv_.notify_all();
}

void InformerIntegration::SetUp() {
  client::ConfigEnvironment no_environment;  // only the explicit kubeconfig counts
  auto config = client::loadConfig(ClusterEnvironment::get().kubeconfig().string(), no_environment);
  ASSERT_TRUE(config.ok()) << config.status().toString();
  auto transport = client::CpprestTransport::create(*config, RealClock::instance());
  ASSERT_TRUE(transport.ok()) << transport.status().toString();
  transport_ = std::move(transport).value();
  auto api = client::RestKubeApi::create(*transport_, RealClock::instance());
  ASSERT_TRUE(api.ok()) << api.status().toString();
  api_ = std::move(api).value();
}

void InformerIntegration::TearDown() {
  if (informer_) {
    informer_->stop();
  }
}

client::InformerOptions<client::ResourceSlices> InformerIntegration::optionsFor(
    const std::string& test_case) {
  client::InformerOptions<client::ResourceSlices> options;
  options.label_selector = std::string(kTestLabel) + "=" + test_case;
  options.index = [](const ResourceSlice& s) { return s.spec.driver + "/" + s.spec.pool.name; };
  options.on_watch_restart = [this](client::WatchRestart reason) {
    recorder_.restarted(client::watchRestartName(reason));
  };
  return options;
}

void InformerIntegration::start(client::InformerOptions<client::ResourceSlices> options) {
  start(std::move(options), *api_);
}

void InformerIntegration::start(client::InformerOptions<client::ResourceSlices> options,
                                client::KubeApi& api) {
  auto informer = client::Informer<client::ResourceSlices>::create(
      api, RealClock::instance(), std::move(options), recorder_.handlers());
  ASSERT_TRUE(informer.ok()) << informer.status().toString();
  informer_ = std::move(informer).value();
  informer_->start();
}

ResourceSlice InformerIntegration::create(const std::string& test_case, const std::string& pool) {
  auto created = api_->createResourceSlice(newSlice(test_case, pool));
  EXPECT_TRUE(created.ok()) << created.status().toString();
  return created.ok() ? *created : ResourceSlice{};
}

}  // namespace rsc::testing
