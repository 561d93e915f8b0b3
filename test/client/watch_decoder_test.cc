#include "client/watch_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace rsc::client {
namespace {

using ::testing::HasSubstr;

// Feeds `chunks` in order and returns every decoded value, failing the test
// on a decoding error.
std::vector<Json> decodeAll(WatchDecoder& decoder, const std::vector<std::string>& chunks) {
  std::vector<Json> values;
  for (const auto& chunk : chunks) {
    const Status status = decoder.feed(chunk, [&](Json&& value) {
      values.push_back(std::move(value));
      return true;
    });
    EXPECT_TRUE(status.ok()) << status.toString();
  }
  return values;
}

// Two events whose strings hold braces, brackets, escaped quotes and an
// escaped backslash right before a closing quote: framing that counted
// brackets without tracking strings would cut them in the wrong place.
constexpr std::string_view kFirst =
    R"({"type":"ADDED","object":{"metadata":{"name":"a","annotations":)"
    R"({"note":"}{ ][ \"}\" \\","path":"C:\\"}},"list":[1,{"x":[]}]}})";
constexpr std::string_view kSecond =
    R"({"type":"DELETED","object":{"s":"\u007b{","n":-1.5e3,"t":true}})";

TEST(WatchDecoder, SplitAtEveryByteOffsetOfTwoEvents) {
  const std::string both = std::string(kFirst) + "\n" + std::string(kSecond) + "\n";
  const Json first = Json::parse(kFirst);
  const Json second = Json::parse(kSecond);
  for (size_t cut = 0; cut <= both.size(); ++cut) {
    WatchDecoder decoder;
    const auto values = decodeAll(decoder, {both.substr(0, cut), both.substr(cut)});
    ASSERT_EQ(values.size(), 2u) << "cut at " << cut;
    EXPECT_EQ(values[0], first) << "cut at " << cut;
    EXPECT_EQ(values[1], second) << "cut at " << cut;
    EXPECT_TRUE(decoder.finish().ok()) << "cut at " << cut;
  }
}

TEST(WatchDecoder, SplitAtEveryPairOfOffsetsIntoThreeChunks) {
  const std::string both = std::string(kFirst) + std::string(kSecond);
  for (size_t a = 0; a <= both.size(); a += 7) {
    for (size_t b = a; b <= both.size(); b += 5) {
      WatchDecoder decoder;
      const auto values =
          decodeAll(decoder, {both.substr(0, a), both.substr(a, b - a), both.substr(b)});
      ASSERT_EQ(values.size(), 2u) << a << "/" << b;
      EXPECT_EQ(values[1], Json::parse(kSecond));
    }
  }
}

TEST(WatchDecoder, OneByteAtATime) {
  const std::string both = std::string(kFirst) + "\r\n\t " + std::string(kSecond);
  WatchDecoder decoder;
  std::vector<std::string> bytes;
  for (char c : both) {
    bytes.emplace_back(1, c);
  }
  const auto values = decodeAll(decoder, bytes);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0], Json::parse(kFirst));
  EXPECT_EQ(values[1], Json::parse(kSecond));
}

TEST(WatchDecoder, ManyEventsInOneChunkWithAndWithoutNewlines) {
  std::string chunk;
  const std::vector<std::string> separators = {"", "\n", " ", "\r\n", "\t\n  "};
  for (int i = 0; i < 1000; ++i) {
    chunk += R"({"type":"MODIFIED","object":{"i":)" + std::to_string(i) + "}}";
    chunk += separators[static_cast<size_t>(i) % separators.size()];
  }
  WatchDecoder decoder;
  const auto values = decodeAll(decoder, {chunk});
  ASSERT_EQ(values.size(), 1000u);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(values[static_cast<size_t>(i)]["object"]["i"], i);
  }
  EXPECT_TRUE(decoder.finish().ok());
}

TEST(WatchDecoder, MultiByteUtf8IsKeptIntact) {
  const std::string event = "{\"note\":\"caf\xc3\xa9 \xe2\x9c\x93 }\"}";
  WatchDecoder decoder;
  const auto values = decodeAll(decoder, {event.substr(0, 13), event.substr(13)});
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0]["note"], "caf\xc3\xa9 \xe2\x9c\x93 }");
}

TEST(WatchDecoder, StoppingEarlyKeepsTheRestForTheNextCall) {
  WatchDecoder decoder;
  std::vector<Json> values;
  const std::string three = R"({"i":1}{"i":2}{"i":3})";
  ASSERT_TRUE(decoder
                  .feed(three,
                        [&](Json&& value) {
                          values.push_back(std::move(value));
                          return false;
                        })
                  .ok());
  ASSERT_EQ(values.size(), 1u);
  EXPECT_FALSE(decoder.finish().ok()) << "two events are still pending";
  const auto rest = decodeAll(decoder, {""});
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0]["i"], 2);
  EXPECT_EQ(rest[1]["i"], 3);
  EXPECT_TRUE(decoder.finish().ok());
}

TEST(WatchDecoder, FinishReportsATruncatedEvent) {
  WatchDecoder decoder;
  EXPECT_TRUE(decoder.finish().ok());
  const auto values = decodeAll(decoder, {R"({"i":1}  {"type":"ADD)"});
  EXPECT_EQ(values.size(), 1u);
  const Status status = decoder.finish();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("ended inside an event"));
}

TEST(WatchDecoder, WhitespaceOnlyIsNoEvent) {
  WatchDecoder decoder;
  EXPECT_TRUE(decodeAll(decoder, {" \n", "\r\n\t", ""}).empty());
  EXPECT_TRUE(decoder.finish().ok());
}

TEST(WatchDecoder, OversizedEventIsRejected) {
  WatchDecoder decoder(/*max_event_bytes=*/64);
  const std::string small = R"({"i":1})";
  const std::string big = R"({"pad":")" + std::string(100, 'x') + R"("})";
  int seen = 0;
  const Status status = decoder.feed(small + big, [&](Json&&) {
    ++seen;
    return true;
  });
  EXPECT_EQ(seen, 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("larger than 64 bytes"));
}

TEST(WatchDecoder, OversizedEventIsRejectedBeforeItEnds) {
  WatchDecoder decoder(/*max_event_bytes=*/64);
  const auto on_event = [](Json&&) { return true; };
  ASSERT_TRUE(decoder.feed(R"({"pad":")" + std::string(40, 'x'), on_event).ok());
  const Status status = decoder.feed(std::string(40, 'x'), on_event);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
}

TEST(WatchDecoder, EventOfExactlyTheLimitIsAccepted) {
  const std::string event = R"({"pad":")" + std::string(20, 'x') + R"("})";
  WatchDecoder decoder(event.size());
  EXPECT_EQ(decodeAll(decoder, {event}).size(), 1u);
}

struct MalformedCase {
  std::string name;
  std::string input;
};

class WatchDecoderMalformed : public ::testing::TestWithParam<MalformedCase> {};

TEST_P(WatchDecoderMalformed, IsInvalidArgumentAndStaysFailed) {
  WatchDecoder decoder;
  const auto on_event = [](Json&&) { return true; };
  const Status status = decoder.feed(GetParam().input, on_event);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.toString();
  // Nothing after a framing error can be trusted.
  EXPECT_EQ(decoder.feed(R"({"i":1})", on_event).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decoder.finish().code(), StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(
    Inputs, WatchDecoderMalformed,
    ::testing::Values(MalformedCase{"TrailingComma", R"({"a":1,})"},
                      MalformedCase{"MismatchedBracket", R"({"a":[1}])"},
                      MalformedCase{"GarbageBetweenEvents", R"({"a":1}x{"a":2})"},
                      MalformedCase{"TopLevelString", R"("just a string")"},
                      MalformedCase{"TopLevelNumber", "42 "},
                      MalformedCase{"StrayClosingBrace", "}"},
                      MalformedCase{"MissingColon", R"({"a" 1})"},
                      MalformedCase{"InvalidUtf8", "{\"a\":\"\xff\xfe\"}"},
                      MalformedCase{"BadEscape", R"({"a":"\q"})"}),
    [](const ::testing::TestParamInfo<MalformedCase>& info) { return info.param.name; });

// ---- resourceSliceWatchEventFromJson ----

ResourceSlice sampleSlice() {
  ResourceSlice slice;
  slice.metadata.name = "00000-gpu.example.com-node-a-x7k2p";
  slice.metadata.uid = "6a1f6c0e-2f4e-4a57-9d6c-0b7e0b5c1c11";
  slice.metadata.resource_version = "4711";
  slice.metadata.generation = 2;
  slice.metadata.labels["app.kubernetes.io/managed-by"] = "resourceslice-controller";
  slice.spec.driver = "gpu.example.com";
  slice.spec.pool = ResourcePool{"node-a", 3, 1};
  slice.spec.node_name = "node-a";
  Device device;
  device.name = "gpu-0";
  device.attributes["model"].string_value = "h100";
  slice.spec.devices.push_back(device);
  return slice;
}

Json sliceObject(const ResourceSlice& slice) {
  Json object = toJson(slice);
  object["kind"] = "ResourceSlice";
  object["apiVersion"] = kResourceApiVersion;
  return object;
}

TEST(ResourceSliceWatchEvent, ObjectEventsCarryTheSlice) {
  const ResourceSlice slice = sampleSlice();
  const std::vector<std::pair<std::string, WatchEventType>> types = {
      {"ADDED", WatchEventType::kAdded},
      {"MODIFIED", WatchEventType::kModified},
      {"DELETED", WatchEventType::kDeleted}};
  for (const auto& [name, type] : types) {
    const auto event =
        resourceSliceWatchEventFromJson(Json{{"type", name}, {"object", sliceObject(slice)}});
    ASSERT_TRUE(event.ok()) << name << ": " << event.status().toString();
    EXPECT_EQ(event->type, type);
    EXPECT_EQ(event->object, slice) << name;
    EXPECT_TRUE(event->error.ok());
  }
}

TEST(ResourceSliceWatchEvent, DecodesWhatTheDecoderFramed) {
  const ResourceSlice slice = sampleSlice();
  const std::string wire = Json{{"type", "ADDED"}, {"object", sliceObject(slice)}}.dump() + "\n";
  WatchDecoder decoder;
  std::vector<WatchEvent<ResourceSlice>> events;
  for (size_t at = 0; at < wire.size(); at += 17) {
    ASSERT_TRUE(decoder
                    .feed(wire.substr(at, 17),
                          [&](Json&& value) {
                            auto event = resourceSliceWatchEventFromJson(value);
                            EXPECT_TRUE(event.ok()) << event.status().toString();
                            if (event.ok()) {
                              events.push_back(std::move(event).value());
                            }
                            return true;
                          })
                    .ok());
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].object, slice);
}

TEST(ResourceSliceWatchEvent, BookmarkNeedsOnlyTheResourceVersion) {
  const Json bookmark = Json::parse(R"({"type":"BOOKMARK","object":{"kind":"ResourceSlice",
      "apiVersion":"resource.k8s.io/v1","metadata":{"resourceVersion":"98765",
      "annotations":{"k8s.io/initial-events-end":"true"}}}})");
  const auto event = resourceSliceWatchEventFromJson(bookmark);
  ASSERT_TRUE(event.ok()) << event.status().toString();
  EXPECT_EQ(event->type, WatchEventType::kBookmark);
  EXPECT_EQ(event->object.metadata.resource_version, "98765");
  EXPECT_EQ(event->object.metadata.annotations.at("k8s.io/initial-events-end"), "true");
  EXPECT_TRUE(event->object.spec.devices.empty());
}

TEST(ResourceSliceWatchEvent, BookmarkWithoutResourceVersionIsInvalid) {
  const auto event = resourceSliceWatchEventFromJson(
      Json::parse(R"({"type":"BOOKMARK","object":{"metadata":{}}})"));
  EXPECT_EQ(event.status().code(), StatusCode::kInvalidArgument);
}

TEST(ResourceSliceWatchEvent, ErrorGoneBecomesKGone) {
  const Json error = Json::parse(R"json({"type":"ERROR","object":{"kind":"Status",
      "apiVersion":"v1","metadata":{},"status":"Failure",
      "message":"too old resource version: 123 (456)","reason":"Expired","code":410}})json");
  const auto event = resourceSliceWatchEventFromJson(error);
  ASSERT_TRUE(event.ok()) << event.status().toString();
  EXPECT_EQ(event->type, WatchEventType::kError);
  EXPECT_EQ(event->error.code(), StatusCode::kGone);
  EXPECT_THAT(event->error.message(), HasSubstr("too old resource version"));
}

TEST(ResourceSliceWatchEvent, ErrorInternalBecomesUnavailable) {
  const Json error = Json::parse(R"({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1",
      "metadata":{},"status":"Failure","message":"etcd is sad","reason":"InternalError",
      "code":500}})");
  const auto event = resourceSliceWatchEventFromJson(error);
  ASSERT_TRUE(event.ok()) << event.status().toString();
  EXPECT_EQ(event->error.code(), StatusCode::kUnavailable);
}

TEST(ResourceSliceWatchEvent, ErrorWithoutFailureIsStillAnError) {
  const auto event = resourceSliceWatchEventFromJson(
      Json::parse(R"({"type":"ERROR","object":{"kind":"Status","status":"Success","code":200}})"));
  ASSERT_TRUE(event.ok()) << event.status().toString();
  EXPECT_FALSE(event->error.ok());
}

TEST(ResourceSliceWatchEvent, MalformedEventsAreInvalid) {
  const std::vector<std::string> inputs = {
      R"([])",
      R"({"object":{}})",
      R"({"type":7,"object":{}})",
      R"({"type":"ADDED"})",
      R"({"type":"ADDED","object":"x"})",
      R"({"type":"RENAMED","object":{}})",
      R"({"type":"ADDED","object":{"metadata":{"name":"a"},"spec":"not an object"}})",
  };
  for (const auto& input : inputs) {
    const auto event = resourceSliceWatchEventFromJson(Json::parse(input));
    EXPECT_EQ(event.status().code(), StatusCode::kInvalidArgument) << input;
  }
}

// The controller reads slice events from their text (no DOM); every event,
// in the API server's own form or any other, reads as its DOM does.
TEST(ResourceSliceWatchEvent, TextReadsAsTheDom) {
  const std::string object = sliceObject(sampleSlice()).dump();
  const std::vector<std::string> inputs = {
      R"({"type":"ADDED","object":)" + object + "}",
      R"({"type":"MODIFIED","object":)" + object + "}",
      R"({"type":"DELETED","object":)" + object + "}",
      R"({ "type" : "ADDED", "object" : )" + object + " }",
      R"({"object":)" + object + R"(,"type":"MODIFIED"})",
      R"({"type":"ADDED","object":)" + object + R"(,"extra":1})",
      R"({"type":"ADDED","object":)" + object + R"(,"type":"DELETED"})",
      R"({"type":"ADDED","object":{"metadata":{"name":"a"},"spec":"not an object"}})",
      R"({"type":"ADDED","object":{"metadata":{"name":"a"}},"object":{"metadata":{"name":"b"}}})",
      R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}})",
      R"({"type":"ERROR","object":{"kind":"Status","status":"Failure","code":410,"reason":"Expired"}})",
      R"({"type":"RENAMED","object":{}})",
      R"({"type":"ADDED"})",
  };
  for (const std::string& input : inputs) {
    const auto dom = resourceSliceWatchEventFromJson(Json::parse(input));
    const auto text = resourceSliceWatchEventFromText(input);
    ASSERT_EQ(text.ok(), dom.ok()) << input << "\n" << text.status().toString();
    if (!dom.ok()) {
      EXPECT_EQ(text.status(), dom.status()) << input;
      continue;
    }
    EXPECT_EQ(text->type, dom->type) << input;
    EXPECT_EQ(text->object, dom->object) << input;
    EXPECT_EQ(text->error, dom->error) << input;
  }
}

// The watch echoes each of the controller's writes, whose answer the store
// holds already: an event in that very state (name, uid and resourceVersion)
// is read up to its spec, which is the held slice's. The held slice here has
// a spec the text does not, so the test tells which was read.
TEST(ResourceSliceWatchEvent, HeldStateIsReadUpToItsMetadata) {
  const ResourceSlice sent = sampleSlice();
  auto held = std::make_shared<ResourceSlice>(sent);
  held->spec.driver = "held.example.com";
  held->metadata.labels.clear();
  std::vector<std::string> asked;
  const HeldSlice lookup = [&](const std::string& name) -> std::shared_ptr<const ResourceSlice> {
    asked.push_back(name);
    return held;
  };
  const std::string object = sliceObject(sent).dump();
  for (const std::string type : {"ADDED", "MODIFIED"}) {
    asked.clear();
    const auto event = resourceSliceWatchEventFromText(
        R"({"type":")" + type + R"(","object":)" + object + "}", lookup);
    ASSERT_TRUE(event.ok()) << event.status().toString();
    EXPECT_EQ(event->object.spec, held->spec) << type;
    EXPECT_EQ(event->object.metadata, sent.metadata) << type << ": the metadata is the text's";
    EXPECT_EQ(asked, std::vector<std::string>{sent.metadata.name});
  }
  // A deletion reports the last state; it is read whole.
  const auto deleted =
      resourceSliceWatchEventFromText(R"({"type":"DELETED","object":)" + object + "}", lookup);
  ASSERT_TRUE(deleted.ok()) << deleted.status().toString();
  EXPECT_EQ(deleted->object, sent);
}

TEST(ResourceSliceWatchEvent, AnyOtherStateIsReadWhole) {
  const ResourceSlice sent = sampleSlice();
  const std::string event = R"({"type":"MODIFIED","object":)" + sliceObject(sent).dump() + "}";
  auto held_with = [&](auto change) {
    auto held = std::make_shared<ResourceSlice>(sent);
    held->spec.driver = "held.example.com";
    change(*held);
    return [held](const std::string&) -> std::shared_ptr<const ResourceSlice> { return held; };
  };
  const std::vector<std::pair<std::string, HeldSlice>> cases = {
      {"another resourceVersion",
       held_with([](ResourceSlice& s) { s.metadata.resource_version = "4712"; })},
      {"another uid", held_with([](ResourceSlice& s) { s.metadata.uid = "another"; })},
      {"none held", [](const std::string&) { return std::shared_ptr<const ResourceSlice>(); }},
      {"no lookup", nullptr},
  };
  for (const auto& [name, held] : cases) {
    const auto read = resourceSliceWatchEventFromText(event, held);
    ASSERT_TRUE(read.ok()) << name << ": " << read.status().toString();
    EXPECT_EQ(read->object, sent) << name;
  }

  // Without a uid or resourceVersion, or with the spec before the metadata,
  // nothing identifies the state before the spec: read whole.
  ResourceSlice anonymous = sent;
  anonymous.metadata.uid.clear();
  auto held = std::make_shared<ResourceSlice>(anonymous);
  held->spec.driver = "held.example.com";
  const HeldSlice lookup = [&](const std::string&) -> std::shared_ptr<const ResourceSlice> {
    return held;
  };
  const auto no_uid = resourceSliceWatchEventFromText(
      R"({"type":"ADDED","object":)" + sliceObject(anonymous).dump() + "}", lookup);
  ASSERT_TRUE(no_uid.ok()) << no_uid.status().toString();
  EXPECT_EQ(no_uid->object, anonymous);

  Json object = sliceObject(sent);
  const std::string spec_first = R"({"type":"ADDED","object":{"spec":)" + object["spec"].dump() +
                                 R"(,"metadata":)" + object["metadata"].dump() +
                                 R"(,"kind":"ResourceSlice","apiVersion":")" +
                                 std::string(kResourceApiVersion) + R"("}})";
  auto same = std::make_shared<ResourceSlice>(sent);
  same->spec.driver = "held.example.com";
  const auto reordered = resourceSliceWatchEventFromText(
      spec_first, [&](const std::string&) -> std::shared_ptr<const ResourceSlice> { return same; });
  ASSERT_TRUE(reordered.ok()) << reordered.status().toString();
  EXPECT_EQ(reordered->object, sent);
}

TEST(ResourceSliceWatchEvent, TextThatIsNotJsonFailsTheStreamAsMalformed) {
  const std::string bad = R"({"type":"ADDED","object":{"metadata":{"name":"a"}]})";
  const auto event = resourceSliceWatchEventFromText(bad);
  EXPECT_EQ(event.status().reason(), kReasonNotJson) << event.status().toString();

  WatchDecoder decoder;
  int read = 0;
  const Status fed = decoder.feedText(bad + "\n", [&](std::string_view text) {
    ++read;
    return resourceSliceWatchEventFromText(text).status().reason() == kReasonNotJson
               ? WatchDecoder::Verdict::kMalformed
               : WatchDecoder::Verdict::kMore;
  });
  EXPECT_EQ(read, 1);
  EXPECT_EQ(fed.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(fed.message(), HasSubstr("malformed JSON event"));
  EXPECT_FALSE(
      decoder.feedText("{}", [](std::string_view) { return WatchDecoder::Verdict::kMore; }).ok());
}

TEST(WatchDecoder, RefusesEventsNestedTooDeep) {
  WatchDecoder decoder;
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  int events = 0;
  const Status status = decoder.feed(deep, [&](Json&&) {
    ++events;
    return true;
  });
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("nested deeper"), std::string::npos) << status.message();
  EXPECT_EQ(events, 0);
}

}  // namespace
}  // namespace rsc::client
