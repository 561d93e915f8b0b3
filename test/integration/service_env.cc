#include "test/integration/service_env.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cmath>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/kubeconfig.h"
#include "common/clock.h"

namespace rsc::testing {

// An IPv4 address of this machine that is not loopback: the API server refuses loopback
// addresses in EndpointSlices, as a pod's address never is one. Empty when there is none.
double procStatus(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  const std::string key = field + ":";
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(key)) return std::stod(line.substr(key.size()));
  }
  return std::nan("");
}

std::string ownAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (const ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_LOOPBACK) != 0 || (a->ifa_flags & IFF_UP) == 0) continue;
    char text[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

ServiceEnv::ServiceEnv() : cluster_(ClusterEnvironment::get()) {
  StatusOr<client::ClientConfig> config = client::loadKubeconfig({cluster_.kubeconfig()});
  EXPECT_TRUE(config.ok()) << config.status().toString();
  auto transport = client::CpprestTransport::create(*config, RealClock::instance());
  EXPECT_TRUE(transport.ok()) << transport.status().toString();
  kube_transport_ = std::move(*transport);
  client::RestKubeApiOptions options;
  options.qps = 0;  // the tests are the only client
  auto api = client::RestKubeApi::create(*kube_transport_, RealClock::instance(), options);
  EXPECT_TRUE(api.ok()) << api.status().toString();
  api_ = std::move(*api);
  char tmpl[] = "/tmp/rsc-service-test-XXXXXX";
  log_dir_ = mkdtemp(tmpl);
}

ControllerProcess ServiceEnv::startController(const std::string& name,
                                              std::vector<std::string> args) {
  ControllerProcess c;
  c.inventory_port = freePort();
  c.metrics_port = freePort();
  c.health_port = freePort();
  c.identity = name;
  std::vector<std::string> argv = {
      (ClusterEnvironment::buildRoot() / "controller/resourceslice-controller").string(),
      "--inventory-bind-address=127.0.0.1:" + std::to_string(c.inventory_port),
      "--metrics-bind-address=127.0.0.1:" + std::to_string(c.metrics_port),
      "--health-probe-bind-address=127.0.0.1:" + std::to_string(c.health_port),
  };
  bool has_kubeconfig = false;
  for (const std::string& a : args) has_kubeconfig |= a.rfind("--kubeconfig", 0) == 0;
  if (!has_kubeconfig) argv.push_back("--kubeconfig=" + cluster_.kubeconfig().string());
  argv.insert(argv.end(), args.begin(), args.end());
  c.process = std::make_unique<Process>(argv, log_dir_ / (name + ".log"));
  EXPECT_TRUE(waitReady(c, std::chrono::seconds(30))) << name << " never became ready:\n"
                                                      << c.process->log();
  return c;
}

bool ServiceEnv::waitReady(const ControllerProcess& c, std::chrono::seconds timeout) {
  return eventually(
      [&] {
        return http("GET", "http://127.0.0.1:" + std::to_string(c.health_port) + "/readyz").code ==
               200;
      },
      timeout);
}

HttpAnswer ServiceEnv::http(const std::string& method, const std::string& url,
                            const std::string& body, const std::string& token, const HttpTls& tls) {
  // url: http://host:port/path
  const size_t slash = url.find('/', url.find("//") + 2);
  client::ClientConfig config;
  config.server = url.substr(0, slash);
  config.qps = 0;
  config.ca_pem = tls.ca_pem;
  config.tls_server_name = tls.server_name;
  config.insecure_skip_tls_verify = tls.insecure;
  auto transport = client::CpprestTransport::create(config, RealClock::instance());
  if (!transport.ok()) return {};
  client::HttpRequest req;
  req.method = method;
  req.path_and_query = slash == std::string::npos ? "/" : url.substr(slash);
  req.body = body;
  req.timeout = std::chrono::seconds(60);
  if (!body.empty()) req.headers.emplace_back("Content-Type", "application/json");
  if (!token.empty()) req.headers.emplace_back("Authorization", "Bearer " + token);
  StatusOr<client::HttpResponse> resp = (*transport)->send(req);
  if (!resp.ok()) return {};
  return {resp->code, resp->body};
}

HttpAnswer ServiceEnv::kube(const std::string& method, const std::string& path, const Json& body) {
  client::HttpRequest req;
  req.method = method;
  req.path_and_query = path;
  if (!body.is_null()) {
    req.body = body.dump();
    req.headers.emplace_back("Content-Type", "application/json");
  }
  StatusOr<client::HttpResponse> resp = kube_transport_->send(req);
  EXPECT_TRUE(resp.ok()) << method << " " << path << ": " << resp.status().toString();
  if (!resp.ok()) return {};
  return {resp->code, resp->body};
}

void ServiceEnv::ensure(const std::string& path, const Json& object) {
  const HttpAnswer a = kube("POST", path, object);
  EXPECT_TRUE(a.code == 201 || a.code == 200 || a.code == 409) << path << ": " << a.body;
}

void ServiceEnv::ensureNode(const std::string& name) {
  ensure("/api/v1/nodes", {{"apiVersion", "v1"},
                           {"kind", "Node"},
                           {"metadata", {{"name", name}, {"labels", {{"fabric", "fabric-1"}}}}}});
}

void ServiceEnv::ensureNamespace(const std::string& name) {
  ensure("/api/v1/namespaces",
         {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
}

void ServiceEnv::ensureServiceAccount(const std::string& ns, const std::string& name) {
  ensure("/api/v1/namespaces/" + ns + "/serviceaccounts",
         {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", name}}}});
}

std::string ServiceEnv::podToken(const std::string& ns, const std::string& sa,
                                 const std::string& pod, const std::string& node,
                                 const std::string& audience) {
  ensureNode(node);
  ensureServiceAccount(ns, sa);
  Json container = {{"name", "driver"}, {"image", "example.com/driver:1"}};
  Json spec = {{"nodeName", node},
               {"serviceAccountName", sa},
               {"automountServiceAccountToken", false},
               {"containers", Json::array({container})}};
  ensure("/api/v1/namespaces/" + ns + "/pods",
         {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", pod}}}, {"spec", spec}});
  const HttpAnswer got = kube("GET", "/api/v1/namespaces/" + ns + "/pods/" + pod);
  const std::string uid = got.json()["metadata"]["uid"].get<std::string>();
  const HttpAnswer token =
      kube("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts/" + sa + "/token",
           {{"apiVersion", "authentication.k8s.io/v1"},
            {"kind", "TokenRequest"},
            {"spec",
             {{"audiences", {audience}},
              {"expirationSeconds", 3600},
              {"boundObjectRef",
               {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", pod}, {"uid", uid}}}}}});
  EXPECT_EQ(token.code, 201) << token.body;
  return token.json()["status"]["token"].get<std::string>();
}

std::string ServiceEnv::runningPod(const std::string& ns, const std::string& name,
                                   const std::string& node, const std::string& ip,
                                   const std::string& sa) {
  ensureServiceAccount(ns, sa);  // no controller-manager makes "default" here
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
  Json container = {{"name", "driver"}, {"image", "example.com/driver:1"}};
  ensure("/api/v1/namespaces/" + ns + "/pods", {{"apiVersion", "v1"},
                                                {"kind", "Pod"},
                                                {"metadata", {{"name", name}}},
                                                {"spec",
                                                 {{"nodeName", node},
                                                  {"serviceAccountName", sa},
                                                  {"automountServiceAccountToken", false},
                                                  {"containers", Json::array({container})}}}});
  Json pod = kube("GET", path).json();
  pod["status"] = {{"phase", "Running"}, {"podIP", ip}, {"podIPs", {{{"ip", ip}}}}};
  const HttpAnswer put = kube("PUT", path + "/status", pod);
  EXPECT_EQ(put.code, 200) << put.body;
  return pod["metadata"]["uid"].get<std::string>();
}

std::string ServiceEnv::serviceAccountToken(const std::string& ns, const std::string& sa) {
  ensureServiceAccount(ns, sa);
  const HttpAnswer token =
      kube("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts/" + sa + "/token",
           {{"apiVersion", "authentication.k8s.io/v1"},
            {"kind", "TokenRequest"},
            {"spec", {{"expirationSeconds", 3600}}}});
  EXPECT_EQ(token.code, 201) << token.body;
  return token.json()["status"]["token"].get<std::string>();
}

void ServiceEnv::grantMetricsReader(const std::string& ns, const std::string& sa) {
  grant("metrics-reader-" + ns + "-" + sa, {{"nonResourceURLs", {"/metrics"}}, {"verbs", {"get"}}},
        ns, sa);
}

void ServiceEnv::grant(const std::string& name, const Json& rule, const std::string& ns,
                       const std::string& sa) {
  ensure("/apis/rbac.authorization.k8s.io/v1/clusterroles",
         {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "ClusterRole"},
          {"metadata", {{"name", name}}},
          {"rules", {rule}}});
  ensure("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
         {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", "ClusterRoleBinding"},
          {"metadata", {{"name", name}}},
          {"roleRef",
           {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", name}}},
          {"subjects", {{{"kind", "ServiceAccount"}, {"name", sa}, {"namespace", ns}}}}});
}

void ServiceEnv::grantPublish(const std::string& ns, const std::string& sa,
                              const std::vector<std::string>& drivers) {
  Json rule = {{"apiGroups", {"resourceslice.dra.k8s.io"}},
               {"resources", {"drivers"}},
               {"verbs", {"publish", "get"}}};
  if (!drivers.empty()) rule["resourceNames"] = drivers;
  grant("publish-" + ns + "-" + sa, rule, ns, sa);
}

std::vector<client::ResourceSlice> ServiceEnv::poolSlices(const std::string& driver,
                                                          const std::string& pool,
                                                          bool managed_only) {
  client::ListOptions o;
  if (managed_only) o.label_selector = "app.kubernetes.io/managed-by=resourceslice-controller";
  o.field_selector = "spec.driver=" + driver;
  StatusOr<client::ResourceSliceList> list = api_->listResourceSlices(o);
  EXPECT_TRUE(list.ok()) << list.status().toString();
  std::vector<client::ResourceSlice> out;
  if (!list.ok()) return out;
  for (client::ResourceSlice& s : list->items) {
    if (s.spec.pool.name == pool) out.push_back(std::move(s));
  }
  return out;
}

bool ServiceEnv::poolComplete(const std::string& driver, const std::string& pool, size_t slices) {
  const auto all = poolSlices(driver, pool);
  if (all.size() != slices) return false;
  for (const client::ResourceSlice& s : all) {
    if (s.spec.pool.generation != all[0].spec.pool.generation) return false;
    if (s.spec.pool.resource_slice_count != static_cast<int64_t>(slices)) return false;
  }
  return true;
}

bool ServiceEnv::eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return done();
}

double ServiceEnv::metric(const ControllerProcess& c, const std::string& series) {
  const HttpAnswer a =
      http("GET", "http://127.0.0.1:" + std::to_string(c.metrics_port) + "/metrics");
  std::istringstream lines(a.body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return std::nan("");
}

std::map<std::string, double> ServiceEnv::sliceWriteRequests() {
  std::map<std::string, double> out;
  for (const char* verb : {"POST", "PUT", "DELETE"}) {
    out[verb] = apiServerRequests("resourceslices", verb);
  }
  return out;
}

double ServiceEnv::apiServerRequests(const std::string& resource, const std::string& verb,
                                     bool dry_run) {
  const HttpAnswer a = kube("GET", "/metrics");
  EXPECT_EQ(a.code, 200) << a.body.substr(0, 200);
  const std::string name = "apiserver_request_total{";
  const std::string want_resource = "resource=\"" + resource + "\"";
  const std::string want_verb = "verb=\"" + verb + "\"";
  double total = 0;
  std::istringstream lines(a.body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(name, 0) != 0) continue;
    const size_t end = line.find("} ");
    if (end == std::string::npos) continue;
    const std::string labels = line.substr(name.size(), end - name.size());
    // Whole labels only: `resource="nodes"` must not match `resource="nodes/status"`.
    const auto has = [&](const std::string& label) {
      const size_t at = labels.find(label);
      return at != std::string::npos && (at == 0 || labels[at - 1] == ',') &&
             (at + label.size() == labels.size() || labels[at + label.size()] == ',');
    };
    if (has(want_resource) && has(want_verb) && has("dry_run=\"All\"") == dry_run) {
      total += std::stod(line.substr(end + 2));
    }
  }
  return total;
}

std::string ServiceEnv::leaseHolder(const std::string& lease) {
  StatusOr<client::Lease> l = api().getLease("default", lease);
  return l.ok() ? l->spec.holder_identity.value_or("") : "";
}

void expectCleanStop(const ControllerProcess& c) {
  c.process->signal(SIGTERM);
  EXPECT_EQ(c.process->wait(std::chrono::seconds(20)), 0) << c.process->log();
}

Json gpuPool(const std::string& node, int devices, const std::string& model) {
  Json pool = {{"nodeName", node}, {"devices", Json::array()}};
  for (int i = 0; i < devices; ++i) {
    pool["devices"].push_back({{"name", "gpu-" + std::to_string(i)},
                               {"attributes",
                                {{"model", {{"string", model}}},
                                 {"index", {{"int", i}}},
                                 {"driverVersion", {{"version", "1.2.3"}}}}},
                               {"capacity", {{"memory", {{"value", "80Gi"}}}}}});
  }
  return pool;
}

}  // namespace rsc::testing
