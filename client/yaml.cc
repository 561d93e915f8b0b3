#include "client/yaml.h"

#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/strings.h"

namespace rsc::client {
namespace {

constexpr std::string_view kTagPrefix = "tag:yaml.org,2002:";

std::string at(const YAML::Mark& mark) {
  if (mark.is_null()) return "";
  return "line " + std::to_string(mark.line + 1) + ": ";
}

// The YAML 1.2 core schema's reading of a plain scalar.
Json plainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  const char* begin = s.data() + (s[0] == '+' ? 1 : 0);
  const char* end = s.data() + s.size();
  if (const auto i = parseWhole<int64_t>(std::string_view(begin, end))) return *i;
  if (s.find_first_of("0123456789") != std::string::npos &&
      s.find_first_not_of("0123456789+-.eE") == std::string::npos) {
    double d = 0;
    if (auto [p, ec] = std::from_chars(begin, end, d); ec == std::errc() && p == end) return d;
  }
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf" || s == "+.Inf" || s == "+.INF") {
    return std::numeric_limits<double>::infinity();
  }
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -std::numeric_limits<double>::infinity();
  return s;
}

// Plain scalars that plainScalar() reads as strings and YAML 1.1 as
// something else; NaN too, which JSON cannot hold.
bool yaml11NonString(std::string_view s) {
  static const std::set<std::string_view> words = {"y",   "Y",   "yes",  "Yes",  "YES", "n",  "N",
                                                   "no",  "No",  "NO",   "on",   "On",  "ON", "off",
                                                   "Off", "OFF", ".nan", ".NaN", ".NAN"};
  if (words.contains(s)) return true;
  // Integers of base 2, 8 and 16, numbers with _ between digits, and base 60.
  static const std::regex number(
      "[-+]?(0b[01_]+|0o?[0-7_]+|0x[0-9a-fA-F_]+|[0-9][0-9_]*(\\.[0-9_]*)?([eE][-+]?[0-9]+)?|"
      "[1-9][0-9_]*(:[0-5]?[0-9])+(\\.[0-9_]*)?)");
  // Timestamps (PyYAML reads them as datetimes; kubectl quotes them).
  static const std::regex timestamp(
      "[0-9]{4}-[0-9]{2}-[0-9]{2}|"
      "[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\\.[0-9]*)?"
      "([ \t]*(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?");
  return std::regex_match(s.begin(), s.end(), number) ||
         std::regex_match(s.begin(), s.end(), timestamp);
}

class Converter {
 public:
  StatusOr<Json> convert(const YAML::Node& node, int depth) {
    if (depth > kMaxYamlDepth) {
      return invalidArgument(at(node.Mark()) + "nested deeper than " +
                             std::to_string(kMaxYamlDepth) + " levels (or an alias within itself)");
    }
    if (++nodes_ > kMaxYamlNodes) {
      return invalidArgument("more than " + std::to_string(kMaxYamlNodes) +
                             " values once aliases are expanded");
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return Json(nullptr);
      case YAML::NodeType::Scalar:
        return scalar(node);
      case YAML::NodeType::Sequence: {
        RETURN_IF_ERROR(checkTag(node, "seq"));
        Json out = Json::array();
        for (const YAML::Node& item : node) {
          ASSIGN_OR_RETURN(Json value, convert(item, depth + 1));
          out.push_back(std::move(value));
        }
        return out;
      }
      case YAML::NodeType::Map:
        RETURN_IF_ERROR(checkTag(node, "map"));
        return mapping(node, depth);
    }
    return invalidArgument(at(node.Mark()) + "unknown YAML node");
  }

 private:
  static Status checkTag(const YAML::Node& node, std::string_view kind) {
    const std::string& tag = node.Tag();
    if (tag.empty() || tag == "?" || tag == "!" ||
        (tag.starts_with(kTagPrefix) && tag.substr(kTagPrefix.size()) == kind)) {
      return okStatus();
    }
    return invalidArgument(at(node.Mark()) + "unsupported tag \"" + tag + "\"");
  }

  static StatusOr<Json> scalar(const YAML::Node& node) {
    const std::string& tag = node.Tag();
    const std::string& text = node.Scalar();
    // "?" is a plain scalar, "!" a quoted or block one (always a string).
    if (tag == "?" || tag.empty()) return plainScalar(text);
    if (tag == "!") return Json(text);
    if (!tag.starts_with(kTagPrefix)) {
      return invalidArgument(at(node.Mark()) + "unsupported tag \"" + tag + "\"");
    }
    const std::string_view kind = std::string_view(tag).substr(kTagPrefix.size());
    if (kind == "str" || kind == "binary") return Json(text);
    Json value = plainScalar(text);
    const bool fits =
        (kind == "null" && value.is_null()) || (kind == "bool" && value.is_boolean()) ||
        (kind == "int" && value.is_number_integer()) || (kind == "float" && value.is_number());
    if (!fits) {
      return invalidArgument(at(node.Mark()) + inQuotes(text) + " is not a !!" + std::string(kind));
    }
    return kind == "float" ? Json(value.get<double>()) : value;
  }

  // Object keys are strings; a scalar key of another type is its text.
  static StatusOr<std::string> key(const YAML::Node& node) {
    if (node.IsNull()) return std::string("null");
    if (!node.IsScalar()) {
      return invalidArgument(at(node.Mark()) + "a mapping key must be a scalar");
    }
    return node.Scalar();
  }

  StatusOr<Json> mapping(const YAML::Node& node, int depth) {
    Json out = Json::object();
    // Explicit keys first; then merge keys, which only add keys not yet set
    // (earlier sources of a merge list win over later ones).
    std::vector<YAML::Node> merges;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsScalar() && it->first.Tag() == "?" && it->first.Scalar() == "<<") {
        merges.push_back(it->second);
        continue;
      }
      ASSIGN_OR_RETURN(std::string k, key(it->first));
      if (out.contains(k)) {
        return invalidArgument(at(it->first.Mark()) + "duplicate key \"" + k + "\"");
      }
      ASSIGN_OR_RETURN(out[k], convert(it->second, depth + 1));
    }
    for (const YAML::Node& merge : merges) {
      std::vector<YAML::Node> sources;
      if (merge.IsMap()) {
        sources.push_back(merge);
      } else if (merge.IsSequence()) {
        for (const YAML::Node& s : merge) sources.push_back(s);
      }
      for (const YAML::Node& source : sources) {
        if (!source.IsMap()) {
          return invalidArgument(at(merge.Mark()) +
                                 "a merge key (<<) takes a mapping or a list of mappings");
        }
        ASSIGN_OR_RETURN(Json merged, mapping(source, depth + 1));
        for (auto& [k, v] : merged.items()) {
          if (!out.contains(k)) out[k] = std::move(v);
        }
      }
      if (sources.empty()) {
        return invalidArgument(at(merge.Mark()) +
                               "a merge key (<<) takes a mapping or a list of mappings");
      }
    }
    return out;
  }

  size_t nodes_ = 0;
};

}  // namespace

bool readsAsOtherThanString(std::string_view plain) {
  return !plainScalar(std::string(plain)).is_string() || yaml11NonString(plain);
}

StatusOr<Json> yamlToJson(std::string_view text) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::Exception& e) {
    return invalidArgument(at(e.mark).empty()
                               ? e.msg
                               : "line " + std::to_string(e.mark.line + 1) + ", column " +
                                     std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
  if (documents.empty()) return Json(nullptr);
  if (documents.size() > 1) {
    return invalidArgument(at(documents[1].Mark()) + "more than one YAML document");
  }
  try {
    return Converter().convert(documents[0], 0);
  } catch (const YAML::Exception& e) {
    return invalidArgument(at(e.mark) + e.msg);
  }
}

}  // namespace rsc::client
