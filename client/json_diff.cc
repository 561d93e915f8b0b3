#include "client/json_diff.h"

#include <algorithm>
#include <map>
#include <optional>

namespace rsc::client {
namespace {

using Json = nlohmann::json;

std::string member(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// The elements of `array` by their "name", when each is an object with a
// string name and no name repeats; nullopt otherwise.
std::optional<std::map<std::string, const Json*>> byName(const Json& array) {
  std::map<std::string, const Json*> named;
  for (const Json& element : array) {
    if (!element.is_object()) return std::nullopt;
    auto it = element.find("name");
    if (it == element.end() || !it->is_string()) return std::nullopt;
    if (!named.emplace(it->get<std::string>(), &element).second) return std::nullopt;
  }
  return named;
}

void arrayDifferences(const Json& want, const Json& have, const std::string& path,
                      std::vector<std::string>& out) {
  std::optional<std::map<std::string, const Json*>> want_named = byName(want);
  std::optional<std::map<std::string, const Json*>> have_named = byName(have);
  if (want_named && have_named && !want.empty() && !have.empty()) {
    for (const Json& element : want) {
      const std::string name = element["name"].get<std::string>();
      std::string at = path;
      at.append("[").append(name).append("]");
      auto it = have_named->find(name);
      if (it == have_named->end()) {
        out.push_back(at);
      } else {
        jsonDifferences(element, *it->second, at, out);
      }
    }
    for (const Json& element : have) {
      const std::string name = element["name"].get<std::string>();
      if (!want_named->contains(name))
        out.push_back(std::string(path).append("[").append(name).append("]"));
    }
    return;
  }
  const size_t common = std::min(want.size(), have.size());
  for (size_t i = 0; i < common; ++i) {
    jsonDifferences(want[i], have[i], path + "[" + std::to_string(i) + "]", out);
  }
  for (size_t i = common; i < std::max(want.size(), have.size()); ++i) {
    out.push_back(path + "[" + std::to_string(i) + "]");
  }
}

}  // namespace

void jsonDifferences(const Json& want, const Json& have, const std::string& path,
                     std::vector<std::string>& out) {
  if (want.is_object() && have.is_object()) {
    for (const auto& [key, value] : want.items()) {
      auto it = have.find(key);
      if (it == have.end()) {
        out.push_back(member(path, key));
      } else {
        jsonDifferences(value, *it, member(path, key), out);
      }
    }
    for (const auto& [key, value] : have.items()) {
      if (!want.contains(key)) out.push_back(member(path, key));
    }
    return;
  }
  if (want.is_array() && have.is_array()) {
    arrayDifferences(want, have, path, out);
    return;
  }
  if (want != have) out.push_back(path);
}

}  // namespace rsc::client
