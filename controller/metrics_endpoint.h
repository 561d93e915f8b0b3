// MetricsEndpoint: the service's /metrics behind an HttpServer. With an Authenticator
// (--metrics-secure) every request must carry a bearer token that passes TokenReview and a
// SubjectAccessReview for its verb on its path (RBAC nonResourceURLs, get /metrics), as
// controller-runtime's metrics filter does: 401 without or with a bad token, 403 without the
// grant. The checks run in the server's admission step on a lane of a WorkerPool, so the I/O
// thread never blocks on the API server. main builds it and gives admitHandler() and
// httpHandler() to the metrics server. Thread-safe.
#pragma once

#include <prometheus/collectable.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "common/worker_pool.h"
#include "controller/http/http.h"
#include "controller/http/http_server.h"
#include "controller/inventory/authenticator.h"

namespace rsc::controller {

struct MetricsEndpointOptions {
  // What a scrape reports, in order (metrics::serializeText).
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables;
  // Null: every request is admitted (--metrics-secure=false). Must outlive
  // the endpoint.
  inventory::Authenticator* authenticator = nullptr;
  // How many TokenReview and SubjectAccessReview calls wait at once, only
  // with an authenticator; a scraper or two need little.
  size_t workers = 2;
  // Where they wait; must outlive the endpoint. Null: a pool of its own, of
  // `workers` threads ("metrics-auth"), made with an authenticator.
  WorkerPool* pool = nullptr;
};

class MetricsEndpoint {
 public:
  explicit MetricsEndpoint(MetricsEndpointOptions options);
  // Waits for the reviews under way: destroy after the server is stopped.
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Decides on a request from its headers; blocks on the API server on a
  // cache miss. Pure apart from the authenticator, for tests.
  http::Admission admit(const http::HttpRequest& head);
  // Answers an admitted request: the scrape on GET /metrics, else 404.
  http::HttpResponse handle(const http::HttpRequest& request) const;

  // For HttpServerOptions::admit: admit() on the worker threads. Unset
  // (nullptr) when there is no authenticator.
  std::function<void(const http::HttpRequest&, std::function<void(http::Admission)>)>
  admitHandler();
  // For HttpServer::start.
  http::HttpServer::Handler httpHandler();

 private:
  struct Workers;
  const MetricsEndpointOptions options_;
  std::unique_ptr<Workers> workers_;
};

}  // namespace rsc::controller
