#include "test/bench/cluster.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace rsc::bench {

namespace {

using Json = nlohmann::json;

std::string readTrimmed(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) {
    s.pop_back();
  }
  return s;
}

// Parses one sample line: name, labels and value. False for comments and
// lines it cannot read.
bool parseSample(std::string_view line, std::string* name,
                 std::map<std::string, std::string>* labels, double* value) {
  if (line.empty() || line[0] == '#') {
    return false;
  }
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') {
    ++i;
  }
  *name = std::string(line.substr(0, i));
  labels->clear();
  if (i < line.size() && line[i] == '{') {
    ++i;
    while (i < line.size() && line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == std::string_view::npos || eq + 1 >= line.size() || line[eq + 1] != '"') {
        return false;
      }
      std::string key(line.substr(i, eq - i));
      std::string val;
      size_t j = eq + 2;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size()) {
          ++j;
        }
        val += line[j];
      }
      (*labels)[std::move(key)] = std::move(val);
      i = j + 1;
      if (i < line.size() && line[i] == ',') {
        ++i;
      }
    }
    ++i;
  }
  while (i < line.size() && line[i] == ' ') {
    ++i;
  }
  try {
    *value = std::stod(std::string(line.substr(i)));
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

}  // namespace

double sumSamples(const std::string& text, const std::string& name,
                  const std::map<std::string, std::vector<std::string>>& labels) {
  double sum = 0;
  std::istringstream lines(text);
  std::string line;
  std::string sample_name;
  std::map<std::string, std::string> sample_labels;
  double value = 0;
  while (std::getline(lines, line)) {
    if (line.rfind(name, 0) != 0) {
      continue;
    }
    if (!parseSample(line, &sample_name, &sample_labels, &value) || sample_name != name) {
      continue;
    }
    bool match = true;
    for (const auto& [key, accepted] : labels) {
      // A label the sample does not have counts as empty, as in PromQL.
      auto it = sample_labels.find(key);
      const std::string& got = it == sample_labels.end() ? std::string() : it->second;
      if (std::find(accepted.begin(), accepted.end(), got) == accepted.end()) {
        match = false;
        break;
      }
    }
    if (match) {
      sum += value;
    }
  }
  return sum;
}

StatusOr<std::unique_ptr<Cluster>> Cluster::start(const std::filesystem::path& source_root,
                                                  Clock& clock) {
  std::string tmpl = "/tmp/rsc-bench-cluster-XXXXXX";
  const char* made = mkdtemp(tmpl.data());
  if (made == nullptr) {
    return internalError("mkdtemp failed");
  }
  std::unique_ptr<Cluster> cluster(new Cluster(source_root, made, clock));
  // Profiling on (the test cluster turns it off) for collectGarbage(), after
  // any flags the caller's environment gives; only the start command sees it.
  const std::string cmd =
      "TESTCLUSTER_APISERVER_ARGS=\"$TESTCLUSTER_APISERVER_ARGS --profiling=true\" " +
      (source_root / "test/cluster/start").string() + " --owner-pid " + std::to_string(getpid()) +
      " " + cluster->dir_.string() + " > " + cluster->dir_.string() + ".log 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    return unavailable("could not start the test cluster; see " + cluster->dir_.string() + ".log");
  }
  StatusOr<client::ClientConfig> config = client::loadKubeconfig({cluster->kubeconfig()});
  if (!config.ok()) {
    return config.status();
  }
  cluster->config_ = *config;
  auto transport = client::CpprestTransport::create(cluster->config_, clock);
  if (!transport.ok()) {
    return transport.status();
  }
  cluster->transport_ = std::move(*transport);
  client::RestKubeApiOptions options;
  options.qps = 0;
  // Deleting the slices of a workload (20,000 at scale 1) in one collection
  // call takes minutes on a loaded machine; the server stops deleting when
  // the client gives up.
  options.request_timeout = std::chrono::minutes(10);
  options.call_timeout = std::chrono::minutes(10);
  auto api = client::RestKubeApi::create(*cluster->transport_, clock, options);
  if (!api.ok()) {
    return api.status();
  }
  cluster->api_ = std::move(*api);
  return cluster;
}

Status Cluster::collectGarbage() {
  client::HttpRequest req;
  req.path_and_query = "/debug/pprof/heap?gc=1";
  req.timeout = std::chrono::minutes(1);
  ASSIGN_OR_RETURN(const client::HttpResponse answer, transport_->send(req));
  if (answer.code != 200) {
    return unavailable("GET /debug/pprof/heap?gc=1: HTTP " + std::to_string(answer.code));
  }
  return okStatus();
}

Cluster::~Cluster() {
  api_.reset();
  transport_.reset();
  const std::string cmd = (source_root_ / "test/cluster/stop").string() + " " + dir_.string() +
                          " >> " + dir_.string() + ".log 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    return;  // keep the folder to look at
  }
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
  std::filesystem::remove(dir_.string() + ".log", ec);
}

int Cluster::apiserverPid() const {
  const std::string pid = readTrimmed(dir_ / "kube-apiserver.pid");
  try {
    return std::stoi(pid);
  } catch (const std::exception&) {
    return 0;
  }
}

StatusOr<std::map<std::string, std::string>> Cluster::ensureNodes(
    const std::vector<std::string>& names, int connections) {
  // What exists already.
  auto list_nodes = [this]() -> StatusOr<std::map<std::string, std::string>> {
    std::map<std::string, std::string> uids;
    std::string cont;
    do {
      client::HttpRequest req;
      req.path_and_query =
          "/api/v1/nodes?limit=1000" +
          (cont.empty() ? "" : "&continue=" + client::RestKubeApi::urlEncode(cont));
      StatusOr<client::HttpResponse> resp = transport_->send(req);
      if (!resp.ok()) {
        return resp.status().withContext("list Nodes");
      }
      if (resp->code != 200) {
        return unavailable("list Nodes: HTTP " + std::to_string(resp->code));
      }
      const Json list = Json::parse(resp->body, nullptr, false);
      if (list.is_discarded()) {
        return internalError("list Nodes: not JSON");
      }
      for (const Json& item : list.value("items", Json::array())) {
        const Json meta = item.value("metadata", Json::object());
        uids[meta.value("name", "")] = meta.value("uid", "");
      }
      cont = list.value("metadata", Json::object()).value("continue", "");
    } while (!cont.empty());
    return uids;
  };
  using NodeUids = std::map<std::string, std::string>;
  ASSIGN_OR_RETURN(NodeUids uids, list_nodes());
  std::vector<std::string> missing;
  for (const std::string& n : names) {
    if (uids.count(n) == 0) {
      missing.push_back(n);
    }
  }
  if (missing.empty()) {
    return uids;
  }

  // Create the rest from several threads.
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status failure;
  std::vector<std::thread> threads;
  for (int c = 0; c < std::max(1, connections); ++c) {
    threads.emplace_back([&] {
      for (size_t i = next++; i < missing.size(); i = next++) {
        const Json node = {
            {"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", missing[i]}, {"labels", {{"fabric", "fabric-1"}}}}}};
        client::HttpRequest req;
        req.method = "POST";
        req.path_and_query = "/api/v1/nodes";
        req.body = node.dump();
        req.headers.emplace_back("Content-Type", "application/json");
        StatusOr<client::HttpResponse> resp = transport_->send(req);
        Status s = !resp.ok() ? resp.status()
                   : (resp->code == 201 || resp->code == 409)
                       ? okStatus()
                       : unavailable("HTTP " + std::to_string(resp->code) + ": " + resp->body);
        if (!s.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          if (failure.ok()) {
            failure = s.withContext("create Node " + missing[i]);
          }
          next = missing.size();
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  RETURN_IF_ERROR(failure);
  return list_nodes();
}

StatusOr<std::vector<client::ResourceSlice>> Cluster::listSlices(const std::string& managed_by) {
  std::vector<client::ResourceSlice> out;
  client::ListOptions options;
  options.label_selector = "app.kubernetes.io/managed-by=" + managed_by;
  options.limit = 500;
  do {
    StatusOr<client::ResourceSliceList> page = api_->listResourceSlices(options);
    if (!page.ok()) {
      return page.status().withContext("list ResourceSlices");
    }
    for (client::ResourceSlice& s : page->items) {
      out.push_back(std::move(s));
    }
    options.continue_token = page->continue_token;
  } while (!options.continue_token.empty());
  return out;
}

Status Cluster::deleteSlices(const std::string& managed_by) {
  client::ListOptions options;
  options.label_selector = "app.kubernetes.io/managed-by=" + managed_by;
  RETURN_IF_ERROR(api_->deleteResourceSlices(options).withContext("delete ResourceSlices"));
  options.limit = 1;
  const Clock::TimePoint deadline = clock_.now() + std::chrono::minutes(10);
  while (clock_.now() < deadline) {
    StatusOr<client::ResourceSliceList> left = api_->listResourceSlices(options);
    if (!left.ok()) {
      return left.status().withContext("list ResourceSlices");
    }
    if (left->items.empty()) {
      return okStatus();
    }
    clock_.sleepFor(std::chrono::milliseconds(200));
  }
  return deadlineExceeded("ResourceSlices labelled " + managed_by + " are still there");
}

StatusOr<Cluster::SliceWrites> Cluster::sliceWrites() {
  client::HttpRequest req;
  req.path_and_query = "/metrics";
  StatusOr<client::HttpResponse> resp = transport_->send(req);
  if (!resp.ok()) {
    return resp.status().withContext("GET /metrics of the API server");
  }
  if (resp->code != 200) {
    return unavailable("GET /metrics of the API server: HTTP " + std::to_string(resp->code));
  }
  // Not the controller's dry-run creates (it learns what the server drops
  // as it starts leading, which may fall after a run's first reading).
  const std::map<std::string, std::vector<std::string>> writes = {
      {"resource", {"resourceslices"}},
      {"verb", {"POST", "PUT", "PATCH", "DELETE"}},
      {"dry_run", {""}}};
  std::map<std::string, std::vector<std::string>> accepted = writes;
  accepted["code"] = {"200", "201", "202", "204"};
  SliceWrites counted;
  counted.accepted = sumSamples(resp->body, "apiserver_request_total", accepted);
  counted.refused = sumSamples(resp->body, "apiserver_request_total", writes) - counted.accepted;
  return counted;
}

}  // namespace rsc::bench
