#include "controller/metrics_endpoint.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "common/thread_name.h"
#include "controller/http/asio.h"
#include "metrics/exposition.h"

namespace rsc::controller {

namespace inv = inventory;

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
  explicit Workers(size_t n) : pool(std::max<size_t>(n, 1)) {
    nameEveryThread(std::max<size_t>(n, 1), "metrics-auth",
                    [this](auto task) { asio::post(pool, std::move(task)); });
  }
  asio::thread_pool pool;
};

MetricsEndpoint::MetricsEndpoint(MetricsEndpointOptions options)
    : options_(std::move(options)),
      // Only reviews need them: without an authenticator, no thread.
      workers_(options_.authenticator != nullptr ? std::make_unique<Workers>(options_.workers)
                                                 : nullptr) {}

MetricsEndpoint::~MetricsEndpoint() {
  if (workers_) workers_->pool.join();
}

http::Admission MetricsEndpoint::admit(const http::HttpRequest& head) {
  http::Admission admission;
  // Scrapes have no body.
  admission.max_body_bytes = 0;
  if (options_.authenticator == nullptr) return admission;
  Status checked = [&]() -> Status {
    StatusOr<inv::Caller> caller =
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
    asio::post(workers_->pool, [this, head, decide = std::move(decide)] { decide(admit(head)); });
  };
}

http::HttpServer::Handler MetricsEndpoint::httpHandler() {
  return [this](const http::HttpRequest& request, const http::HttpServer::Responder& respond) {
    respond(handle(request));
  };
}

}  // namespace rsc::controller
