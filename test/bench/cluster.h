// The benchmark's test cluster (test/cluster: a real kube-apiserver and etcd)
// and what the benchmark does on it as admin, outside the measured work:
// creating Nodes in bulk, listing and deleting slices, and reading the API
// server's own count of ResourceSlice writes from its /metrics.
// Threading: created and destroyed on the main thread; the methods may be
// called from any thread (the transport and API are thread-safe).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "client/http_transport.h"
#include "client/kubeconfig.h"
#include "client/rest_kube_api.h"
#include "common/clock.h"
#include "common/status.h"

namespace rsc::bench {

class Cluster {
 public:
  // Starts a cluster in a fresh temp folder with test/cluster/start; it stops
  // by itself if this process dies.
  static StatusOr<std::unique_ptr<Cluster>> start(const std::filesystem::path& source_root,
                                                  Clock& clock);
  // Stops the cluster and removes its folder.
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path kubeconfig() const { return dir_ / "kubeconfig"; }
  const client::ClientConfig& config() const { return config_; }
  // The admin's API without a client-side rate limit.
  client::KubeApi& api() { return *api_; }
  // The PID of kube-apiserver, for its memory and CPU.
  int apiserverPid() const;
  // Makes the API server collect its garbage now (runtime.GC through its
  // /debug/pprof/heap?gc=1; the bench's cluster runs with --profiling), so
  // that a measured run does not inherit a collection the one before it
  // caused.
  Status collectGarbage();

  // Creates the Nodes that do not exist yet (each labelled fabric=...), from
  // `connections` threads, and returns every node's UID by name.
  StatusOr<std::map<std::string, std::string>> ensureNodes(const std::vector<std::string>& names,
                                                           int connections);

  // Every ResourceSlice labelled app.kubernetes.io/managed-by=`managed_by`,
  // paged.
  StatusOr<std::vector<client::ResourceSlice>> listSlices(const std::string& managed_by);
  // Deletes them (one delete-collection call) and waits until they are gone.
  Status deleteSlices(const std::string& managed_by);

  // The API server's count of ResourceSlice writes (POST, PUT, PATCH, DELETE),
  // from apiserver_request_total: those it accepted (2xx), and those it
  // refused (429 of its priority and fairness, 409, 5xx...), which the client
  // retries or reports and which change nothing.
  struct SliceWrites {
    double accepted = 0;
    double refused = 0;
  };
  StatusOr<SliceWrites> sliceWrites();

 private:
  Cluster(std::filesystem::path source_root, std::filesystem::path dir, Clock& clock)
      : source_root_(std::move(source_root)), dir_(std::move(dir)), clock_(clock) {}

  std::filesystem::path source_root_;
  std::filesystem::path dir_;
  Clock& clock_;
  client::ClientConfig config_;
  std::unique_ptr<client::HttpTransport> transport_;
  std::unique_ptr<client::KubeApi> api_;
};

// Sums the samples of metric `name` in Prometheus text `text` whose labels
// all match `labels` (name -> accepted values; a label not named is not
// checked).
double sumSamples(const std::string& text, const std::string& name,
                  const std::map<std::string, std::vector<std::string>>& labels = {});

}  // namespace rsc::bench
