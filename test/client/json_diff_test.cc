#include "client/json_diff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace rsc::client {
namespace {

using ::testing::ElementsAre;
using Json = nlohmann::json;

std::vector<std::string> differences(const Json& want, const Json& have) {
  std::vector<std::string> out;
  jsonDifferences(want, have, "", out);
  return out;
}

TEST(JsonDifferences, EqualDocumentsHaveNone) {
  const Json doc =
      Json::parse(R"({"spec": {"devices": [{"name": "a"}], "pool": {"generation": 1}}})");
  EXPECT_TRUE(differences(doc, doc).empty());
}

TEST(JsonDifferences, NamesChangedAddedAndRemovedMembers) {
  EXPECT_THAT(differences(Json::parse(R"({"a": 1, "b": {"c": 2, "d": 3}, "e": 4})"),
                          Json::parse(R"({"a": 1, "b": {"c": 5, "x": 3}, "f": 4})")),
              ElementsAre("b.c", "b.d", "b.x", "e", "f"));
}

// Devices are matched by name: one inserted in front changes one path, not
// every later device.
TEST(JsonDifferences, MatchesNamedElementsByName) {
  const Json have = Json::parse(
      R"({"devices": [{"name": "gpu-0", "attributes": {"model": {"string": "A100"}}},
                      {"name": "gpu-1", "attributes": {"model": {"string": "A100"}}}]})");
  const Json want = Json::parse(
      R"({"devices": [{"name": "gpu-9"},
                      {"name": "gpu-0", "attributes": {"model": {"string": "A100"}}},
                      {"name": "gpu-1", "attributes": {"model": {"string": "H100"}}}]})");
  EXPECT_THAT(differences(want, have),
              ElementsAre("devices[gpu-9]", "devices[gpu-1].attributes.model.string"));
  EXPECT_THAT(differences(have, want),
              ElementsAre("devices[gpu-1].attributes.model.string", "devices[gpu-9]"));
}

TEST(JsonDifferences, ComparesOtherArraysByIndex) {
  EXPECT_THAT(differences(Json::parse(R"({"v": [1, 2, 3]})"), Json::parse(R"({"v": [1, 5]})")),
              ElementsAre("v[1]", "v[2]"));
  // Repeated names are not a key: by index.
  EXPECT_THAT(differences(Json::parse(R"([{"name": "a", "x": 1}, {"name": "a"}])"),
                          Json::parse(R"([{"name": "a", "x": 2}, {"name": "a"}])")),
              ElementsAre("[0].x"));
}

TEST(JsonDifferences, ValuesOfAnotherKindDifferAsAWhole) {
  EXPECT_THAT(differences(Json::parse(R"({"a": {"b": 1}})"), Json::parse(R"({"a": [1]})")),
              ElementsAre("a"));
  EXPECT_THAT(differences(Json(1), Json("1")), ElementsAre(""));
}

}  // namespace
}  // namespace rsc::client
