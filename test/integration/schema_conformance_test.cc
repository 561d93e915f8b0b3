// The codec against the API server's own schema, so that it cannot go stale: every property
// reachable from ResourceSliceSpec in this server's OpenAPI v3 document for resource.k8s.io/v1
// (GET /openapi/v3/apis/resource.k8s.io/v1) is set, one at a time, in a slice that the codec
// must decode strictly (a field no table lists is "unknown field"), encode with that property in
// place, and decode again to the same slice; and in a pool that the push API must not refuse as
// unknown (a dry run). A Kubernetes release that adds a field fails here until the field is one
// new row of a table in client/resource_slice.h. The features each property is tagged with
// (client/api_features.h) must be exactly those whose release range holds this server: what the
// README's table of supported versions says each release serves is this test's output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "client/api_features.h"
#include "client/resource_slice.h"
#include "test/integration/service_env.h"

namespace rsc::testing {
namespace {

const auto* const kCluster = ClusterEnvironment::install();

constexpr char kSchemaPrefix[] = "io.k8s.api.resource.v1.";
constexpr char kQuantity[] = "io.k8s.apimachinery.pkg.api.resource.Quantity";
constexpr char kDriver[] = "conformance.example.com";

// The fields of a ResourceSliceSpec that drivers do not send: the push API takes the driver from
// the URL, and the controller sets the pool's name, generation and slice count.
const std::set<std::string> kSetByTheController = {"driver", "pool"};

// One step of a property's path: a field, the first item of a list, or the entry "k" of a map.
struct Step {
  enum class Kind { kField, kItem, kEntry };
  Kind kind;
  std::string name;
};

// A property reachable from ResourceSliceSpec, and what a value of it looks like.
struct Property {
  std::vector<Step> path;
  Json sample;

  std::string toString() const {
    std::string out = "spec";
    for (const Step& s : path) {
      if (s.kind == Step::Kind::kField) out += "." + s.name;
      if (s.kind == Step::Kind::kItem) out += "[]";
      if (s.kind == Step::Kind::kEntry) out += "{}";
    }
    return out;
  }
};

class SchemaWalk {
 public:
  explicit SchemaWalk(const Json& schemas) : schemas_(schemas) {}

  // Every property below the named schema, parents before their children.
  std::vector<Property> from(const std::string& name) {
    properties(schemas_.at(name), {});
    return std::move(out_);
  }

 private:
  // The schema a reference names ("#/components/schemas/NAME", possibly wrapped in allOf), or
  // the schema itself; `name` is set to the component's name.
  const Json& resolve(const Json& schema, std::string& name) const {
    const Json* s = &schema;
    if (s->contains("allOf") && (*s)["allOf"].size() == 1) s = &(*s)["allOf"][0];
    if (s->contains("$ref")) {
      const std::string ref = (*s)["$ref"].get<std::string>();
      name = ref.substr(ref.rfind('/') + 1);
      return schemas_.at(name);
    }
    return *s;
  }

  void properties(const Json& schema, const std::vector<Step>& at) {
    if (!schema.contains("properties")) return;
    for (const auto& [field, sub] : schema["properties"].items()) {
      std::vector<Step> path = at;
      path.push_back({Step::Kind::kField, field});
      Property p{path, value(sub, path)};
      out_.push_back(std::move(p));
    }
  }

  // A value of `schema` for the property at `path`; walks objects, list items and map entries
  // below it, adding their properties.
  Json value(const Json& schema, std::vector<Step> path) {
    std::string name;
    const Json& s = resolve(schema, name);
    if (name == kQuantity) return "1";
    if (s.contains("enum") && !s["enum"].empty()) return s["enum"][0];
    const std::string type = s.value("type", "");
    if (type == "array") {
      path.push_back({Step::Kind::kItem, ""});
      return Json::array({value(s["items"], path)});
    }
    if (type == "object" && s.contains("additionalProperties") &&
        s["additionalProperties"].is_object()) {
      path.push_back({Step::Kind::kEntry, ""});
      return Json{{"k", value(s["additionalProperties"], path)}};
    }
    if (type == "object" || s.contains("properties")) {
      // A type met again below itself (none today) is not walked twice.
      if (!name.empty() && !walking_.insert(name).second) return Json::object();
      properties(s, path);
      if (!name.empty()) walking_.erase(name);
      return Json::object();
    }
    if (type == "integer" || type == "number") return 1;
    if (type == "boolean") return true;
    return "1";  // strings: also a valid quantity, name and label
  }

  const Json& schemas_;
  std::vector<Property> out_;
  std::set<std::string> walking_;
};

// `base` with `value` set at `path`, objects, lists and maps made on the way.
void place(Json& base, const std::vector<Step>& path, size_t i, const Json& value) {
  if (i == path.size()) {
    base = value;
    return;
  }
  const Step& s = path[i];
  if (s.kind == Step::Kind::kField) {
    if (!base.is_object()) base = Json::object();
    place(base[s.name], path, i + 1, value);
  } else if (s.kind == Step::Kind::kItem) {
    if (!base.is_array() || base.empty()) base = Json::array({Json::object()});
    place(base[0], path, i + 1, value);
  } else {
    if (!base.is_object()) base = Json::object();
    place(base["k"], path, i + 1, value);
  }
}

// The value at `path` in `j`, or null.
Json at(const Json& j, const std::vector<Step>& path) {
  const Json* cur = &j;
  for (const Step& s : path) {
    if (s.kind == Step::Kind::kField && cur->is_object() && cur->contains(s.name)) {
      cur = &(*cur)[s.name];
    } else if (s.kind == Step::Kind::kItem && cur->is_array() && !cur->empty()) {
      cur = &(*cur)[0];
    } else if (s.kind == Step::Kind::kEntry && cur->is_object() && cur->contains("k")) {
      cur = &(*cur)["k"];
    } else {
      return nullptr;
    }
  }
  return *cur;
}

std::string featureNames(const client::FeatureSet& set) {
  std::string out;
  for (const client::FeatureInfo& f : client::kFeatures) {
    if (!set.test(static_cast<size_t>(f.id))) continue;
    out += (out.empty() ? "" : ", ") + std::string(f.gate);
    if (f.id == client::Feature::kNodeAllocatableResourceMappings) out += " (1.36 shape)";
  }
  return out.empty() ? "none" : out;
}

class SchemaConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const HttpAnswer version = env_.kube("GET", "/version");
    ASSERT_EQ(version.code, 200) << version.body;
    version_ = version.json().value("gitVersion", "");
    minor_ = std::stoi(version.json().value("minor", "0"));
    const HttpAnswer doc = env_.kube("GET", "/openapi/v3/apis/resource.k8s.io/v1");
    ASSERT_EQ(doc.code, 200) << doc.body.substr(0, 500);
    const Json openapi = doc.json();
    ASSERT_TRUE(openapi.contains("components")) << doc.body.substr(0, 500);
    properties_ = SchemaWalk(openapi["components"]["schemas"])
                      .from(std::string(kSchemaPrefix) + "ResourceSliceSpec");
    std::printf("%s: %zu properties reachable from ResourceSliceSpec\n", version_.c_str(),
                properties_.size());
  }

  // A slice whose spec has exactly the property's sample on it.
  static Json sliceWith(const Property& p) {
    Json spec = Json::object();
    place(spec, p.path, 0, p.sample);
    return {{"apiVersion", "resource.k8s.io/v1"},
            {"kind", "ResourceSlice"},
            {"metadata", {{"name", "conformance"}}},
            {"spec", spec}};
  }

  ServiceEnv env_;
  std::string version_;
  int minor_ = 0;
  std::vector<Property> properties_;
};

TEST_F(SchemaConformanceTest, TheCodecDecodesEncodesAndRoundTripsEveryProperty) {
  ASSERT_GT(properties_.size(), 40U) << "the walk found too little";
  client::FeatureSet served;
  for (const Property& p : properties_) {
    SCOPED_TRACE(p.toString() + " on " + version_);
    const Json slice = sliceWith(p);
    client::codec::DecodeOptions strict;
    strict.unknown = client::codec::Unknown::kRefuse;
    StatusOr<client::ResourceSlice> decoded =
        client::codec::decode<client::ResourceSlice>(slice, "", strict);
    ASSERT_TRUE(decoded.ok()) << "the codec does not know " << p.toString() << ": "
                              << decoded.status().toString() << "\n"
                              << slice.dump();
    const Json encoded = client::toJson(*decoded)["spec"];
    EXPECT_FALSE(at(encoded, p.path).is_null())
        << p.toString() << " is lost on encoding: " << encoded.dump();
    const StatusOr<client::ResourceSlice> again =
        client::codec::decode<client::ResourceSlice>(client::toJson(*decoded), "", strict);
    ASSERT_TRUE(again.ok()) << again.status().toString();
    EXPECT_TRUE(*again == *decoded) << p.toString() << " does not round-trip";
    served |= client::featuresOf(decoded->spec);
  }

  // The release ranges of api_features.h, checked against what this server serves.
  for (const client::FeatureInfo& f : client::kFeatures) {
    const bool in_range =
        f.since_minor <= minor_ && (f.until_minor == 0 || minor_ <= f.until_minor);
    EXPECT_EQ(served.test(static_cast<size_t>(f.id)), in_range)
        << f.gate << " (since 1." << f.since_minor << ", until "
        << (f.until_minor == 0 ? std::string("now") : "1." + std::to_string(f.until_minor))
        << ") on " << version_;
  }
  std::printf("%s serves the fields of: %s\n", version_.c_str(), featureNames(served).c_str());
  RecordProperty("features", featureNames(served));
}

TEST_F(SchemaConformanceTest, ThePushApiKnowsEveryPropertyADriverSends) {
  ControllerProcess controller = env_.startController("conformance", {"--auth=none"});
  size_t pushed = 0;
  std::map<int, size_t> answers;
  for (const Property& p : properties_) {
    if (kSetByTheController.contains(p.path.front().name)) continue;
    SCOPED_TRACE(p.toString() + " on " + version_);
    // The pool's fields are the spec's, with a node selection of its own unless the property
    // is one.
    Json pool = sliceWith(p)["spec"];
    static const std::set<std::string> kSelection = {"nodeName", "nodeSelector", "allNodes",
                                                     "perDeviceNodeSelection"};
    if (!kSelection.contains(p.path.front().name)) pool["allNodes"] = true;
    const HttpAnswer a =
        env_.http("PUT", controller.poolUrl(kDriver, "conformance", "?dryRun=All"), pool.dump());
    ++pushed;
    // Decoded: a 200, a 422 (the sample breaks a rule of the field), or a 404 (the dry run
    // plans a pool for node "1", which does not exist). Not decoded: a 400 naming the field.
    for (const Json& d : a.json().value("details", Json::array())) {
      EXPECT_FALSE(d.value("message", "").starts_with("unknown field"))
          << a.code << " " << a.body << "\n"
          << pool.dump();
    }
    EXPECT_NE(a.code, 400) << a.body << "\n" << pool.dump();
    ++answers[a.code];
  }
  std::string tally;
  for (const auto& [code, n] : answers)
    tally += " " + std::to_string(n) + " x " + std::to_string(code);
  std::printf("%s: %zu dry-run pushes answered%s\n", version_.c_str(), pushed, tally.c_str());
  EXPECT_GT(pushed, 30U);
  expectCleanStop(controller);
}

}  // namespace
}  // namespace rsc::testing
