#include "controller/metrics_endpoint.h"

#include <algorithm>
#include <utility>

#include "common/clock.h"
#include "common/log.h"
#include "metrics/exposition.h"

namespace rsc::controller {

namespace {

using http::textResponse;

// The HTTP answer to a failed check, as the API server's own authn/authz
// filters give it.
http::HttpResponse refusalOf(const Status& status) {
  switch (status.code()) {
    case StatusCode::kUnauthenticated: {
      http::HttpResponse r = textResponse(401, "Unauthorized: " + status.message() + "\n");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
      return r;
    }
    case StatusCode::kPermissionDenied:
      return textResponse(403, "Forbidden: " + status.message() + "\n");
    case StatusCode::kResourceExhausted: {
      http::HttpResponse r = textResponse(429, status.message() + "\n");
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
    default: {
      http::HttpResponse r = textResponse(503, status.message() + "\n");
      r.headers.emplace_back("Retry-After", "1");
      return r;
    }
  }
}

}  // namespace

struct MetricsEndpoint::Workers {
  Workers(size_t n, WorkerPool* shared)
      : own_pool(shared == nullptr
                     ? std::make_unique<WorkerPool>(RealClock::instance(), "metrics-auth", n)
                     : nullptr),
        lane((shared != nullptr ? *shared : *own_pool).lane(n)) {}
  // Without a shared pool, one of its own; before the lane.
  std::unique_ptr<WorkerPool> own_pool;
  std::unique_ptr<WorkerPool::Lane> lane;
};

MetricsEndpoint::MetricsEndpoint(MetricsEndpointOptions options)
    : options_(std::move(options)),
      // Only reviews need them: without an authenticator, no lane.
      workers_(options_.authenticator != nullptr
                   ? std::make_unique<Workers>(options_.workers, options_.pool)
                   : nullptr) {}

MetricsEndpoint::~MetricsEndpoint() {
  if (workers_) workers_->lane->drain();
}

http::Admission MetricsEndpoint::admit(const http::HttpRequest& head) {
  http::Admission admission;
  // Scrapes have no body.
  admission.max_body_bytes = 0;
  if (options_.authenticator == nullptr) return admission;
  Status checked = [&]() -> Status {
    StatusOr<pool::Caller> caller =
        options_.authenticator->authenticate(head.header("authorization"), head.client_address);
    if (!caller.ok()) return caller.status();
    // The verb of a non-resource request is its method in lower case.
    return options_.authenticator->authorizePath(*caller, http::asciiLower(head.method),
                                                 http::splitTarget(head.target).first);
  }();
  if (!checked.ok()) {
    admission.refusal = refusalOf(checked);
    log::debug(2, "Metrics request refused",
               {{"target", head.target},
                {"code", admission.refusal->status},
                {"remote", head.remote_address},
                {"error", checked.message()}});
  }
  return admission;
}

http::HttpResponse MetricsEndpoint::handle(const http::HttpRequest& request) const {
  if (http::splitTarget(request.target).first != "/metrics") {
    return textResponse(404, "not found\n");
  }
  if (request.method != "GET" && request.method != "HEAD") {
    http::HttpResponse r = textResponse(405, "method not allowed\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  http::HttpResponse r;
  r.status = 200;
  r.content_type = std::string(metrics::kTextContentType);
  r.body = metrics::serializeText(options_.collectables);
  return r;
}

std::function<void(const http::HttpRequest&, std::function<void(http::Admission)>)>
MetricsEndpoint::admitHandler() {
  if (options_.authenticator == nullptr) return nullptr;
  return [this](const http::HttpRequest& head, std::function<void(http::Admission)> decide) {
    // A shared_ptr, so that a refused post can still answer.
    auto answer = std::make_shared<std::function<void(http::Admission)>>(std::move(decide));
    if (!workers_->lane->post([this, head, answer] { (*answer)(admit(head)); })) {
      http::Admission refused;
      refused.refusal = refusalOf(unavailable("the metrics endpoint is shutting down"));
      (*answer)(std::move(refused));
    }
  };
}

http::HttpServer::Handler MetricsEndpoint::httpHandler() {
  return [this](const http::HttpRequest& request, const http::HttpServer::Responder& respond) {
    respond(handle(request));
  };
}

}  // namespace rsc::controller
