#include "controller/ctl/render.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "client/yaml.h"
#include "common/clock.h"
#include "common/strings.h"

namespace rsc::ctl {
namespace {

// Columns padded to their widest cell plus three spaces, as kubectl prints.
std::string table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size() + 3, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string str(const Json& j, const char* key, const std::string& fallback = "") {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->is_string() ? it->get<std::string>() : it->dump();
}

void emit(YAML::Emitter& out, const Json& v) {
  if ((v.is_object() || v.is_array()) && v.empty()) {
    out << YAML::Flow << (v.is_object() ? YAML::BeginMap : YAML::BeginSeq)
        << (v.is_object() ? YAML::EndMap : YAML::EndSeq);
  } else if (v.is_object()) {
    out << YAML::BeginMap;
    for (const auto& [k, item] : v.items()) {
      out << YAML::Key << k << YAML::Value;
      emit(out, item);
    }
    out << YAML::EndMap;
  } else if (v.is_array()) {
    out << YAML::BeginSeq;
    for (const Json& item : v) emit(out, item);
    out << YAML::EndSeq;
  } else if (v.is_string()) {
    // yaml-cpp quotes what is no valid plain scalar; a string that reads
    // back as another value is quoted too.
    const auto& s = v.get_ref<const std::string&>();
    if (client::readsAsOtherThanString(s)) out << YAML::DoubleQuoted;
    out << s;
  } else if (v.is_null()) {
    out << YAML::Null;
  } else {
    out << v.dump();
  }
}

}  // namespace

std::string age(const std::string& rfc3339, std::chrono::system_clock::time_point now) {
  const std::optional<int64_t> seconds = rfc3339Seconds(rfc3339);
  if (!seconds) return "<unknown>";
  const auto then = std::chrono::system_clock::time_point(std::chrono::seconds(*seconds));
  const int64_t s =
      std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(now - then).count());
  if (s < 120) return std::to_string(s) + "s";
  if (s < 7200) return std::to_string(s / 60) + "m";
  if (s < 172800) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string renderPoolTable(const std::vector<client::PoolStatusJson>& statuses, bool wide,
                            std::chrono::system_clock::time_point now) {
  std::vector<std::vector<std::string>> rows = {
      {"DRIVER", "POOL", "PHASE", "GENERATION", "SLICES", "LAST-PUSH"}};
  if (wide) rows[0].insert(rows[0].end(), {"VERSION", "LEASE", "LEADER", "ERROR"});
  for (const client::PoolStatusJson& s : statuses) {
    std::vector<std::string> row = {
        s.driver,
        s.pool,
        s.phase,
        std::to_string(s.published_generation),
        std::to_string(s.slice_names.size()),
        s.last_push_time ? age(*s.last_push_time, now) : "<none>",
    };
    if (wide) {
      row.insert(row.end(),
                 {std::to_string(s.published_version) + "/" + std::to_string(s.desired_version),
                  s.lease_seconds ? std::to_string(*s.lease_seconds) + "s" : "<none>",
                  s.leader.empty() ? "<none>" : s.leader,
                  s.last_error ? s.last_error->reason + ": " + s.last_error->message
                  : s.reason   ? *s.reason + ": " + s.message.value_or("")
                               : "<none>"});
    }
    rows.push_back(std::move(row));
  }
  if (statuses.empty()) return "No pools found.\n";
  return table(rows);
}

size_t plannedWrites(const client::DryRunResultJson& result) {
  size_t n = 0;
  for (const client::PoolDryRunJson& pool : result.pools) n += pool.writes.size();
  return n;
}

std::string renderDryRun(const client::DryRunResultJson& result) {
  std::string out;
  const std::string& driver = result.driver;
  for (const client::PoolDryRunJson& pool : result.pools) {
    out += driver + "/" + pool.pool + ": ";
    if (pool.writes.empty()) {
      out += "no changes\n";
      continue;
    }
    const auto number = [](const std::optional<int64_t>& n) {
      return n ? std::to_string(*n) : std::string("?");
    };
    if (pool.action == "publish") {
      out += "publish at generation " + number(pool.generation) +
             (pool.generation_bumped.value_or(false)
                  ? " (generation bumped from " + std::to_string(pool.live_generation) + ")"
                  : " (generation kept)") +
             ", " + number(pool.slice_count) + " slices\n";
    } else {
      out += pool.action + " (live generation " + std::to_string(pool.live_generation) + ")\n";
    }
    for (const client::PlannedWriteJson& w : pool.writes) {
      std::string line = w.verb == "create" ? "  + " : w.verb == "delete" ? "  - " : "  ~ ";
      line += w.verb;
      if (!w.slice.empty()) line.append(" ").append(w.slice);
      if (w.index) line += " (index " + std::to_string(*w.index) + ")";
      if (!w.changed_fields.empty()) {
        line += ":";
        for (const std::string& f : w.changed_fields) line += "\n      " + f;
      }
      out += line + "\n";
    }
  }
  if (out.empty()) out = driver + ": no pools\n";
  return out;
}

bool poolComplete(const std::vector<const client::ResourceSlice*>& pool, std::string* why) {
  std::set<int64_t> generations;
  std::set<int64_t> counts;
  for (const client::ResourceSlice* s : pool) {
    generations.insert(s->spec.pool.generation);
    counts.insert(s->spec.pool.resource_slice_count);
  }
  std::ostringstream reason;
  if (generations.size() > 1) {
    reason << generations.size() << " generations (" << *generations.begin() << " to "
           << *generations.rbegin() << ")";
  } else if (counts.size() > 1) {
    reason << "the slices disagree on resourceSliceCount";
  } else if (!pool.empty() && static_cast<int64_t>(pool.size()) != *counts.begin()) {
    reason << pool.size() << " of " << *counts.begin() << " slices";
  }
  if (why != nullptr) *why = reason.str();
  return reason.str().empty();
}

std::string renderSlices(const std::vector<client::ResourceSlice>& slices, bool wide) {
  if (slices.empty()) return "No ResourceSlices found.\n";
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "POOL", "GENERATION", "COUNT", "DEVICES", "NODE"}};
  if (wide) rows[0].emplace_back("RESOURCE-VERSION");
  std::map<std::string, std::vector<const client::ResourceSlice*>> pools;
  for (const client::ResourceSlice& s : slices) {
    pools[s.spec.pool.name].push_back(&s);
    std::string node = s.spec.node_name.value_or("");
    if (node.empty()) {
      node = s.spec.all_nodes.value_or(false)   ? "<all>"
             : s.spec.node_selector.has_value() ? "<selector>"
                                                : "<per-device>";
    }
    std::vector<std::string> row = {s.metadata.name,
                                    s.spec.pool.name,
                                    std::to_string(s.spec.pool.generation),
                                    std::to_string(s.spec.pool.resource_slice_count),
                                    std::to_string(s.spec.devices.size()),
                                    node};
    if (wide) row.push_back(s.metadata.resource_version);
    rows.push_back(std::move(row));
  }
  std::string out = table(rows) + "\n";
  for (const auto& [name, pool] : pools) {
    std::string why;
    if (poolComplete(pool, &why)) {
      out += "pool " + name + ": complete (generation " +
             std::to_string(pool.front()->spec.pool.generation) + ", " +
             std::to_string(pool.size()) + " slices)\n";
    } else {
      out.append("pool ").append(name).append(": incomplete: ").append(why).append("\n");
    }
  }
  return out;
}

std::string errorLine(int code, const std::string& body) {
  const Json j = Json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("message")) {
    const std::string text = excerpt(body, 256);
    return std::to_string(code) + (text.empty() ? "" : ": " + text);
  }
  std::string line = std::to_string(code) + " " + str(j, "reason") + ": " + str(j, "message");
  std::string details;
  for (const Json& d : j.value("details", Json::array())) {
    if (!details.empty()) details += "; ";
    const std::string field = str(d, "field");
    details += (field.empty() ? "(body)" : field) + ": " + str(d, "message");
  }
  if (!details.empty() && line.find(details) == std::string::npos) line += " (" + details + ")";
  return line;
}

std::string toYaml(const Json& value) {
  YAML::Emitter out;
  emit(out, value);
  return std::string(out.c_str()) + "\n";
}

}  // namespace rsc::ctl
