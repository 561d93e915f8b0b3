#include "controller/health_endpoint.h"

#include <string_view>

namespace rsc::controller {

inventory::HttpResponse healthResponse(const inventory::HttpRequest& request,
                                       const std::function<bool()>& synced) {
  const std::string_view path = inventory::splitTarget(request.target).first;
  if (path == "/healthz" || path == "/livez") return inventory::textResponse(200, "ok\n");
  if (path == "/readyz") {
    return synced() ? inventory::textResponse(200, "ok\n")
                    : inventory::textResponse(503, "informer cache not synced\n");
  }
  return inventory::textResponse(404, "not found\n");
}

}  // namespace rsc::controller
