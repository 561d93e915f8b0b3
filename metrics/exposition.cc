#include "metrics/exposition.h"

#include <prometheus/text_serializer.h>

#include <iterator>
#include <sstream>
#include <unordered_map>
#include <utility>

namespace rsc::metrics {

namespace {

// The text format reads backslash escapes in HELP lines, and prometheus-cpp
// writes help text as it is; a stray backslash or newline would make the whole
// scrape fail to parse.
std::string escapeHelp(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (const char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::vector<prometheus::MetricFamily> merge(std::vector<prometheus::MetricFamily> families) {
  std::vector<prometheus::MetricFamily> merged;
  std::unordered_map<std::string, std::size_t> index;
  for (auto& family : families) {
    const auto [it, inserted] = index.emplace(family.name, merged.size());
    if (inserted) {
      family.help = escapeHelp(family.help);
      merged.push_back(std::move(family));
      continue;
    }
    // A family of another type under a taken name cannot be written validly;
    // it is a programmer error, and dropping it keeps the rest of the scrape.
    if (merged[it->second].type != family.type) {
      continue;
    }
    auto& into = merged[it->second].metric;
    into.insert(into.end(), std::make_move_iterator(family.metric.begin()),
                std::make_move_iterator(family.metric.end()));
  }
  return merged;
}

}  // namespace

std::string serializeText(std::vector<prometheus::MetricFamily> families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, merge(std::move(families)));
  return std::move(out).str();
}

std::string serializeText(const std::vector<std::weak_ptr<prometheus::Collectable>>& sources) {
  std::vector<prometheus::MetricFamily> families;
  for (const auto& weak : sources) {
    const auto source = weak.lock();
    if (!source) {
      continue;
    }
    auto collected = source->Collect();
    families.insert(families.end(), std::make_move_iterator(collected.begin()),
                    std::make_move_iterator(collected.end()));
  }
  return serializeText(std::move(families));
}

}  // namespace rsc::metrics
