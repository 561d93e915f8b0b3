// The SAX driver (client/codec_sax.h) against the DOM driver: every input of the codec's golden
// corpus and random slices, reordered, with duplicate members and broken values, go through both
// and must give the same object or the same error. Plus the SAX driver's own limits.
#include "client/codec_sax.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "client/objects.h"
#include "client/resource_slice.h"
#include "client/watch_decoder.h"

namespace rsc::client {
namespace {

namespace fs = std::filesystem;
const fs::path kSourceRoot = RSC_SOURCE_ROOT;

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<fs::path> filesIn(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string describe(const Status& s) {
  std::string out = std::string(statusCodeName(s.code())) + ": " + s.message();
  for (const FieldError& e : s.details()) out += "\n  " + e.field + " | " + e.message;
  return out;
}

// Decodes `text` with both drivers and expects the same result. Returns whether it decoded.
template <typename T>
bool expectSame(const std::string& text, std::string_view root, const codec::DecodeOptions& options,
                const std::string& what) {
  const Json dom = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  const StatusOr<codec::OwnerOf<T>> sax = codec::decodeText<T>(text, root, options);
  if (dom.is_discarded()) {
    EXPECT_FALSE(sax.ok()) << what;
    return false;
  }
  const StatusOr<codec::OwnerOf<T>> want = codec::decode<T>(dom, root, options);
  EXPECT_EQ(want.ok(), sax.ok()) << what
                                 << "\nDOM: " << (want.ok() ? "ok" : describe(want.status()))
                                 << "\nSAX: " << (sax.ok() ? "ok" : describe(sax.status()));
  if (!want.ok() || !sax.ok()) {
    if (!want.ok() && !sax.ok()) {
      EXPECT_EQ(describe(want.status()), describe(sax.status())) << what;
    }
    return false;
  }
  EXPECT_TRUE(*want == *sax) << what;
  EXPECT_EQ(codec::toJsonText<T>(*want), codec::toJsonText<T>(*sax)) << what;
  return true;
}

// ---- The corpus -------------------------------------------------------------------

TEST(CodecSax, AgreesWithTheDomOnTheGoldenObjects) {
  int decoded = 0;
  int files = 0;
  for (const fs::path& path : filesIn(kSourceRoot / "test/client/testdata/codec/objects")) {
    const std::string name = path.filename().string();
    if (path.extension() != ".json") continue;
    ++files;
    const std::string text = readFile(path);
    for (codec::Unknown unknown :
         {codec::Unknown::kCapture, codec::Unknown::kRefuse, codec::Unknown::kSkip}) {
      codec::DecodeOptions options;
      options.unknown = unknown;
      const std::string what = name + " unknown=" + std::to_string(static_cast<int>(unknown));
      const std::string type = name.substr(0, name.find('-'));
      if (type == "slice") {
        decoded += expectSame<ResourceSlice>(text, "", options, what);
      } else if (type == "device") {
        decoded += expectSame<Device>(text, "devices[0]", options, what);
      } else if (type == "meta") {
        decoded += expectSame<ObjectMeta>(text, "metadata", options, what);
      }
      // Every input also as a slice, a device and metadata: wrong shapes must agree too.
      expectSame<ResourceSlice>(text, "", options, what + " as a slice");
      expectSame<Device>(text, "", options, what + " as a device");
      expectSame<ObjectMeta>(text, "metadata", options, what + " as metadata");
    }
  }
  EXPECT_GT(files, 20);
  EXPECT_GT(decoded, 10);
}

// Each watch event's object of the watch decoder's fuzz corpus (the first two bytes of each
// input steer the fuzzer).
TEST(CodecSax, AgreesWithTheDomOnTheWatchCorpus) {
  int objects = 0;
  for (const fs::path& path : filesIn(kSourceRoot / "test/fuzz/watch_decoder/corpus")) {
    const std::string stream = readFile(path);
    if (stream.size() < 2) continue;
    WatchDecoder decoder;
    (void)decoder.feed(std::string_view(stream).substr(2), [&](Json&& event) {
      if (event.is_object() && event.contains("object")) {
        ++objects;
        expectSame<ResourceSlice>(event["object"].dump(), "", {}, path.filename().string());
      }
      return true;
    });
  }
  EXPECT_GT(objects, 10);
}

// Every device of the pushed pools (examples and the pool fuzz corpus), decoded strictly as a
// push is.
TEST(CodecSax, AgreesWithTheDomOnPushedDevices) {
  int devices = 0;
  int per_file = 0;
  std::vector<fs::path> inputs = filesIn(kSourceRoot / "controller/inventory/examples");
  for (const fs::path& p : filesIn(kSourceRoot / "test/fuzz/pool_json/corpus")) inputs.push_back(p);
  codec::DecodeOptions strict;
  strict.unknown = codec::Unknown::kRefuse;
  const std::function<void(const Json&, const std::string&, int)> walk =
      [&](const Json& j, const std::string& what, int depth) {
        if (depth > 6) return;  // devices sit near the top; some inputs nest thousands deep
        if (j.is_object()) {
          if (auto it = j.find("devices"); it != j.end() && it->is_array()) {
            for (const Json& device : *it) {
              if (++per_file > 40) return;  // some inputs hold millions of bad devices
              ++devices;
              expectSame<Device>(device.dump(), "devices[0]", strict, what);
              expectSame<Device>(device.dump(), "devices[0]", {}, what);
            }
          }
          for (const auto& [key, value] : j.items()) walk(value, what, depth + 1);
        } else if (j.is_array()) {
          for (const Json& item : j) walk(item, what, depth + 1);
        }
      };
  for (const fs::path& path : inputs) {
    if (fs::file_size(path) > (256 << 10)) continue;  // the bulk inputs add nothing here
    const Json j = Json::parse(readFile(path), nullptr, /*allow_exceptions=*/false);
    per_file = 0;
    if (!j.is_discarded()) walk(j, path.filename().string(), 0);
  }
  EXPECT_GT(devices, 10);
}

// ---- Random slices ------------------------------------------------------------------

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  size_t below(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }
  std::string name(std::string_view prefix) {
    static const char* const kWords[] = {"a", "model", "b.example.com/x", "z", "é", "q\"k", "mem"};
    return std::string(prefix) + kWords[below(std::size(kWords))];
  }
  std::mt19937_64& engine() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

Quantity quantity(Random& r) {
  static const char* const kTexts[] = {"1", "80Gi", "1024Mi", "500m", "1e3", "0.5", "12345678901"};
  return *Quantity::parse(kTexts[r.below(std::size(kTexts))]);
}

Device randomDevice(Random& r, size_t i) {
  Device d;
  d.name = "dev-" + std::to_string(i);
  for (size_t n = r.below(6); n > 0; --n) {
    DeviceAttribute a;
    switch (r.below(6)) {
      case 0:
        a.int_value = static_cast<int64_t>(r.below(1000)) - 500;
        break;
      case 1:
        a.bool_value = r.chance(50);
        break;
      case 2:
        a.string_value = r.name("s");
        break;
      case 3:
        a.version_value = "1.2." + std::to_string(r.below(9));
        break;
      case 4:
        a.ints = std::vector<int64_t>{1, -2, 3};
        break;
      default:
        a.strings = std::vector<std::string>{"x", r.name("y")};
        break;
    }
    if (r.chance(10)) a.unknown = Json{{"future", {{"x", 1}}}};
    d.attributes[r.name("attr-")] = a;
  }
  for (size_t n = r.below(3); n > 0; --n) {
    DeviceCapacity c;
    c.value = quantity(r);
    if (r.chance(20)) {
      CapacityRequestPolicy p;
      if (r.chance(50)) p.default_value = quantity(r);
      p.valid_values = {quantity(r)};
      if (r.chance(50)) p.valid_range = CapacityRequestPolicyRange{quantity(r), {}, {}, nullptr};
      c.request_policy = p;
    }
    d.capacity[r.name("cap-")] = c;
  }
  if (r.chance(20)) d.taints.push_back({"k", "v", "NoSchedule", std::nullopt, nullptr});
  if (r.chance(10)) {
    DeviceCounterConsumption c;
    c.counter_set = "set";
    c.counters["c"] = Counter{quantity(r)};
    d.consumes_counters.push_back(c);
  }
  if (r.chance(10)) d.node_name = "node-a";
  if (r.chance(5)) d.binding_conditions = {"ready"};
  if (r.chance(10)) d.unknown = Json{{"nodeAllocatableResourceMappings2", {{"cpu", {}}}}};
  return d;
}

ResourceSlice randomSlice(Random& r) {
  ResourceSlice s;
  s.metadata.name = "slice-" + std::to_string(r.below(1000));
  s.metadata.resource_version = std::to_string(r.below(100000));
  s.metadata.labels["app"] = r.name("l");
  if (r.chance(30)) s.metadata.unknown = Json{{"managedFields", Json::array({{{"manager", "x"}}})}};
  s.spec.driver = "gpu.example.com";
  s.spec.pool = {"pool", static_cast<int64_t>(r.below(5)), 1, nullptr};
  s.spec.node_name = "node-a";
  for (size_t i = r.below(6); i > 0; --i) s.spec.devices.push_back(randomDevice(r, i));
  if (r.chance(10)) s.spec.unknown = Json{{"newerField", true}};
  return s;
}

const Json kBadValues[] = {nullptr,
                           1,
                           -3,
                           1.5,
                           "x",
                           true,
                           Json::array(),
                           Json::object(),
                           Json::array({nullptr}),
                           Json{{"a", 1}},
                           18446744073709551615ULL};

// Replaces a random value somewhere in `j` by a bad one.
void breakOne(Json& j, Random& r) {
  Json* at = &j;
  while (true) {
    if (at->is_object() && !at->empty() && r.chance(80)) {
      auto it = at->begin();
      std::advance(it, static_cast<std::ptrdiff_t>(r.below(at->size())));
      at = &it.value();
    } else if (at->is_array() && !at->empty() && r.chance(80)) {
      at = &(*at)[r.below(at->size())];
    } else {
      break;
    }
  }
  *at = kBadValues[r.below(std::size(kBadValues))];
}

// Writes `j` with the members of each object shuffled, spaces here and there, and sometimes a
// member written twice, first with some other value (the last counts).
void writeShuffled(const Json& j, Random& r, std::string& out) {
  if (j.is_object()) {
    std::vector<std::pair<std::string, const Json*>> members;
    for (const auto& [key, value] : j.items()) members.emplace_back(key, &value);
    std::shuffle(members.begin(), members.end(), r.engine());
    out.push_back('{');
    bool first = true;
    for (const auto& [key, value] : members) {
      if (r.chance(5)) {
        out += (first ? "" : ",") + Json(key).dump() + ":";
        writeShuffled(kBadValues[r.below(std::size(kBadValues))], r, out);
        first = false;
      }
      out += (first ? "" : ",") + std::string(r.chance(10) ? " " : "") + Json(key).dump() + ":";
      writeShuffled(*value, r, out);
      first = false;
    }
    out.push_back('}');
  } else if (j.is_array()) {
    out.push_back('[');
    for (size_t i = 0; i < j.size(); ++i) {
      if (i > 0) out.push_back(',');
      writeShuffled(j[i], r, out);
    }
    out.push_back(']');
  } else {
    out += j.dump();
  }
}

TEST(CodecSax, AgreesWithTheDomOnRandomSlices) {
  Random r(20261205);
  int decoded = 0;
  int failed = 0;
  for (int round = 0; round < 600; ++round) {
    const ResourceSlice slice = randomSlice(r);
    Json j = Json::parse(toJsonText(slice));
    const int broken = round % 3 == 0 ? 0 : static_cast<int>(r.below(4));
    for (int b = 0; b < broken; ++b) breakOne(j, r);
    std::string text;
    writeShuffled(j, r, text);
    for (codec::Unknown unknown : {codec::Unknown::kCapture, codec::Unknown::kRefuse}) {
      codec::DecodeOptions options;
      options.unknown = unknown;
      options.max_details = 1 + r.below(4);  // the cap keeps the first in the DOM's order
      if (expectSame<ResourceSlice>(text, "", options,
                                    "round " + std::to_string(round) + " " + text)) {
        ++decoded;
      } else {
        ++failed;
      }
    }
    if (::testing::Test::HasFailure()) break;
  }
  // Both outcomes were exercised.
  EXPECT_GT(decoded, 100);
  EXPECT_GT(failed, 100);
}

// The canonical text of a device (what the intern table is keyed by) is the DOM's dump.
TEST(CodecSax, DeviceTextIsTheDomDump) {
  Random r(7);
  for (int round = 0; round < 200; ++round) {
    const Json device = Json::parse(codec::toJsonText<Device>(randomDevice(r, 1)));
    std::string text;
    writeShuffled(device, r, text);
    codec::CanonicalText canonical;
    struct Forward : nlohmann::json_sax<Json> {
      codec::CanonicalText& c;
      explicit Forward(codec::CanonicalText& c) : c(c) {}
      bool null() override { return scalar({}); }
      bool boolean(bool v) override {
        codec::SaxScalar s;
        s.kind = codec::SaxScalar::Kind::kBool;
        s.boolean = v;
        return scalar(s);
      }
      bool number_integer(number_integer_t v) override {
        codec::SaxScalar s;
        s.kind = codec::SaxScalar::Kind::kInteger;
        s.integer = v;
        return scalar(s);
      }
      bool number_unsigned(number_unsigned_t v) override {
        codec::SaxScalar s;
        s.kind = codec::SaxScalar::Kind::kUnsigned;
        s.unsigned_integer = v;
        return scalar(s);
      }
      bool number_float(number_float_t v, const string_t& /*t*/) override {
        codec::SaxScalar s;
        s.kind = codec::SaxScalar::Kind::kFloat;
        s.floating = v;
        return scalar(s);
      }
      bool string(string_t& v) override {
        codec::SaxScalar s;
        s.kind = codec::SaxScalar::Kind::kString;
        s.string = &v;
        return scalar(s);
      }
      bool binary(binary_t& /*v*/) override { return false; }
      bool start_object(std::size_t /*n*/) override {
        c.startContainer(true);
        return true;
      }
      bool key(string_t& k) override {
        c.key(k);
        return true;
      }
      bool end_object() override {
        c.endContainer();
        return true;
      }
      bool start_array(std::size_t /*n*/) override {
        c.startContainer(false);
        return true;
      }
      bool end_array() override {
        c.endContainer();
        return true;
      }
      bool parse_error(std::size_t /*p*/, const std::string& /*t*/,
                       const nlohmann::detail::exception& /*e*/) override {
        return false;
      }
      bool scalar(const codec::SaxScalar& s) {
        c.scalar(s);
        return true;
      }
    } forward(canonical);
    ASSERT_TRUE(Json::sax_parse(text, &forward));
    EXPECT_EQ(Json::parse(text).dump(-1, ' ', false, Json::error_handler_t::replace),
              canonical.text());
  }
}

// A live slice whose devices are held decodes to the held forms, as the DOM's does.
TEST(CodecSax, HeldDevicesAreFoundByTheirText) {
  Random r(11);
  ResourceSlice slice = randomSlice(r);
  slice.spec.devices = {randomDevice(r, 1), randomDevice(r, 2)};
  std::string text;
  writeShuffled(Json::parse(toJsonText(slice)), r, text);
  StatusOr<ResourceSlice> sax = codec::decodeText<ResourceSlice>(text);
  ASSERT_TRUE(sax.ok()) << sax.status().message();
  ASSERT_EQ(sax->spec.devices.size(), 2u);
  EXPECT_EQ(sax->spec.devices[0].get(), slice.spec.devices[0].get());
  EXPECT_EQ(sax->spec.devices[1].get(), slice.spec.devices[1].get());
}

// ---- Limits and bad input ------------------------------------------------------------

std::string nested(size_t depth) {
  // depth containers in all: the slice, its metadata, and an unknown member nesting the rest.
  std::string text = R"({"metadata":{"x":)";
  for (size_t i = 2; i < depth; ++i) text += "[";
  for (size_t i = 2; i < depth; ++i) text += "]";
  return text + "}}";
}

TEST(CodecSax, RefusesTextNestedDeeperThanTheLimit) {
  EXPECT_TRUE(codec::decodeText<ResourceSlice>(nested(codec::kMaxSaxDepth)).ok());
  StatusOr<ResourceSlice> deep = codec::decodeText<ResourceSlice>(nested(codec::kMaxSaxDepth + 1));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(deep.status().message(), "JSON nested deeper than 256 levels");
}

TEST(CodecSax, NamesTheFieldOfABadValue) {
  const std::string text = R"({"spec":{"devices":[{"name":"a"},{"capacity":{"mem":{"value":"lots"}},
      "name":"b","attributes":{"model":{"int":"x"}}}],"driver":7}})";
  StatusOr<ResourceSlice> sax = codec::decodeText<ResourceSlice>(text);
  ASSERT_FALSE(sax.ok());
  ASSERT_EQ(sax.status().details().size(), 3u);
  // In the DOM's order: by key, whatever the order of the text.
  EXPECT_EQ(sax.status().details()[0].field, "spec.devices[1].attributes[\"model\"].int");
  EXPECT_EQ(sax.status().details()[1].field, "spec.devices[1].capacity[\"mem\"].value");
  EXPECT_EQ(sax.status().details()[2].field, "spec.driver");
  EXPECT_EQ(sax.status().details()[2].message, "must be a string");
  expectSame<ResourceSlice>(text, "", {}, "bad values");
}

TEST(CodecSax, TheLastOfDuplicateMembersCounts) {
  const std::string text =
      R"({"spec":{"driver":7,"driver":"d","devices":[{"name":"a","name":"b"}]},)"
      R"("metadata":{"labels":{"a":1,"a":"x"},"name":"n"},"metadata":{"name":"m"}})";
  StatusOr<ResourceSlice> sax = codec::decodeText<ResourceSlice>(text);
  ASSERT_TRUE(sax.ok()) << sax.status().message();
  EXPECT_EQ(sax->spec.driver, "d");
  EXPECT_EQ(sax->metadata.name, "m");
  EXPECT_TRUE(sax->metadata.labels.empty());
  ASSERT_EQ(sax->spec.devices.size(), 1u);
  EXPECT_EQ(sax->spec.devices[0]->name(), "b");
  expectSame<ResourceSlice>(text, "", {}, "duplicates");
}

TEST(CodecSax, ChecksTheTypeOfTheTopObjectOnly) {
  expectSame<ResourceSlice>(R"({"kind":"Node","spec":{"driver":1}})", "", {}, "kind");
  expectSame<ResourceSlice>(R"({"apiVersion":["v1"]})", "", {}, "apiVersion");
  expectSame<ResourceSlice>(R"([1,2])", "", {}, "array");
  expectSame<ResourceSlice>(R"("slice")", "", {}, "string");
  expectSame<ResourceSlice>(R"({"metadata":{"kind":"x"},"kind":null})", "", {}, "nested kind");
  EXPECT_FALSE(codec::decodeText<ResourceSlice>(R"({"spec":})").ok());
  EXPECT_FALSE(codec::decodeText<ResourceSlice>(R"({} {})").ok());
}

}  // namespace
}  // namespace rsc::client
