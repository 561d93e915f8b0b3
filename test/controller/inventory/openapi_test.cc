// Keeps openapi.json honest: every route the handler serves is documented and
// every documented operation is served; the schemas name exactly the fields
// the handler reads and writes.
#include "controller/inventory/openapi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "controller/inventory/handler.h"
#include "controller/pool/pool_json.h"
#include "test/fakes/fake_clock.h"

namespace rsc::controller::inventory {

using http::HttpRequest;
namespace {

using Json = nlohmann::json;

Json document() { return Json::parse(openApiDocument()); }

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::set<std::string> keysOf(const Json& object) {
  std::set<std::string> out;
  for (const auto& [key, value] : object.items()) out.insert(key);
  return out;
}

std::set<std::string> documentedOperations() {
  std::set<std::string> out;
  const Json doc = document();
  for (const auto& [path, item] : doc.at("paths").items()) {
    for (const auto& [method, operation] : item.items()) {
      if (method != "parameters") out.insert(upper(method) + " " + path);
    }
  }
  return out;
}

TEST(OpenApi, IsAnOpenApi3Document) {
  const Json doc = document();
  EXPECT_EQ(doc.at("openapi").get<std::string>().substr(0, 2), "3.");
  EXPECT_TRUE(doc.at("info").contains("title"));
  EXPECT_TRUE(doc.at("components").at("securitySchemes").contains("bearer"));
}

TEST(OpenApi, DocumentsExactlyTheRoutesServed) {
  std::set<std::string> served;
  for (const Route& route : InventoryHandler::routes()) {
    for (std::string_view method : route.methods) {
      served.insert(std::string(method) + " " + std::string(route.path));
    }
  }
  EXPECT_EQ(documentedOperations(), served);
}

TEST(OpenApi, EveryDocumentedOperationIsImplemented) {
  testing::FakeClock clock;
  reconcile::DesiredStore store(clock);
  NoAuthAuthenticator auth;
  auto handler =
      InventoryHandler::create({.store = &store, .authenticator = &auth, .clock = &clock});
  ASSERT_TRUE(handler.ok());
  for (const std::string& operation : documentedOperations()) {
    // A pool that exists, so that reads, renewals and deletes find it.
    store.put({"gpu.example.com", "node-a"}, *pool::parsePool(R"({"nodeName": "node-a"})"));
    const size_t space = operation.find(' ');
    std::string target = operation.substr(space + 1);
    for (const auto& [param, value] :
         {std::pair<std::string, std::string>{"{driver}", "gpu.example.com"},
          std::pair<std::string, std::string>{"{pool}", "node-a"}}) {
      if (size_t at = target.find(param); at != std::string::npos)
        target.replace(at, param.size(), value);
    }
    HttpRequest request;
    request.method = operation.substr(0, space);
    request.target = target;
    request.headers["content-type"] = "application/json";
    request.body = request.method == "PUT"
                       ? (target.ends_with("/pools/node-a")
                              ? R"({"nodeName": "node-a"})"
                              : R"({"pools": {"node-a": {"nodeName": "node-a"}}})")
                       : "";
    HandlerResult result = (*handler)->handle(request);
    EXPECT_TRUE(result.response.status == 200 || result.response.status == 202)
        << operation << " -> " << result.response.status << " " << result.response.body;
    // The answer's code is documented for the operation.
    const std::string path = operation.substr(space + 1);
    std::string method = operation.substr(0, space);
    std::transform(method.begin(), method.end(), method.begin(), ::tolower);
    EXPECT_TRUE(document()
                    .at("paths")
                    .at(path)
                    .at(method)
                    .at("responses")
                    .contains(std::to_string(result.response.status)))
        << operation << " answers " << result.response.status;
  }
}

TEST(OpenApi, PoolSchemaNamesTheFieldsTheDecoderAccepts) {
  const Json schema = document().at("components").at("schemas").at("Pool");
  EXPECT_EQ(schema.at("additionalProperties"), false);
  for (const std::string& field : keysOf(schema.at("properties"))) {
    // Null reads as absent, so only an unknown field can fail the shape.
    pool::BodyProblems problems;
    pool::decodePool(Json{{"nodeName", "node-a"}, {field, nullptr}}, "", problems);
    EXPECT_TRUE(problems.malformed.empty()) << field << " is documented but not accepted";
  }
  pool::BodyProblems problems;
  pool::decodePool(Json{{"nodeName", "node-a"}, {"notDocumented", 1}}, "", problems);
  EXPECT_FALSE(problems.malformed.empty());
  // Every decoder field is documented: the message lists them.
  ASSERT_FALSE(problems.malformed.empty());
  for (const std::string& field : keysOf(schema.at("properties"))) {
    EXPECT_THAT(problems.malformed[0].message, ::testing::HasSubstr(field));
  }
}

TEST(OpenApi, PoolStatusSchemaNamesEveryFieldWritten) {
  reconcile::PoolStatus status;
  status.key = {"gpu.example.com", "node-a"};
  status.last_error = Status(StatusCode::kConflict, "x");
  status.last_push = Clock::SystemTime(std::chrono::seconds(1));
  status.hold = reconcile::PoolHold{"node-a", "NodeSlicesDeleted", "deleted"};
  auto desired = std::make_shared<reconcile::DesiredPool>();
  desired->pool.lease = std::chrono::seconds(5);
  const Json written = pool::poolStatusToJson(status, desired, "leader");
  const Json schema = document().at("components").at("schemas").at("PoolStatus");
  EXPECT_EQ(keysOf(written), keysOf(schema.at("properties")));
  for (const Json& required : schema.at("required")) {
    EXPECT_TRUE(pool::poolStatusToJson(reconcile::PoolStatus{}, nullptr, "").contains(required))
        << required;
  }
  std::set<std::string> phases;
  for (const Json& p : schema.at("properties").at("phase").at("enum")) phases.insert(p);
  for (reconcile::PoolPhase phase :
       {reconcile::PoolPhase::kPending, reconcile::PoolPhase::kPublished,
        reconcile::PoolPhase::kFailed, reconcile::PoolPhase::kWithdrawing,
        reconcile::PoolPhase::kHeld}) {
    EXPECT_TRUE(phases.contains(std::string(reconcile::poolPhaseName(phase))))
        << poolPhaseName(phase);
  }
}

TEST(OpenApi, DryRunSchemaNamesEveryFieldWritten) {
  reconcile::PoolPreview preview;
  preview.key = {"gpu.example.com", "node-a"};
  preview.writes = {{reconcile::PlannedWrite::Verb::kUpdate, "s", 0, {"spec.devices"}}};
  const Json written = pool::poolPreviewToJson(preview);
  const Json schemas = document().at("components").at("schemas");
  const Json& schema = schemas.at("PoolDryRun");
  EXPECT_EQ(keysOf(written), keysOf(schema.at("properties")));
  EXPECT_EQ(keysOf(written.at("writes").at(0)),
            keysOf(schema.at("properties").at("writes").at("items").at("properties")));
  preview.withdraw = true;
  for (const Json& required : schema.at("required")) {
    EXPECT_TRUE(pool::poolPreviewToJson(preview).contains(required)) << required;
  }
  std::set<std::string> verbs;
  for (const Json& v :
       schema.at("properties").at("writes").at("items").at("properties").at("verb").at("enum")) {
    verbs.insert(v);
  }
  for (auto verb : {reconcile::PlannedWrite::Verb::kCreate, reconcile::PlannedWrite::Verb::kUpdate,
                    reconcile::PlannedWrite::Verb::kDelete}) {
    preview.writes = {{verb, "s", 0, {}}};
    EXPECT_TRUE(verbs.contains(pool::poolPreviewToJson(preview).at("writes").at(0).at("verb")));
  }
}

TEST(OpenApi, ErrorSchemaNamesEveryFieldWrittenAndEveryReason) {
  const Json schema = document().at("components").at("schemas").at("Error");
  EXPECT_EQ(keysOf(pool::errorToJson(400, "BadRequest", "m", {{"f", "m"}})),
            keysOf(schema.at("properties")));
  std::set<std::string> reasons;
  for (const Json& r : schema.at("properties").at("reason").at("enum")) reasons.insert(r);
  for (int code : {400, 401, 403, 404, 405, 409, 413, 415, 422, 429, 431, 500, 503}) {
    const Json body = Json::parse(errorResponse(code, "m").body);
    EXPECT_TRUE(reasons.contains(body.at("reason"))) << code << " " << body.at("reason");
  }
}

}  // namespace
}  // namespace rsc::controller::inventory
