#include "client/yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

namespace rsc::client {
namespace {

using ::testing::HasSubstr;

Json parsed(const std::string& text) {
  auto j = yamlToJson(text);
  EXPECT_TRUE(j.ok()) << j.status().toString() << "\n" << text;
  return j.ok() ? *j : Json();
}

TEST(YamlToJson, PlainScalarsFollowTheCoreSchemaAndQuotedOnesStayStrings) {
  const Json j = parsed(R"(# leading comment
plain: hello world   # trailing comment
url: https://host:6443/path#frag
dq: "a \"quoted\" \\ value\t\u00e9 # not a comment"
sq: 'it''s # kept'
empty:
tilde: ~
null_word: null
yes_bool: true
no_bool: False
number: -42
big: 12345678901234567890
float: 1.5
inf: +.Inf
minus_inf: -.INF
one_one_bool: yes
quoted_true: "true"
quoted_number: '123'
str_tag: !!str 12
"quoted key": 1
7: seven
)");
  EXPECT_EQ(j["plain"], "hello world");
  EXPECT_EQ(j["url"], "https://host:6443/path#frag");
  EXPECT_EQ(j["dq"], "a \"quoted\" \\ value\t\xC3\xA9 # not a comment");
  EXPECT_EQ(j["sq"], "it's # kept");
  EXPECT_TRUE(j["empty"].is_null());
  EXPECT_TRUE(j["tilde"].is_null());
  EXPECT_TRUE(j["null_word"].is_null());
  EXPECT_EQ(j["yes_bool"], true);
  EXPECT_EQ(j["no_bool"], false);
  EXPECT_EQ(j["number"], -42);
  EXPECT_TRUE(j["big"].is_number_float()) << "past int64: a float, as in JSON";
  EXPECT_EQ(j["float"], 1.5);
  EXPECT_EQ(j["inf"], std::numeric_limits<double>::infinity());
  EXPECT_EQ(j["minus_inf"], -std::numeric_limits<double>::infinity());
  EXPECT_EQ(j["one_one_bool"], "yes") << "a YAML 1.1 bool, a string under the 1.2 core schema";
  EXPECT_EQ(j["quoted_true"], "true");
  EXPECT_EQ(j["quoted_number"], "123");
  EXPECT_EQ(j["str_tag"], "12");
  EXPECT_EQ(j["quoted key"], 1);
  EXPECT_EQ(j["7"], "seven");
}

TEST(YamlToJson, BlockScalars) {
  const Json j = parsed(
      "literal: |\n  line one\n    indented\n  line three\n"
      "folded: >\n  folded\n  into one\n\n  paragraph two\n"
      "strip: |-\n  no newline\n"
      "keep: |+\n  kept\n\n"
      "after: x\n");
  EXPECT_EQ(j["literal"], "line one\n  indented\nline three\n");
  EXPECT_EQ(j["folded"], "folded into one\nparagraph two\n");
  EXPECT_EQ(j["strip"], "no newline");
  EXPECT_EQ(j["keep"], "kept\n\n");
  EXPECT_EQ(j["after"], "x");
}

TEST(YamlToJson, AnchorsAliasesAndMergeKeys) {
  const Json j = parsed(R"(base: &base {a: 1, b: 2}
other: &other {b: 20, c: 30}
copy: *base
merged:
  <<: *base
  b: explicit
listed:
  <<: [*other, *base]
scalar: &s value
again: *s
)");
  EXPECT_EQ(j["copy"], Json::parse(R"({"a": 1, "b": 2})"));
  EXPECT_EQ(j["merged"], Json::parse(R"({"a": 1, "b": "explicit"})")) << "explicit keys win";
  EXPECT_EQ(j["listed"], Json::parse(R"({"a": 1, "b": 20, "c": 30})")) << "earlier sources win";
  EXPECT_EQ(j["again"], "value");
}

TEST(YamlToJson, FlowAndBlockCollections) {
  const Json j = parsed(R"(flow_seq: [a, "b c", 'd', 3]
flow_map: {k: v, n: {x: [1, 2]}, e: {}}
empty_seq: []
nested:
  - - x
    - y
  -
    inner: 2
  - z
users:
  - name: a
    user:
      token: t
  - name: b
)");
  EXPECT_EQ(j["flow_seq"], Json::parse(R"(["a", "b c", "d", 3])"));
  EXPECT_EQ(j["flow_map"], Json::parse(R"({"k": "v", "n": {"x": [1, 2]}, "e": {}})"));
  EXPECT_EQ(j["empty_seq"], Json::array());
  EXPECT_EQ(j["nested"], Json::parse(R"([["x", "y"], {"inner": 2}, "z"])"));
  EXPECT_EQ(j["users"][0]["user"]["token"], "t");
  EXPECT_EQ(j["users"][1]["name"], "b");
}

TEST(YamlToJson, JsonAndEmptyText) {
  EXPECT_EQ(parsed(R"(  {"kind": "Config", "clusters": [{"name": "a", "n": 1.5}]})"),
            Json::parse(R"({"kind": "Config", "clusters": [{"name": "a", "n": 1.5}]})"));
  EXPECT_TRUE(parsed("").is_null());
  EXPECT_TRUE(parsed("# nothing\n\n").is_null());
  EXPECT_EQ(parsed("---\na: 1\n...\n"), Json::parse(R"({"a": 1})"));
}

TEST(YamlToJson, ErrorsNameTheLine) {
  struct Case {
    std::string text;
    std::string want;
  };
  // An alias expanded a thousand times over: refused, not expanded.
  std::string laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'h'; ++c) {
    const std::string prev(1, static_cast<char>(c - 1));
    laughs += std::string(1, c) + ": &" + std::string(1, c) + " [*" + prev + ", *" + prev + ", *" +
              prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
              ", *" + prev + ", *" + prev + "]\n";
  }
  const std::vector<Case> cases = {
      {"a: 1\na: 2\n", "line 2: duplicate key \"a\""},
      {"a: [1, 2\n", "line 2, column 1: end of sequence flow not found"},
      {"a: 1\n   b: 2\n", "line 2, column 5: "},
      {"a: 1\n---\nb: 2\n", "more than one YAML document"},
      {"a: *nowhere\n", "line 1, column 4: "},
      {"a: &a [*a]\n", "nested deeper than 64 levels (or an alias within itself)"},
      {laughs, "more than 100000 values once aliases are expanded"},
      {"a: !!int text\n", "line 1: \"text\" is not a !!int"},
      {"a: !custom x\n", "line 1: unsupported tag \"!custom\""},
      {"? [complex]\n: v\n", "line 1: a mapping key must be a scalar"},
      {"m:\n  <<: 1\n", "line 2: a merge key (<<) takes a mapping or a list of mappings"},
  };
  for (const auto& c : cases) {
    auto j = yamlToJson(c.text);
    ASSERT_FALSE(j.ok()) << "parsed: " << c.text;
    EXPECT_EQ(j.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(j.status().message(), HasSubstr(c.want)) << c.text;
  }
}

}  // namespace
}  // namespace rsc::client
