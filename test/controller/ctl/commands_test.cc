#include "controller/ctl/commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_http_transport.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class CommandsTest : public ::testing::Test {
 protected:
  StatusOr<int> run(const std::vector<std::string>& args) {
    auto inv = parseArgs(args);
    if (!inv.ok()) return inv.status();
    out_.str("");
    return runCommand(
        *inv, CtlEnv{.inventory = &inventory_, .kube = &kube_, .clock = &clock_, .out = &out_});
  }

  static std::string poolStatus(const std::string& phase, int desired = 1, int published = 1) {
    return Json{{"driver", "gpu.example.com"},
                {"pool", "node-a"},
                {"phase", phase},
                {"desiredGeneration", 0},
                {"publishedGeneration", 1},
                {"desiredVersion", desired},
                {"publishedVersion", published},
                {"sliceNames", {"s-1"}},
                {"droppedFields", Json::array()},
                {"leader", ""}}
        .dump();
  }

  rsc::testing::FakeClock clock_;
  rsc::testing::FakeKubeApi kube_{clock_};
  // The inventory API as a script: each request takes the next answer.
  rsc::testing::FakeHttpTransport inventory_{"rsc.example:8443"};
  std::ostringstream out_;
};

TEST(PushRequestFor, NamesAsTheExamplesAreLaidOut) {
  auto r = pushRequestFor("ex/gpu.example.com-node-a.pool.json", "{}", "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->path(), "/v1/drivers/gpu.example.com/pools/node-a");

  r = pushRequestFor("nic.example.com.driver.json", R"({"pools": {}})", "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->path(), "/v1/drivers/nic.example.com");
  EXPECT_EQ(r->target(), "nic.example.com");

  r = pushRequestFor("node-a.pool.json", "{}", "gpu.example.com");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->path(), "/v1/drivers/gpu.example.com/pools/node-a");

  r = pushRequestFor("gpu.example.com-rack-1.json", "{}", "gpu.example.com");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->target(), "gpu.example.com/rack-1");

  // By shape: {"pools": ...} is a driver.
  r = pushRequestFor("nic.example.com.json", R"({"pools": {}})", "");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->path(), "/v1/drivers/nic.example.com");
}

TEST(PushRequestFor, BadFilesNameTheFile) {
  EXPECT_THAT(pushRequestFor("node-a.pool.json", "{}", "").status().message(),
              HasSubstr("node-a.pool.json: name a pool file DRIVER-POOL.pool.json"));
  EXPECT_THAT(pushRequestFor("x.pool.json", "[1]", "").status().message(),
              HasSubstr("x.pool.json: not a JSON object"));
  EXPECT_THAT(pushRequestFor("x.driver.json", "{}", "").status().message(),
              HasSubstr("x.driver.json: a driver file needs \"pools\""));
}

TEST(EscapePathSegment, SlashAndOthersEscaped) {
  EXPECT_EQ(escapePathSegment("rack-1/fabric_1.x~"), "rack-1%2Ffabric_1.x~");
  EXPECT_EQ(escapePathSegment("a b?"), "a%20b%3F");
}

TEST(ReadPushRequests, TheExamplesFolderInNameOrder) {
  auto requests = readPushRequests(RSC_INVENTORY_EXAMPLES_DIR, "");
  ASSERT_TRUE(requests.ok()) << requests.status().message();
  std::vector<std::string> paths;
  for (const PushRequest& r : *requests) paths.push_back(r.path());
  EXPECT_THAT(paths, ElementsAre("/v1/drivers/gpu.example.com/pools/node-a",
                                 "/v1/drivers/gpu.example.com/pools/node-b",
                                 "/v1/drivers/gpu.example.com/pools/node-c",
                                 "/v1/drivers/nic.example.com"));
  EXPECT_THAT(readPushRequests("/nonexistent.pool.json", "").status().message(),
              HasSubstr("/nonexistent.pool.json"));
}

TEST_F(CommandsTest, PushSendsTheFileWithWaitAndStopsAtTheFirstFailure) {
  inventory_.reply(200, poolStatus("Published"));
  inventory_.reply(422, R"({"code":422,"reason":"Invalid","message":"1 invalid field",
                            "details":[{"field":"devices[0].name","message":"bad"}]})");
  auto code = run({"push", RSC_INVENTORY_EXAMPLES_DIR, "--wait=10s"});
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().message(),
            "PUT /v1/drivers/gpu.example.com/pools/node-b?wait=10s: 422 Invalid: 1 invalid field "
            "(devices[0].name: bad)");
  ASSERT_EQ(inventory_.requests().size(), 2U);
  EXPECT_THAT(inventory_.requests()[0],
              HasSubstr("PUT /v1/drivers/gpu.example.com/pools/node-a?wait=10s {"));
  EXPECT_THAT(out_.str(), HasSubstr("gpu.example.com/node-a: Published\n"));
}

TEST_F(CommandsTest, PushWaitDefaultsToTheLongestAndANotPublishedAnswerFails) {
  inventory_.reply(202, poolStatus("Pending", 2, 1));
  auto code =
      run({"push", std::string(RSC_INVENTORY_EXAMPLES_DIR) + "/gpu.example.com-node-a.pool.json",
           "--wait"});
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().message(), "gpu.example.com/node-a: not published within 60s");
  EXPECT_THAT(inventory_.requests()[0], HasSubstr("?wait=60s "));
}

TEST_F(CommandsTest, GetRendersTheAnswerAsAsked) {
  const std::string list =
      R"({"drivers": [{"driver": "gpu.example.com", "pools": [)" + poolStatus("Published") + "]}]}";
  inventory_.reply(200, list);
  auto code = run({"get", "pools"});
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(inventory_.requests().back(), "GET /v1/drivers");
  EXPECT_THAT(out_.str(), HasSubstr("gpu.example.com   node-a   Published   1            1"));

  inventory_.reply(200, poolStatus("Published"));
  ASSERT_TRUE(run({"get", "pool", "gpu.example.com", "rack/1", "-o", "json"}).ok());
  EXPECT_EQ(inventory_.requests().back(), "GET /v1/drivers/gpu.example.com/pools/rack%2F1");
  EXPECT_EQ(Json::parse(out_.str()), Json::parse(poolStatus("Published")));

  inventory_.reply(200, R"({"driver": "gpu.example.com", "pools": []})");
  ASSERT_TRUE(run({"get", "pools", "gpu.example.com", "-o", "yaml"}).ok());
  EXPECT_EQ(inventory_.requests().back(), "GET /v1/drivers/gpu.example.com");
  EXPECT_EQ(out_.str(), "driver: gpu.example.com\npools: []\n");

  inventory_.reply(404, R"({"code":404,"reason":"NotFound","message":"no pool","details":[]})");
  auto missing = run({"get", "pool", "gpu.example.com", "x"});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("404 NotFound: no pool"));
}

TEST_F(CommandsTest, DiffSendsDryRunsAndExitsOneOnChanges) {
  const std::string file =
      std::string(RSC_INVENTORY_EXAMPLES_DIR) + "/gpu.example.com-node-a.pool.json";
  inventory_.reply(200, R"({"dryRun": true, "driver": "gpu.example.com", "pools": [
      {"pool": "node-a", "action": "publish", "liveGeneration": 1, "generation": 1,
       "generationBumped": false, "sliceCount": 1, "writes": []}]})");
  auto code = run({"diff", file});
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(*code, kExitOk);
  EXPECT_THAT(inventory_.requests()[0],
              HasSubstr("PUT /v1/drivers/gpu.example.com/pools/node-a?dryRun=All {"));
  EXPECT_EQ(out_.str(), "gpu.example.com/node-a: no changes\n");

  inventory_.reply(200, R"({"dryRun": true, "driver": "gpu.example.com", "pools": [
      {"pool": "node-a", "action": "publish", "liveGeneration": 1, "generation": 1,
       "generationBumped": false, "sliceCount": 1, "writes": [
         {"verb": "update", "slice": "s-1", "index": 0, "changedFields": ["spec.devices[gpu-0]"]}]}]})");
  code = run({"diff", file});
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(*code, kExitChanges);
  EXPECT_THAT(out_.str(), HasSubstr("~ update s-1 (index 0):\n      spec.devices[gpu-0]\n"));

  inventory_.fail(unavailable("rsc.example:8443: connection refused"));
  code = run({"diff", file});
  ASSERT_FALSE(code.ok());
  EXPECT_THAT(code.status().message(), HasSubstr("connection refused"));
}

TEST_F(CommandsTest, WithdrawAPoolOrTheWholeDriver) {
  inventory_.reply(200, poolStatus("Withdrawn"));
  ASSERT_TRUE(run({"withdraw", "gpu.example.com", "node-a", "--wait=5s"}).ok());
  EXPECT_EQ(inventory_.requests().back(),
            "DELETE /v1/drivers/gpu.example.com/pools/node-a?wait=5s");
  EXPECT_EQ(out_.str(), "gpu.example.com/node-a: Withdrawn\n");

  inventory_.reply(202, R"({"driver": "nic.example.com", "pools": []})");
  ASSERT_TRUE(run({"withdraw", "nic.example.com", "--all"}).ok());
  EXPECT_EQ(inventory_.requests().back(), R"(PUT /v1/drivers/nic.example.com {"pools":{}})");
}

TEST_F(CommandsTest, WaitPollsUntilPublishedAtTheNewestPush) {
  inventory_.reply(200, poolStatus("Pending", 2, 1));
  inventory_.reply(200, poolStatus("Published", 2, 1));  // an older push published
  inventory_.reply(200, poolStatus("Published", 2, 2));
  auto code = run({"wait", "gpu.example.com", "node-a", "--for=published", "--timeout=10s"});
  ASSERT_TRUE(code.ok()) << code.status().message();
  EXPECT_EQ(inventory_.requests().size(), 3U);
  EXPECT_THAT(clock_.sleeps(), ElementsAre(kWaitPollInterval, kWaitPollInterval));
  EXPECT_EQ(out_.str(), "gpu.example.com/node-a: Published (generation 1, 1 slices)\n");
}

TEST_F(CommandsTest, WaitFailsOnFailedAndAfterTheTimeout) {
  Json failed = Json::parse(poolStatus("Failed", 2, 1));
  failed["lastError"] = {{"reason", "Invalid"}, {"message", "too many devices"}};
  inventory_.reply(200, failed.dump());
  auto code = run({"wait", "gpu.example.com", "node-a"});
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().message(), "gpu.example.com/node-a: Failed: Invalid: too many devices");

  // A hold lasts until the driver pushes or renews: waiting cannot end it.
  Json held = Json::parse(poolStatus("Held", 2, 1));
  held["reason"] = "NodeSlicesDeleted";
  held["message"] = "deleted by the kubelet";
  inventory_.reply(200, held.dump());
  code = run({"wait", "gpu.example.com", "node-a"});
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().message(),
            "gpu.example.com/node-a: Held: NodeSlicesDeleted: deleted by the kubelet");

  for (int i = 0; i < 3; ++i) inventory_.reply(200, poolStatus("Pending", 2, 1));
  code = run({"wait", "gpu.example.com", "node-a", "--timeout=1500ms"});
  ASSERT_FALSE(code.ok());
  EXPECT_EQ(code.status().message(), "gpu.example.com/node-a: still Pending after 1500ms");
  EXPECT_EQ(inventory_.requests().size(), 5U);
}

TEST_F(CommandsTest, SlicesListsTheDriversPoolsWithCompleteness) {
  for (const auto& [name, pool, generation] :
       std::vector<std::tuple<std::string, std::string, int64_t>>{
           {"a-1", "node-a", 2}, {"a-2", "node-a", 2}, {"b-1", "node-b", 1}}) {
    client::ResourceSlice s;
    s.metadata.name = name;
    s.spec.driver = "gpu.example.com";
    s.spec.pool = {.name = pool, .generation = generation, .resource_slice_count = 2};
    s.spec.node_name = pool;
    ASSERT_TRUE(kube_.addResourceSlice(s).ok());
  }
  client::ResourceSlice other;
  other.metadata.name = "other";
  other.spec.driver = "nic.example.com";
  other.spec.pool = {.name = "node-a", .generation = 1, .resource_slice_count = 1};
  other.spec.all_nodes = true;
  ASSERT_TRUE(kube_.addResourceSlice(other).ok());

  ASSERT_TRUE(run({"slices", "gpu.example.com"}).ok());
  EXPECT_THAT(out_.str(), HasSubstr("pool node-a: complete (generation 2, 2 slices)\n"));
  EXPECT_THAT(out_.str(), HasSubstr("pool node-b: incomplete: 1 of 2 slices\n"));
  EXPECT_THAT(out_.str(), ::testing::Not(HasSubstr("other")));

  ASSERT_TRUE(run({"slices", "gpu.example.com", "node-b", "-o", "json"}).ok());
  const Json items = Json::parse(out_.str())["items"];
  ASSERT_EQ(items.size(), 1U);
  EXPECT_EQ(items[0]["metadata"]["name"], "b-1");
}

}  // namespace
}  // namespace rsc::ctl
