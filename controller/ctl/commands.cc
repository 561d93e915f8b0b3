#include "controller/ctl/commands.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "client/api_error.h"
#include "client/config.h"
#include "common/duration.h"

namespace rsc::ctl {
namespace {

namespace fs = std::filesystem;

constexpr char kPoolSuffix[] = ".pool.json";
constexpr char kDriverSuffix[] = ".driver.json";
// ResourceSlices are listed in pages of this many (the API server's default
// chunk size for kubectl get).
constexpr int64_t kSliceListPage = 500;

// One inventory API request; a non-2xx answer is an error naming the request
// and carrying the API's message and field details.
StatusOr<client::HttpResponse> call(const CtlEnv& env, const Invocation& inv,
                                    const std::string& method, const std::string& path,
                                    const std::string& body = "") {
  client::HttpRequest req;
  req.method = method;
  req.path_and_query = path;
  req.body = body;
  req.timeout = inv.global.request_timeout;
  req.headers.emplace_back("Accept", "application/json");
  if (!body.empty()) req.headers.emplace_back("Content-Type", "application/json");
  auto resp = env.inventory->send(req);
  if (!resp.ok()) return resp.status().withContext(method + " " + path);
  if (resp->code < 200 || resp->code > 299) {
    return Status(client::statusCodeFromHttp(resp->code),
                  method + " " + path + ": " + errorLine(resp->code, resp->body));
  }
  return resp;
}

StatusOr<Json> callJson(const CtlEnv& env, const Invocation& inv, const std::string& method,
                        const std::string& path, const std::string& body = "") {
  ASSIGN_OR_RETURN(client::HttpResponse resp, call(env, inv, method, path, body));
  Json j = Json::parse(resp.body, nullptr, false);
  if (j.is_discarded()) return internalError(method + " " + path + ": the answer is not JSON");
  return j;
}

std::string waitQuery(const Invocation& inv) {
  if (!inv.has("wait")) return "";
  const std::string w = inv.flag("wait");
  return "?wait=" + (w.empty() ? std::string(kDefaultPushWaitText) : w);
}

// The pool statuses of a PoolStatus, DriverStatus or DriverList answer.
// An answer decoded by the controller's own table, or why this client cannot read it.
template <typename T>
StatusOr<T> readAnswer(StatusOr<T> decoded, std::string_view what) {
  if (decoded.ok()) return decoded;
  return invalidArgument("the controller answered " + std::string(what) +
                         " this client cannot read: " + decoded.status().message());
}

// The pool statuses of an answer (one pool's, a driver's or every driver's), typed by the table
// the controller wrote them with.
StatusOr<std::vector<client::PoolStatusJson>> poolStatuses(const Json& answer) {
  std::vector<const Json*> found;
  if (answer.contains("drivers")) {
    for (const Json& d : answer["drivers"]) {
      if (!d.contains("pools")) continue;
      for (const Json& p : d["pools"]) found.push_back(&p);
    }
  } else if (answer.contains("pools")) {
    for (const Json& p : answer["pools"]) found.push_back(&p);
  } else {
    found.push_back(&answer);
  }
  std::vector<client::PoolStatusJson> out;
  for (const Json* p : found) {
    ASSIGN_OR_RETURN(client::PoolStatusJson status,
                     readAnswer(client::poolStatusFromJson(*p), "a pool status"));
    out.push_back(std::move(status));
  }
  return out;
}

void printAs(const CtlEnv& env, const Invocation& inv, const Json& answer,
             const std::function<std::string()>& as_table) {
  const std::string o = inv.flag("output");
  if (o == "json") {
    *env.out << answer.dump(2) << "\n";
  } else if (o == "yaml") {
    *env.out << toYaml(answer);
  } else {
    *env.out << as_table();
  }
}

// One line per pool of a push or withdraw answer: "gpu.example.com/node-a: Published".
Status printPhases(const CtlEnv& env, const Json& answer) {
  ASSIGN_OR_RETURN(const std::vector<client::PoolStatusJson> statuses, poolStatuses(answer));
  for (const client::PoolStatusJson& p : statuses) {
    std::string line = p.driver + "/" + p.pool + ": " + p.phase;
    if (p.last_error) line += " (" + p.last_error->message + ")";
    if (p.message) line += " (" + *p.message + ")";
    *env.out << line << "\n";
  }
  return okStatus();
}

StatusOr<int> push(const Invocation& inv, const CtlEnv& env) {
  ASSIGN_OR_RETURN(auto requests, readPushRequests(inv.args[0], inv.flag("driver")));
  for (const PushRequest& r : requests) {
    ASSIGN_OR_RETURN(client::HttpResponse resp,
                     call(env, inv, "PUT", r.path() + waitQuery(inv), r.body));
    const Json answer = Json::parse(resp.body, nullptr, false);
    *env.out << r.file << " -> PUT " << r.target() << ": " << resp.code << "\n";
    if (answer.is_object()) RETURN_IF_ERROR(printPhases(env, answer));
    if (inv.has("wait") && resp.code == 202) {
      return deadlineExceeded(r.target() + ": not published within " +
                              (inv.flag("wait").empty() ? kDefaultPushWaitText : inv.flag("wait")));
    }
  }
  return kExitOk;
}

StatusOr<int> get(const Invocation& inv, const CtlEnv& env) {
  std::string path = "/v1/drivers";
  if (inv.args[0] == "pool") {
    path += "/" + escapePathSegment(inv.args[1]) + "/pools/" + escapePathSegment(inv.args[2]);
  } else if (inv.args.size() == 2) {
    path += "/" + escapePathSegment(inv.args[1]);
  }
  ASSIGN_OR_RETURN(Json answer, callJson(env, inv, "GET", path));
  ASSIGN_OR_RETURN(const std::vector<client::PoolStatusJson> statuses, poolStatuses(answer));
  printAs(env, inv, answer, [&] {
    return renderPoolTable(statuses, inv.flag("output") == "wide", env.clock->systemNow());
  });
  return kExitOk;
}

StatusOr<int> diff(const Invocation& inv, const CtlEnv& env) {
  ASSIGN_OR_RETURN(auto requests, readPushRequests(inv.args[0], inv.flag("driver")));
  size_t writes = 0;
  for (const PushRequest& r : requests) {
    ASSIGN_OR_RETURN(Json answer, callJson(env, inv, "PUT", r.path() + "?dryRun=All", r.body));
    ASSIGN_OR_RETURN(const client::DryRunResultJson result,
                     readAnswer(client::dryRunResultFromJson(answer), "a dry run"));
    *env.out << renderDryRun(result);
    writes += plannedWrites(result);
  }
  return writes == 0 ? kExitOk : kExitChanges;
}

StatusOr<int> withdraw(const Invocation& inv, const CtlEnv& env) {
  const std::string driver_path = "/v1/drivers/" + escapePathSegment(inv.args[0]);
  StatusOr<client::HttpResponse> resp =
      inv.args.size() == 2
          ? call(env, inv, "DELETE",
                 driver_path + "/pools/" + escapePathSegment(inv.args[1]) + waitQuery(inv))
          : call(env, inv, "PUT", driver_path + waitQuery(inv), R"({"pools":{}})");
  if (!resp.ok()) return resp.status();
  const Json answer = Json::parse(resp->body, nullptr, false);
  if (answer.is_object()) RETURN_IF_ERROR(printPhases(env, answer));
  if (inv.has("wait") && resp->code == 202) {
    return deadlineExceeded(inv.args[0] + ": not withdrawn within " +
                            (inv.flag("wait").empty() ? kDefaultPushWaitText : inv.flag("wait")));
  }
  return kExitOk;
}

StatusOr<int> waitFor(const Invocation& inv, const CtlEnv& env) {
  const std::string target = inv.args[0] + "/" + inv.args[1];
  const std::string path =
      "/v1/drivers/" + escapePathSegment(inv.args[0]) + "/pools/" + escapePathSegment(inv.args[1]);
  std::chrono::milliseconds timeout = kDefaultWaitTimeout;
  if (!inv.flag("timeout").empty()) {
    ASSIGN_OR_RETURN(const Clock::Duration parsed, parseDuration(inv.flag("timeout")));
    timeout = std::chrono::duration_cast<std::chrono::milliseconds>(parsed);
  }
  const auto deadline = env.clock->now() + timeout;
  for (;;) {
    ASSIGN_OR_RETURN(const Json answer, callJson(env, inv, "GET", path));
    ASSIGN_OR_RETURN(const client::PoolStatusJson s,
                     readAnswer(client::poolStatusFromJson(answer), "a pool status"));
    if (s.phase == "Published" && s.published_version >= s.desired_version) {
      *env.out << target << ": Published (generation " << s.published_generation << ", "
               << s.slice_names.size() << " slices)\n";
      return kExitOk;
    }
    if (s.phase == "Held") {
      // Lasts until the driver pushes or renews the pool: waiting cannot end it.
      return failedPrecondition(target + ": Held: " + s.reason.value_or("") + ": " +
                                s.message.value_or(""));
    }
    if (s.phase == "Failed") {
      const client::PoolStatusError err = s.last_error.value_or(client::PoolStatusError{});
      return failedPrecondition(target + ": Failed: " + err.reason + ": " + err.message);
    }
    const auto now = env.clock->now();
    if (now >= deadline) {
      std::string message = target;
      message.append(": still ")
          .append(s.phase)
          .append(" after ")
          .append(inv.flag("timeout", kDefaultWaitTimeoutText));
      return deadlineExceeded(message);
    }
    env.clock->sleepFor(std::min<Clock::Duration>(kWaitPollInterval, deadline - now));
  }
}

StatusOr<int> slices(const Invocation& inv, const CtlEnv& env) {
  client::ListOptions options;
  options.field_selector = "spec.driver=" + inv.args[0];
  options.limit = kSliceListPage;
  std::vector<client::ResourceSlice> found;
  do {
    auto page = env.kube->listResourceSlices(options);
    if (!page.ok()) return page.status().withContext("list ResourceSlices of " + inv.args[0]);
    for (client::ResourceSlice& s : page->items) {
      if (inv.args.size() == 1 || s.spec.pool.name == inv.args[1]) found.push_back(std::move(s));
    }
    options.continue_token = page->continue_token;
  } while (!options.continue_token.empty());
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::tie(a.spec.pool.name, a.metadata.name) <
           std::tie(b.spec.pool.name, b.metadata.name);
  });
  Json items = Json::array();
  for (const client::ResourceSlice& s : found) items.push_back(client::toJson(s));
  printAs(env, inv, Json{{"items", items}},
          [&] { return renderSlices(found, inv.flag("output") == "wide"); });
  return kExitOk;
}

// The part of a file name before `suffix`, or "" when it does not end so.
std::string stem(const std::string& name, const std::string& suffix) {
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) return "";
  return name.substr(0, name.size() - suffix.size());
}

}  // namespace

std::string escapePathSegment(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

std::string PushRequest::path() const {
  std::string p = "/v1/drivers/" + escapePathSegment(driver);
  if (!pool.empty()) p += "/pools/" + escapePathSegment(pool);
  return p;
}

std::string PushRequest::target() const { return pool.empty() ? driver : driver + "/" + pool; }

StatusOr<PushRequest> pushRequestFor(const std::string& file_name, std::string body,
                                     const std::string& driver_flag) {
  PushRequest r;
  r.file = file_name;
  r.body = std::move(body);
  const std::string name = fs::path(file_name).filename().string();
  const Json shape = Json::parse(r.body, nullptr, false);
  if (!shape.is_object()) return invalidArgument(file_name + ": not a JSON object");
  const bool is_driver = !stem(name, kDriverSuffix).empty() ||
                         (stem(name, kPoolSuffix).empty() && shape.contains("pools"));
  if (is_driver) {
    if (!shape.contains("pools")) {
      return invalidArgument(file_name + ": a driver file needs \"pools\"");
    }
    r.driver = driver_flag.empty() ? stem(name, kDriverSuffix) : driver_flag;
    if (r.driver.empty()) r.driver = stem(name, ".json");
    if (r.driver.empty()) return invalidArgument(file_name + ": no driver in the file name");
    return r;
  }
  std::string base = stem(name, kPoolSuffix);
  if (base.empty()) base = stem(name, ".json");
  if (!driver_flag.empty()) {
    r.driver = driver_flag;
    r.pool = base.starts_with(driver_flag + "-") ? base.substr(driver_flag.size() + 1) : base;
  } else {
    // DRIVER-POOL: the driver is a DNS name, so it ends at the first '-'
    // after its last '.'.
    const size_t dot = base.rfind('.');
    const size_t dash = base.find('-', dot == std::string::npos ? 0 : dot);
    if (dot == std::string::npos || dash == std::string::npos) {
      return invalidArgument(file_name +
                             ": name a pool file DRIVER-POOL.pool.json, or give --driver");
    }
    r.driver = base.substr(0, dash);
    r.pool = base.substr(dash + 1);
  }
  if (r.pool.empty()) return invalidArgument(file_name + ": no pool in the file name");
  return r;
}

StatusOr<std::vector<PushRequest>> readPushRequests(const std::string& file_or_dir,
                                                    const std::string& driver_flag) {
  std::vector<std::string> files;
  std::error_code ec;
  if (fs::is_directory(file_or_dir, ec)) {
    for (const auto& entry : fs::directory_iterator(file_or_dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(kPoolSuffix) || name.ends_with(kDriverSuffix)) {
        files.push_back(entry.path().string());
      }
    }
    if (ec) return invalidArgument(file_or_dir + ": " + ec.message());
    std::sort(files.begin(), files.end());
    if (files.empty()) {
      return invalidArgument(file_or_dir + ": no *.pool.json or *.driver.json files");
    }
  } else {
    files.push_back(file_or_dir);
  }
  std::vector<PushRequest> out;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(std::string body, client::readConfigFile(f));
    ASSIGN_OR_RETURN(PushRequest r, pushRequestFor(f, std::move(body), driver_flag));
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<int> runCommand(const Invocation& inv, const CtlEnv& env) {
  using Command = StatusOr<int> (*)(const Invocation&, const CtlEnv&);
  static const std::map<std::string, Command> commands = {
      {"push", push},         {"get", get},      {"diff", diff},
      {"withdraw", withdraw}, {"wait", waitFor}, {"slices", slices},
  };
  auto it = commands.find(inv.command);
  if (it == commands.end()) return invalidArgument("unknown command \"" + inv.command + "\"");
  return it->second(inv, env);
}

}  // namespace rsc::ctl
