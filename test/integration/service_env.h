// Helpers for integration tests of the service binary against the real API
// server: start controller processes on free ports, talk to their inventory
// API, and create the Kubernetes objects a test needs (Nodes, namespaces,
// ServiceAccounts, Pods, RBAC, tokens) as admin. Used from one test thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/http_transport.h"
#include "client/rest_kube_api.h"
#include "test/integration/cluster_env.h"
#include "test/integration/process.h"

namespace rsc::testing {

using Json = nlohmann::json;

// One controller process.
struct ControllerProcess {
  std::unique_ptr<Process> process;
  int inventory_port = 0;
  int metrics_port = 0;
  int health_port = 0;
  std::string identity;

  std::string inventoryUrl() const { return "http://127.0.0.1:" + std::to_string(inventory_port); }
  // The inventory API's URL of `driver`'s pool `pool`, with `query` ("?wait=30s") appended.
  std::string poolUrl(const std::string& driver, const std::string& pool,
                      const std::string& query = "") const {
    return inventoryUrl() + "/v1/drivers/" + driver + "/pools/" + pool + query;
  }
};

// An IPv4 address of this machine that is not loopback: the API server refuses loopback
// addresses in EndpointSlices, as a pod's address never is one. Empty when there is none.
std::string ownAddress();

// A field of /proc/PID/status ("Threads", "VmRSS", "VmHWM"): its number as the file gives it
// (kB for memory), NaN when the process or the field is absent.
double procStatus(pid_t pid, const std::string& field);

// Sends `c` SIGTERM and expects it to exit 0 within 20 s (its log otherwise):
// how a test ends a controller that must shut down cleanly.
void expectCleanStop(const ControllerProcess& c);

// A push body: node `node`'s pool of `devices` GPUs gpu-0, gpu-1, ..., each
// with an attribute of every kind (model = `model`, index, driverVersion) and
// a memory capacity. What the tests that publish through the service push.
Json gpuPool(const std::string& node, int devices, const std::string& model = "A100");

// How a test client checks an HTTPS server: against `ca_pem` (empty: the
// system store), for `server_name` (empty: the URL's host), or not at all.
struct HttpTls {
  std::string ca_pem = {};
  std::string server_name = {};
  bool insecure = false;
};

struct HttpAnswer {
  int code = 0;
  std::string body;
  Json json() const { return Json::parse(body, nullptr, false); }
};

class ServiceEnv {
 public:
  ServiceEnv();

  // The admin's typed API (RestKubeApi on the cluster's admin kubeconfig).
  client::KubeApi& api() { return *api_; }
  // The holder of Lease `lease` in namespace default ("" when none or absent).
  std::string leaseHolder(const std::string& lease);

  // Starts the controller with `args` added to the port and kubeconfig flags
  // (kubeconfig: the admin's unless `args` names one). Waits until /readyz
  // answers 200 (fails the test after 30 s).
  ControllerProcess startController(const std::string& name, std::vector<std::string> args);
  // Blocks until /readyz of `c` answers 200, up to `timeout`.
  bool waitReady(const ControllerProcess& c, std::chrono::seconds timeout);

  // An HTTP request to a controller (or any loopback URL, etcd's say), with
  // an optional bearer token.
  static HttpAnswer http(const std::string& method, const std::string& url,
                         const std::string& body = "", const std::string& token = "",
                         const HttpTls& tls = {});

  // A raw request to the API server as admin; fails the test on a transport
  // error (not on an HTTP error code).
  HttpAnswer kube(const std::string& method, const std::string& path, const Json& body = nullptr);
  // Creates the object (POST to `path`); a 409 AlreadyExists counts as done.
  void ensure(const std::string& path, const Json& object);

  void ensureNode(const std::string& name);
  void ensureNamespace(const std::string& name);
  void ensureServiceAccount(const std::string& ns, const std::string& name);
  // A pod on `node` (never runs: there is no kubelet) and a token bound to it
  // with `audience`, as a projected service-account token would be.
  std::string podToken(const std::string& ns, const std::string& sa, const std::string& pod,
                       const std::string& node, const std::string& audience);
  // A Pod on `node` as ServiceAccount `sa`, with the status a kubelet would give it once
  // running at `ip` (there is no kubelet: the status is written as admin). Returns its uid.
  std::string runningPod(const std::string& ns, const std::string& name, const std::string& node,
                         const std::string& ip, const std::string& sa = "default");
  // A token of the ServiceAccount for the API server's own audience, as a
  // scraper's mounted token is (TokenRequest, one hour).
  std::string serviceAccountToken(const std::string& ns, const std::string& sa);
  // Grants the ServiceAccount get on the non-resource URL /metrics, as the
  // chart's <fullname>-metrics-reader ClusterRole does.
  void grantMetricsReader(const std::string& ns, const std::string& sa);
  // Grants the ServiceAccount the given verbs on the drivers virtual resource
  // of the controller (resourceNames = driver names, empty: all).
  void grantPublish(const std::string& ns, const std::string& sa,
                    const std::vector<std::string>& drivers);

  // A ClusterRole `name` with `rule`, bound to the ServiceAccount ns/sa.
  void grant(const std::string& name, const Json& rule, const std::string& ns,
             const std::string& sa);

  // The managed slices of one pool, as the API server has them.
  // With `managed_only` false, also slices without the controller's label.
  std::vector<client::ResourceSlice> poolSlices(const std::string& driver, const std::string& pool,
                                                bool managed_only = true);
  // True when the pool's slices have one generation, `slices` of them, and
  // each says so in resourceSliceCount.
  bool poolComplete(const std::string& driver, const std::string& pool, size_t slices);

  // Polls `done` every 100 ms until it holds or `timeout` passes.
  static bool eventually(const std::function<bool()>& done,
                         std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // A scrape of a controller's /metrics, and one sample's value (NaN if absent).
  double metric(const ControllerProcess& c, const std::string& series);
  // The API server's own count of the requests it served for `resource`
  // with `verb` (GET, LIST, WATCH, POST, PUT, PATCH, DELETE: writes by their
  // HTTP method), from every client: the sum
  // of apiserver_request_total over its other labels, scraped as admin.
  // Dry runs (dryRun=All: answered, never stored) are counted apart: only
  // when `dry_run` is set, and then only they.
  double apiServerRequests(const std::string& resource, const std::string& verb,
                           bool dry_run = false);
  // apiServerRequests for resourceslices by write method: POST (create),
  // PUT (update) and DELETE.
  std::map<std::string, double> sliceWriteRequests();

  // A fresh temp folder for logs.
  const std::filesystem::path& logDir() const { return log_dir_; }

 private:
  ClusterEnvironment& cluster_;
  std::unique_ptr<client::HttpTransport> kube_transport_;
  std::unique_ptr<client::KubeApi> api_;
  std::filesystem::path log_dir_;
};

}  // namespace rsc::testing
