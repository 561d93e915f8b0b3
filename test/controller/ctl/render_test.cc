#include "controller/ctl/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/yaml.h"

namespace rsc::ctl {
namespace {

using ::testing::HasSubstr;

std::chrono::system_clock::time_point at(const std::string& rfc3339) {
  std::tm tm{};
  strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

Json status(const std::string& pool, const std::string& phase) {
  return Json{{"driver", "gpu.example.com"},
              {"pool", pool},
              {"phase", phase},
              {"desiredGeneration", 0},
              {"publishedGeneration", 3},
              {"desiredVersion", 2},
              {"publishedVersion", 2},
              {"sliceNames", {"a", "b"}},
              {"lastPushTime", "2026-12-02T10:00:00.000000Z"},
              {"droppedFields", Json::array()},
              {"leader", ""}};
}

client::PoolStatusJson typed(const Json& j) {
  StatusOr<client::PoolStatusJson> s = client::poolStatusFromJson(j);
  EXPECT_TRUE(s.ok()) << s.status().toString();
  return s.ok() ? *s : client::PoolStatusJson{};
}

TEST(RenderPoolTable, AlignedColumnsWithAgesAsKubectl) {
  Json failed = status("node-b", "Failed");
  failed["lastError"] = {{"reason", "Invalid"}, {"message", "spec.devices: too many"}};
  failed["leaseSeconds"] = 300;
  const std::string text = renderPoolTable({typed(status("node-a", "Published")), typed(failed)},
                                           false, at("2026-12-02T10:03:30"));
  EXPECT_EQ(text,
            "DRIVER            POOL     PHASE       GENERATION   SLICES   LAST-PUSH\n"
            "gpu.example.com   node-a   Published   3            2        3m\n"
            "gpu.example.com   node-b   Failed      3            2        3m\n");
  const std::string wide = renderPoolTable({typed(status("node-a", "Published")), typed(failed)},
                                           true, at("2026-12-02T10:00:30"));
  EXPECT_THAT(wide, HasSubstr("VERSION   LEASE    LEADER   ERROR"));
  EXPECT_THAT(wide, HasSubstr("30s         2/2       <none>   <none>   <none>\n"));
  EXPECT_THAT(wide, HasSubstr("2/2       300s     <none>   Invalid: spec.devices: too many\n"));
  EXPECT_EQ(renderPoolTable({}, false, at("2026-12-02T10:00:00")), "No pools found.\n");
}

// Statuses are read by the table the controller writes them with: a newer controller's fields
// are skipped, a field of the wrong type is an error naming it.
TEST(PoolStatusJson, ReadsWhatTheControllerWritesAndNamesWhatItCannot) {
  Json newer = status("node-a", "Held");
  newer["reason"] = "NodeSlicesDeleted";
  newer["futureField"] = {{"x", 1}};
  const client::PoolStatusJson s = typed(newer);
  EXPECT_EQ(s.phase, "Held");
  EXPECT_EQ(s.reason, "NodeSlicesDeleted");
  EXPECT_EQ(s.published_generation, 3);
  newer.erase("futureField");
  EXPECT_EQ(client::toJson(s), newer);
  newer["publishedGeneration"] = "three";
  const StatusOr<client::PoolStatusJson> bad = client::poolStatusFromJson(newer);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("publishedGeneration"));
}

TEST(Age, KubectlUnits) {
  const auto now = at("2026-12-02T10:00:00");
  EXPECT_EQ(age("2026-12-02T09:59:01Z", now), "59s");
  EXPECT_EQ(age("2026-12-02T09:50:00Z", now), "10m");
  EXPECT_EQ(age("2026-12-02T05:00:00Z", now), "5h");
  EXPECT_EQ(age("2026-11-28T10:00:00Z", now), "4d");
  EXPECT_EQ(age("2026-12-02T10:00:05Z", now), "0s");  // clock skew is not negative
  EXPECT_EQ(age("2026-12-02T11:59:01.5+02:00", now), "59s") << "an offset and a fraction";
  EXPECT_EQ(age("yesterday", now), "<unknown>");
  EXPECT_EQ(age("2026-02-30T10:00:00Z", now), "<unknown>");
}

TEST(RenderDryRun, CreatesUpdatesWithFieldsDeletesAndTheGeneration) {
  const Json result = Json::parse(R"({
    "dryRun": true, "driver": "gpu.example.com",
    "pools": [
      {"pool": "node-a", "action": "publish", "liveGeneration": 2, "generation": 3,
       "generationBumped": true, "sliceCount": 2, "writes": [
         {"verb": "update", "slice": "gpu-node-a-x7k2p", "index": 0,
          "changedFields": ["spec.devices[gpu-1].attributes.model.string", "spec.pool.generation"]},
         {"verb": "create", "index": 1},
         {"verb": "delete", "slice": "gpu-node-a-p2m9q"}]},
      {"pool": "node-b", "action": "publish", "liveGeneration": 1, "generation": 1,
       "generationBumped": false, "sliceCount": 1, "writes": []},
      {"pool": "node-c", "action": "withdraw", "liveGeneration": 4, "writes": [
         {"verb": "delete", "slice": "gpu-node-c-aaaaa"}]}
    ]})");
  EXPECT_EQ(renderDryRun(*client::dryRunResultFromJson(result)),
            "gpu.example.com/node-a: publish at generation 3 (generation bumped from 2), 2 slices\n"
            "  ~ update gpu-node-a-x7k2p (index 0):\n"
            "      spec.devices[gpu-1].attributes.model.string\n"
            "      spec.pool.generation\n"
            "  + create (index 1)\n"
            "  - delete gpu-node-a-p2m9q\n"
            "gpu.example.com/node-b: no changes\n"
            "gpu.example.com/node-c: withdraw (live generation 4)\n"
            "  - delete gpu-node-c-aaaaa\n");
  EXPECT_EQ(plannedWrites(*client::dryRunResultFromJson(result)), 4U);
  EXPECT_EQ(plannedWrites(client::DryRunResultJson{}), 0U);
  // The table writes back what it read.
  EXPECT_EQ(client::toJson(*client::dryRunResultFromJson(result)), result);
}

client::ResourceSlice slice(const std::string& name, const std::string& pool, int64_t generation,
                            int64_t count) {
  client::ResourceSlice s;
  s.metadata.name = name;
  s.metadata.resource_version = "17";
  s.spec.driver = "gpu.example.com";
  s.spec.pool = {.name = pool, .generation = generation, .resource_slice_count = count};
  s.spec.node_name = pool;
  return s;
}

TEST(RenderSlices, TableAndCompletenessPerPool) {
  const std::string text = renderSlices(
      {slice("a-1", "node-a", 2, 2), slice("a-2", "node-a", 2, 2), slice("b-1", "node-b", 1, 2),
       slice("b-2", "node-b", 2, 2), slice("c-1", "node-c", 5, 2)},
      false);
  EXPECT_THAT(text, HasSubstr("NAME   POOL     GENERATION   COUNT   DEVICES   NODE\n"
                              "a-1    node-a   2            2       0         node-a\n"));
  EXPECT_THAT(text, HasSubstr("pool node-a: complete (generation 2, 2 slices)\n"));
  EXPECT_THAT(text, HasSubstr("pool node-b: incomplete: 2 generations (1 to 2)\n"));
  EXPECT_THAT(text, HasSubstr("pool node-c: incomplete: 1 of 2 slices\n"));
  EXPECT_THAT(renderSlices({slice("a-1", "node-a", 2, 1)}, true), HasSubstr("RESOURCE-VERSION"));
  EXPECT_EQ(renderSlices({}, false), "No ResourceSlices found.\n");
}

TEST(ErrorLine, TheApiMessageAndEveryFieldDetail) {
  EXPECT_EQ(errorLine(422, R"({"code":422,"reason":"Invalid","message":"2 invalid fields",
      "details":[{"field":"devices[0].name","message":"must be a DNS label"},
                 {"field":"","message":"too large"}]})"),
            "422 Invalid: 2 invalid fields (devices[0].name: must be a DNS label; (body): too "
            "large)");
  EXPECT_EQ(
      errorLine(404, R"({"code":404,"reason":"NotFound","message":"no pool x","details":[]})"),
      "404 NotFound: no pool x");
  EXPECT_EQ(errorLine(502, "Bad\ngateway"), "502: Bad gateway");
  EXPECT_EQ(errorLine(503, ""), "503");
}

TEST(ToYaml, ReadsBackAsTheSameJson) {
  const Json value = Json::parse(R"({"driver": "gpu.example.com", "n": 3, "ok": true,
      "version": "2", "empty": "", "word": "true", "nothing": null, "list": ["a: b", 1.5],
      "nested": {"x": []}})");
  const std::string text = toYaml(value);
  EXPECT_THAT(text, HasSubstr("driver: gpu.example.com\n"));
  auto back = client::yamlToJson(text);
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  EXPECT_EQ(*back, value) << text;
}

// Strings that a YAML reader takes for something else when written plain:
// under the 1.2 core schema (the client's reader), or under YAML 1.1, which
// go-yaml v2 and so kubectl and many tools read.
TEST(ToYaml, QuotesStringsThatReadAsOtherValues) {
  for (const std::string s : {"",
                              "~",
                              "null",
                              "NULL",
                              "true",
                              "TRUE",
                              "False",
                              "12",
                              "+12",
                              "-3",
                              "1.5",
                              "1e5",
                              ".5",
                              ".inf",
                              "+.inf",
                              "-.Inf",
                              ".nan",
                              ".NaN",
                              "yes",
                              "No",
                              "on",
                              "OFF",
                              "y",
                              "N",
                              "0x1F",
                              "0o17",
                              "0b101",
                              "017",
                              "1_000",
                              "1:20",
                              "-1:20:30.5",
                              "2026-12-03",
                              "2026-12-03T17:01:28.129223Z",
                              "2026-12-03 17:01:28 +02:00"}) {
    const Json value = {{"k", s}};
    const std::string text = toYaml(value);
    EXPECT_EQ(text, "k: \"" + s + "\"\n") << s;
    auto back = client::yamlToJson(text);
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
    EXPECT_EQ(*back, value) << text;
  }
  for (const std::string s : {"gpu.example.com", "1.2.3", "570.124.6", "node-a", "v1", "0xZ",
                              "yesterday", "a:b", "12:60", "e"}) {
    EXPECT_EQ(toYaml(Json{{"k", s}}), "k: " + s + "\n") << s;
  }
}

}  // namespace
}  // namespace rsc::ctl
