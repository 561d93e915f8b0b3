#include "client/names.h"

#include <gtest/gtest.h>

#include <string>

namespace rsc::client {
namespace {

struct NameCase {
  std::string text;
  bool valid;
};

void expectCases(const char* rule, Status (*check)(std::string_view),
                 const std::vector<NameCase>& cases) {
  for (const NameCase& c : cases) {
    const Status error = check(c.text);
    EXPECT_EQ(error.ok(), c.valid) << rule << "(\"" << c.text << "\"): " << error.toString();
    if (!error.ok()) {
      EXPECT_EQ(error.code(), StatusCode::kInvalidArgument) << error.toString();
    }
  }
}

TEST(Names, DnsLabel) {
  expectCases("dnsLabel", dnsLabelError,
              {{"gpu-0", true},
               {"a", true},
               {"0", true},
               {std::string(63, 'a'), true},
               {std::string(64, 'a'), false},
               {"", false},
               {"-a", false},
               {"a-", false},
               {"Gpu", false},
               {"a.b", false},
               {"a_b", false}});
}

TEST(Names, DnsSubdomain) {
  expectCases("dnsSubdomain", dnsSubdomainError,
              {{"node-a", true},
               {"a.b.c", true},
               {std::string(253, 'a'), true},
               {std::string(254, 'a'), false},
               {"a..b", false},
               {".a", false},
               {"a.", false},
               {"a.-b", false},
               {"A.b", false},
               {"", false}});
}

TEST(Names, DriverNameIsALowercaseSubdomainOfAtMost63) {
  expectCases("driverName", driverNameError,
              {{"gpu.example.com", true},
               {"dra.example", true},
               {std::string(63, 'a'), true},
               {std::string(64, 'a'), false},
               {"GPU.example.com", false},
               {"gpu_example", false},
               {"", false}});
}

TEST(Names, PoolNameAllowsSlashSeparatedSubdomains) {
  expectCases("poolName", poolNameError,
              {{"node-a", true},
               {"rack-1/node-a", true},
               {"a.b/c.d/e", true},
               {std::string(253, 'a'), true},
               {std::string(126, 'a') + "/" + std::string(126, 'b'), true},
               {std::string(254, 'a'), false},
               {"/a", false},
               {"a/", false},
               {"a//b", false},
               {"Node-A", false},
               {"a b", false},
               {"", false}});
}

TEST(Names, DeviceQualifiedName) {
  expectCases("deviceQualifiedName", deviceQualifiedNameError,
              {{"model", true},
               {"_x", true},
               {"cudaComputeCapability", true},
               {"resource.kubernetes.io/pcieRoot", true},
               {"gpu.example.com/memory_GiB", true},
               {std::string(32, 'a'), true},
               {std::string(33, 'a'), false},
               {"0model", false},
               {"model-name", false},
               {"a/b/c", false},
               {"/model", false},
               {"example.com/", false},
               {std::string(64, 'a') + "/x", false},
               {"Example.com/x", false},
               {"", false}});
}

TEST(Names, LabelKeyAndValue) {
  expectCases("labelKey", labelKeyError,
              {{"maintenance", true},
               {"gpu.example.com/maintenance", true},
               {"a_b.c-d", true},
               {"A", true},
               {std::string(63, 'a'), true},
               {std::string(64, 'a'), false},
               {"-a", false},
               {"a/b/c", false},
               {"/a", false},
               {"a/", false},
               {"", false}});
  expectCases("labelValue", labelValueError,
              {{"", true},
               {"ecc-errors", true},
               {"A.b_c", true},
               {std::string(63, 'a'), true},
               {std::string(64, 'a'), false},
               {"a b", false},
               {"-a", false}});
}

TEST(Names, Semver) {
  expectCases("semver", semverError,
              {{"1.2.3", true},
               {"0.0.0", true},
               {"12.8.0", true},
               {"1.0.0-rc.1", true},
               {"1.0.0-alpha-1.x", true},
               {"1.0.0+build.5", true},
               {"1.0.0-rc.1+build.5", true},
               {"570.124.6", true},
               {"1.2", false},
               {"1.2.3.4", false},
               {"01.2.3", false},
               {"1.2.3-01", false},
               {"1.2.3-", false},
               {"1.2.3+", false},
               {"1.2.3-a..b", false},
               {"v1.2.3", false},
               {"", false}});
}

}  // namespace
}  // namespace rsc::client
