#include "controller/flags.h"

#include <gtest/gtest.h>

#include <chrono>

#include "client/config.h"
#include "client/event_recorder.h"
#include "controller/inventory/authenticator.h"
#include "controller/inventory/certificate_secret.h"
#include "controller/inventory/handler.h"
#include "controller/inventory/http_server.h"
#include "controller/leader/leader_elector.h"
#include "controller/pull/poller.h"
#include "controller/reconcile/controller.h"

namespace rsc::controller {
namespace {

// A flag's default and the default of the option it sets are written in two
// places (flags.h, and the component's Options, which its tests and other
// embedders use): they must not drift apart.
TEST(Flags, DefaultsAreTheDefaultsOfTheOptionsTheySet) {
  const ServiceFlags f;
  using std::chrono::milliseconds;
  const leader::LeaderElectionOptions leader;
  EXPECT_EQ(f.leader_elect_lease_duration, leader.lease_duration);
  EXPECT_EQ(f.leader_elect_renew_deadline, leader.renew_deadline);
  EXPECT_EQ(f.leader_elect_retry_period, leader.retry_period);
  const inventory::CertificateSecretOptions certificates;
  EXPECT_EQ(f.inventory_tls_validity, certificates.validity);
  EXPECT_EQ(f.inventory_tls_sync_interval, certificates.sync_interval);
  const inventory::HttpServerOptions server;
  EXPECT_EQ(f.max_request_bytes, server.max_request_bytes);
  EXPECT_EQ(f.inventory_max_connections, server.max_connections);
  EXPECT_EQ(f.inventory_max_connections_per_client, server.max_connections_per_client);
  EXPECT_EQ(f.inventory_max_inflight_body_bytes, server.max_inflight_body_bytes);
  EXPECT_EQ(f.inventory_header_timeout, server.header_timeout);
  EXPECT_EQ(f.inventory_body_timeout, server.body_timeout);
  EXPECT_EQ(f.inventory_idle_timeout, server.idle_timeout);
  const inventory::InventoryHandlerOptions handler;
  EXPECT_EQ(f.max_request_bytes, handler.max_body_bytes);
  EXPECT_EQ(f.max_decoded_bytes, handler.max_decoded_bytes);
  EXPECT_EQ(f.allow_unbound_node_pools, handler.allow_unbound_node_pools);
  const inventory::TokenReviewAuthenticatorOptions auth;
  EXPECT_EQ(f.auth_review_qps, auth.review_qps);
  EXPECT_EQ(f.auth_review_burst, auth.review_burst);
  EXPECT_EQ(f.auth_client_review_qps, auth.client_review_qps);
  EXPECT_EQ(f.auth_client_review_burst, auth.client_review_burst);
  const client::ExecRunOptions exec;
  EXPECT_EQ(f.exec_plugin_timeout, exec.timeout);
  EXPECT_EQ(f.exec_plugin_max_output_bytes, exec.max_output_bytes);
  const client::EventRecorderOptions events;
  EXPECT_EQ(f.event_qps, events.qps);
  EXPECT_EQ(f.event_burst, events.burst);
  EXPECT_EQ(f.event_queue_size, events.queue_size);
  const reconcile::ControllerOptions controller;
  EXPECT_EQ(f.workers, controller.workers);
  EXPECT_EQ(f.max_parallel_slice_writes, controller.max_parallel_writes);
  EXPECT_EQ(f.adoption_grace, controller.adoption_grace);
  const pull::PollerOptions poller;
  EXPECT_EQ(f.pull_interval, poller.interval);
  EXPECT_EQ(f.pull_grace, poller.grace);
  EXPECT_EQ(f.pull_max_sources, poller.max_sources);
  EXPECT_EQ(f.pull_timeout, poller.fetch.timeout);
  EXPECT_EQ(f.max_request_bytes, poller.fetch.max_body_bytes);
  EXPECT_EQ(f.max_decoded_bytes, poller.fetch.max_decoded_bytes);
  // On purpose not the client library's default (client::kDefaultQps, as
  // controller-runtime's 20/30): the controller writes many slices at once.
  EXPECT_GT(f.kube_api_qps, client::kDefaultQps);
  EXPECT_GT(f.kube_api_burst, client::kDefaultBurst);
}

TEST(PullFlags, DefaultsAreNoSourcesEveryThirtySeconds) {
  StatusOr<ServiceFlags> f = parseFlags({});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->inventory_sources.empty());
  EXPECT_EQ(f->pull_interval, std::chrono::seconds(30));
  EXPECT_EQ(f->pull_timeout, std::chrono::seconds(10));
  EXPECT_EQ(f->pull_grace, std::chrono::milliseconds::zero()) << "0: three intervals";
}

TEST(PullFlags, SourcesRepeatInOrder) {
  StatusOr<ServiceFlags> f =
      parseFlags({"--inventory-source=nic.example.com=http://nic:9000/v1/inventory",
                  "--inventory-source", "gpu.example.com=https://gpu.ns.svc:8443",
                  "--pull-interval=1m", "--pull-timeout=5s", "--pull-grace=5m"});
  ASSERT_TRUE(f.ok()) << f.status().toString();
  ASSERT_EQ(f->inventory_sources.size(), 2u);
  EXPECT_EQ(f->inventory_sources[0].first, "nic.example.com");
  EXPECT_EQ(f->inventory_sources[0].second, "http://nic:9000/v1/inventory");
  EXPECT_EQ(f->inventory_sources[1].first, "gpu.example.com");
  EXPECT_EQ(f->inventory_sources[1].second, "https://gpu.ns.svc:8443");
  EXPECT_EQ(f->pull_interval, std::chrono::minutes(1));
  EXPECT_EQ(f->pull_timeout, std::chrono::seconds(5));
  EXPECT_EQ(f->pull_grace, std::chrono::minutes(5));
}

TEST(PullFlags, BadValuesNameTheFlag) {
  const auto error = [](std::vector<std::string> args) {
    StatusOr<ServiceFlags> f = parseFlags(args);
    return f.ok() ? std::string("accepted") : f.status().message();
  };
  EXPECT_NE(error({"--inventory-source=nic.example.com"})
                .find("--inventory-source: must be "
                      "DRIVER=URL"),
            std::string::npos);
  EXPECT_NE(error({"--inventory-source==http://x"}).find("--inventory-source"), std::string::npos);
  EXPECT_NE(error({"--inventory-source=a.example.com=http://x",
                   "--inventory-source=a.example.com=http://y"})
                .find("has a source already"),
            std::string::npos);
  EXPECT_NE(error({"--pull-interval=500ms"}).find("--pull-interval: must be at least 1s"),
            std::string::npos);
  EXPECT_NE(error({"--pull-timeout=10ms"}).find("--pull-timeout"), std::string::npos);
  EXPECT_NE(error({"--pull-timeout=1m"}).find("--pull-timeout must not be longer"),
            std::string::npos);
  EXPECT_NE(error({"--pull-grace=10s"}).find("--pull-grace must be at least --pull-interval"),
            std::string::npos);
  EXPECT_NE(error({"--pull-grace=0s"}).find("--pull-grace: must be at least 1s"),
            std::string::npos);
}

TEST(PullFlags, DiscoveryNamespacesAndEndpointCredentials) {
  StatusOr<ServiceFlags> f = parseFlags({});
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->pull_discovery);
  EXPECT_TRUE(f->pull_namespaces.empty()) << "every namespace";
  EXPECT_EQ(f->pull_max_sources, 10000u);
  f = parseFlags({"--pull-discovery", "--pull-namespace=nic-system", "--pull-namespace",
                  "gpu-system", "--pull-namespace=nic-system", "--pull-max-sources=50",
                  "--pull-ca-file=/etc/pull/ca.crt", "--pull-token-file=/var/run/pull/token"});
  ASSERT_TRUE(f.ok()) << f.status().toString();
  EXPECT_TRUE(f->pull_discovery);
  EXPECT_EQ(f->pull_namespaces, (std::vector<std::string>{"nic-system", "gpu-system"}));
  EXPECT_EQ(f->pull_max_sources, 50u);
  EXPECT_EQ(f->pull_ca_file, "/etc/pull/ca.crt");
  EXPECT_EQ(f->pull_token_file, "/var/run/pull/token");

  const auto error = [](std::vector<std::string> args) {
    StatusOr<ServiceFlags> f = parseFlags(args);
    return f.ok() ? std::string("accepted") : f.status().message();
  };
  EXPECT_NE(error({"--pull-namespace=nic-system"}).find("needs --pull-discovery"),
            std::string::npos);
  EXPECT_NE(error({"--pull-discovery", "--pull-namespace=Not_A_Namespace"})
                .find("--pull-namespace: namespace \"Not_A_Namespace\""),
            std::string::npos)
      << error({"--pull-discovery", "--pull-namespace=Not_A_Namespace"});
  EXPECT_NE(error({"--pull-max-sources=0"}).find("--pull-max-sources"), std::string::npos);
  EXPECT_NE(error({"--pull-token-file="}).find("--pull-token-file"), std::string::npos);
}

TEST(PullFlags, HelpShowsThemWithDefaults) {
  const std::string usage = flagsUsage();
  EXPECT_NE(usage.find("--inventory-source value"), std::string::npos);
  EXPECT_NE(usage.find("(default 30s)"), std::string::npos);
  EXPECT_NE(usage.find("--pull-grace value"), std::string::npos);
}

}  // namespace
}  // namespace rsc::controller
