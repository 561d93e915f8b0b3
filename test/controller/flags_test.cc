#include "controller/flags.h"

#include <gtest/gtest.h>

namespace rsc::controller {
namespace {

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
