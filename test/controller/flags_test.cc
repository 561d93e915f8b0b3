#include "controller/flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "client/config.h"
#include "client/event_recorder.h"
#include "controller/http/http_server.h"
#include "controller/inventory/authenticator.h"
#include "controller/inventory/certificate_secret.h"
#include "controller/inventory/handler.h"
#include "controller/leader/leader_elector.h"
#include "controller/pull/poller.h"
#include "controller/reconcile/controller.h"

namespace rsc::controller {
namespace {

// Each flag sets the option of the component it is bound to; main() hands
// those Options on as they are.
TEST(Flags, EachSetsTheOptionItIsBoundTo) {
  StatusOr<ServiceFlags> f = parseFlags({
      "--kube-api-qps=7",
      "--kube-api-burst=9",
      "--kube-api-call-timeout=45s",
      "--exec-plugin-timeout=5s",
      "--exec-plugin-max-output-bytes=8192",
      "--leader-election-namespace=kube-system",
      "--leader-election-id=dra-lease",
      "--leader-elect-lease-duration=30s",
      "--leader-elect-renew-deadline=20s",
      "--leader-elect-retry-period=4s",
      "--identity=replica-1",
      "--inventory-bind-address=:9443",
      "--max-request-bytes=4096",
      "--max-decoded-bytes=65536",
      "--inventory-max-connections=10",
      "--inventory-max-connections-per-client=3",
      "--inventory-max-inflight-body-bytes=2048",
      "--inventory-header-timeout=2s",
      "--inventory-body-timeout=3s",
      "--inventory-idle-timeout=4s",
      "--inventory-tls-secret=tls",
      "--inventory-ca-configmap=ca",
      "--inventory-ca-namespaces=gpu-system,nic-system",
      "--inventory-tls-names=svc.ns,10.0.0.1",
      "--inventory-tls-validity=48h",
      "--inventory-tls-sync-interval=10s",
      "--inventory-ca-file=/etc/ca.crt",
      "--inventory-server-name=svc.ns.svc",
      "--allow-unbound-node-pools",
      "--auth-review-qps=5",
      "--auth-review-burst=6",
      "--auth-client-review-qps=0",
      "--auth-client-review-burst=2",
      "--token-audience=drivers",
      "--event-namespace=dra",
      "--event-qps=2",
      "--event-burst=3",
      "--event-queue-size=50",
      "--workers=8",
      "--max-parallel-slice-writes=2",
      "--adoption-grace=5m",
  });
  ASSERT_TRUE(f.ok()) << f.status().toString();
  using std::chrono::seconds;
  EXPECT_EQ(f->kube_api.qps, 7);
  EXPECT_EQ(f->kube_api.burst, 9);
  EXPECT_EQ(f->kube_api.call_timeout, seconds(45));
  EXPECT_EQ(f->exec_plugin.timeout, seconds(5));
  EXPECT_EQ(f->exec_plugin.max_output_bytes, 8192u);

  const leader::LeaderElectionOptions& leader = f->leader_election;
  EXPECT_EQ(leader.lease_namespace, "kube-system");
  EXPECT_EQ(leader.lease_name, "dra-lease");
  EXPECT_EQ(leader.lease_duration, seconds(30));
  EXPECT_EQ(leader.renew_deadline, seconds(20));
  EXPECT_EQ(leader.retry_period, seconds(4));
  EXPECT_EQ(leader.identity, "replica-1");

  const http::HttpServerOptions& server = f->inventory_server;
  EXPECT_EQ(server.bind_address, ":9443");
  EXPECT_EQ(server.max_connections, 10u);
  EXPECT_EQ(server.max_connections_per_client, 3u);
  EXPECT_EQ(server.max_inflight_body_bytes, 2048u);
  EXPECT_EQ(server.header_timeout, seconds(2));
  EXPECT_EQ(server.body_timeout, seconds(3));
  EXPECT_EQ(server.idle_timeout, seconds(4));
  // One body limit for the server, the handler and pulled inventories.
  EXPECT_EQ(server.max_request_bytes, 4096u);
  EXPECT_EQ(f->inventory.max_body_bytes, 4096u);
  EXPECT_EQ(f->pull.fetch.max_body_bytes, 4096u);
  EXPECT_EQ(f->inventory.max_decoded_bytes, 65536u);
  EXPECT_EQ(f->pull.fetch.max_decoded_bytes, 65536u);
  EXPECT_TRUE(f->inventory.allow_unbound_node_pools);
  EXPECT_TRUE(f->pull.fetch.allow_unbound_node_pools);

  const inventory::CertificateSecretOptions& certificates = f->certificates;
  EXPECT_EQ(certificates.secret_name, "tls");
  EXPECT_EQ(certificates.config_map_name, "ca");
  EXPECT_EQ(certificates.config_map_namespaces,
            (std::vector<std::string>{"gpu-system", "nic-system"}));
  EXPECT_EQ(certificates.names, (std::vector<std::string>{"svc.ns", "10.0.0.1"}));
  EXPECT_EQ(certificates.validity, std::chrono::hours(48));
  EXPECT_EQ(certificates.sync_interval, seconds(10));
  EXPECT_EQ(f->forwarding.ca_file, "/etc/ca.crt");
  EXPECT_EQ(f->forwarding.tls_server_name, "svc.ns.svc");

  const inventory::TokenReviewAuthenticatorOptions& auth = f->auth_review;
  EXPECT_EQ(auth.review_qps, 5);
  EXPECT_EQ(auth.review_burst, 6);
  EXPECT_EQ(auth.client_review_qps, 0) << "0: no per-client limit";
  EXPECT_EQ(auth.client_review_burst, 2);
  EXPECT_EQ(auth.audience, "drivers");

  EXPECT_EQ(f->event_recorder.cluster_namespace, "dra");
  EXPECT_EQ(f->event_recorder.qps, 2);
  EXPECT_EQ(f->event_recorder.burst, 3);
  EXPECT_EQ(f->event_recorder.queue_size, 50u);
  EXPECT_EQ(f->controller.workers, 8);
  EXPECT_EQ(f->controller.max_parallel_writes, 2);
  EXPECT_EQ(f->controller.adoption_grace, std::chrono::minutes(5));
}

// The defaults that are the service's own, not its components'.
TEST(Flags, ServiceDefaults) {
  const ServiceFlags f;
  // Above the client library's (controller-runtime's 20/30): the controller
  // writes many slices at once.
  EXPECT_GT(f.kube_api.qps, client::kDefaultQps);
  EXPECT_GT(f.kube_api.burst, client::kDefaultBurst);
  EXPECT_EQ(f.leader_election.lease_name, "resourceslice-controller");
  EXPECT_EQ(f.inventory_server.bind_address, ":8082");
  EXPECT_EQ(f.auth_review.audience, "resourceslice-controller");
  // The rest are the components' own.
  EXPECT_EQ(f.inventory_server.max_connections, http::HttpServerOptions().max_connections);
}

// --workers follows the client's budget unless given: as many reconciles as
// requests the token bucket lets out at once, between the idle workers and 64.
TEST(Flags, WorkersFollowTheApiBurstUnlessGiven) {
  const auto workers = [](std::vector<std::string> args) {
    StatusOr<ServiceFlags> f = parseFlags(args);
    return f.ok() ? f->controller.workers : -1;
  };
  EXPECT_EQ(workers({}), 64) << "--kube-api-burst=100 by default";
  EXPECT_EQ(workers({"--kube-api-burst=10"}), 10);
  EXPECT_EQ(workers({"--kube-api-burst=2"}), reconcile::kDefaultIdleWorkers);
  EXPECT_EQ(workers({"--kube-api-burst=1000"}), reconcile::kMaxDefaultWorkers);
  EXPECT_EQ(workers({"--kube-api-burst=1000", "--workers=200"}), 200) << "given, it is kept";
  EXPECT_EQ(workers({"--workers=2"}), 2);
}

TEST(Flags, HelpShowsTheComponentsDefaults) {
  const std::string usage = flagsUsage();
  EXPECT_NE(usage.find("--leader-elect-lease-duration value\n"
                       "      How long a leader's Lease is valid without renewal. (default 15s)"),
            std::string::npos)
      << usage;
  EXPECT_NE(usage.find("(default resourceslice-controller)"), std::string::npos);
  EXPECT_NE(usage.find("Most pools reconciled at the same time. 4 workers wait for work; more "
                       "start while pools wait and none is free, and end after 30s without "
                       "work. (default --kube-api-burst, between 4 and 64)\n"),
            std::string::npos)
      << usage;
  EXPECT_NE(usage.find("--inventory-bind-address value\n      Address of the inventory API "
                       "drivers push to. (default :8082)"),
            std::string::npos);
  EXPECT_NE(usage.find("(default 8760h)"), std::string::npos) << "--inventory-tls-validity";
}

TEST(Flags, RefusalsNameTheFlag) {
  const auto error = [](std::vector<std::string> args) {
    StatusOr<ServiceFlags> f = parseFlags(args);
    return f.ok() ? std::string("accepted") : f.status().message();
  };
  EXPECT_EQ(error({"--auth=basic"}), "flag --auth: must be tokenreview or none, not \"basic\"");
  EXPECT_EQ(error({"--log-format=xml"}), "flag --log-format: must be text or json, not \"xml\"");
  EXPECT_EQ(error({"--workers=0"}), "flag --workers: must be at least 1");
  EXPECT_EQ(error({"--inventory-tls-cert-file=c.pem"}),
            "flags --inventory-tls-cert-file and --inventory-tls-key-file must be given together");
  EXPECT_EQ(error({"--inventory-tls-secret=tls"}),
            "flag --inventory-tls-secret needs --inventory-ca-configmap and --inventory-tls-names");
  EXPECT_EQ(error({"--leader-elect-renew-deadline=20s"}),
            "flag --leader-elect-lease-duration must be longer than --leader-elect-renew-deadline");
  EXPECT_EQ(error({"--context="}), "flag --context: must not be empty");
  EXPECT_EQ(error({"--token-audience=", "--kubeconfig=k"}), "accepted");
}

TEST(PullFlags, DefaultsAreNoSourcesEveryThirtySeconds) {
  StatusOr<ServiceFlags> f = parseFlags({});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->pull.sources.empty());
  EXPECT_EQ(f->pull.interval, std::chrono::seconds(30));
  EXPECT_EQ(f->pull.fetch.timeout, std::chrono::seconds(10));
  EXPECT_EQ(f->pull.grace, Clock::Duration::zero()) << "0: three intervals";
}

TEST(PullFlags, SourcesRepeatInOrder) {
  StatusOr<ServiceFlags> f =
      parseFlags({"--inventory-source=nic.example.com=http://nic:9000/v1/inventory",
                  "--inventory-source", "gpu.example.com=https://gpu.ns.svc:8443",
                  "--pull-interval=1m", "--pull-timeout=5s", "--pull-grace=5m"});
  ASSERT_TRUE(f.ok()) << f.status().toString();
  ASSERT_EQ(f->pull.sources.size(), 2u);
  EXPECT_EQ(f->pull.sources[0].driver, "nic.example.com");
  EXPECT_EQ(f->pull.sources[0].id, "flag/nic.example.com");
  EXPECT_EQ(f->pull.sources[0].url, "http://nic:9000/v1/inventory");
  EXPECT_TRUE(f->pull.sources[0].caller.unrestricted) << "the operator named it";
  EXPECT_EQ(f->pull.sources[1].driver, "gpu.example.com");
  EXPECT_EQ(f->pull.sources[1].url, "https://gpu.ns.svc:8443");
  EXPECT_EQ(f->pull.interval, std::chrono::minutes(1));
  EXPECT_EQ(f->pull.fetch.timeout, std::chrono::seconds(5));
  EXPECT_EQ(f->pull.grace, std::chrono::minutes(5));
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

TEST(PullFlags, DiscoveryBindingsAndEndpointCredentials) {
  StatusOr<ServiceFlags> f = parseFlags({});
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->pull_discovery);
  EXPECT_TRUE(f->discovery.bindings.empty());
  EXPECT_EQ(f->pull.max_sources, 10000u);
  f = parseFlags({"--pull-discovery", "--pull-driver=nic.example.com=nic-system/nic-driver,edge",
                  "--pull-driver", "gpu.example.com=gpu-system", "--pull-max-sources=50",
                  "--pull-ca-file=/etc/pull/ca.crt", "--pull-token-file=/var/run/pull/token"});
  ASSERT_TRUE(f.ok()) << f.status().toString();
  EXPECT_TRUE(f->pull_discovery);
  EXPECT_EQ(f->discovery.bindings,
            (std::vector<pull::PullBinding>{{"nic.example.com", "nic-system", "nic-driver"},
                                            {"nic.example.com", "edge", ""},
                                            {"gpu.example.com", "gpu-system", ""}}));
  EXPECT_EQ(f->discovery.namespaces(),
            (std::vector<std::string>{"edge", "gpu-system", "nic-system"}));
  EXPECT_EQ(f->pull.max_sources, 50u);
  EXPECT_EQ(f->pull_ca_file, "/etc/pull/ca.crt");
  EXPECT_EQ(f->pull.credentials.token_file, "/var/run/pull/token");

  const auto error = [](std::vector<std::string> args) {
    StatusOr<ServiceFlags> f = parseFlags(args);
    return f.ok() ? std::string("accepted") : f.status().message();
  };
  // Discovery is declared per driver: never every namespace, never a Service's say-so.
  EXPECT_THAT(error({"--pull-discovery"}),
              ::testing::HasSubstr("--pull-discovery needs at least one --pull-driver"));
  EXPECT_THAT(error({"--pull-driver=nic.example.com=nic-system"}),
              ::testing::HasSubstr("--pull-driver needs --pull-discovery"));
  EXPECT_THAT(error({"--pull-discovery", "--pull-driver=nic.example.com=Not_A_Namespace"}),
              ::testing::HasSubstr("the namespace name \"Not_A_Namespace\""));
  EXPECT_THAT(error({"--pull-discovery", "--pull-driver=nic.example.com=a",
                     "--pull-driver=nic.example.com=b"}),
              ::testing::HasSubstr("is bound already"));
  EXPECT_THAT(error({"--pull-discovery", "--pull-driver=nic.example.com=a",
                     "--inventory-source=nic.example.com=https://nic.example.com"}),
              ::testing::HasSubstr("has an --inventory-source already"));
  EXPECT_THAT(error({"--pull-discovery", "--pull-namespace=nic-system"}),
              ::testing::HasSubstr("was replaced by --pull-driver"));
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
