#include "controller/health_endpoint.h"

#include <string_view>

namespace rsc::controller {

http::HttpResponse healthResponse(const http::HttpRequest& request,
                                  const std::function<bool()>& synced) {
  const std::string_view path = http::splitTarget(request.target).first;
  if (path == "/healthz" || path == "/livez") return http::textResponse(200, "ok\n");
  if (path == "/readyz") {
    return synced() ? http::textResponse(200, "ok\n")
                    : http::textResponse(503, "informer cache not synced\n");
  }
  return http::textResponse(404, "not found\n");
}

}  // namespace rsc::controller
