// healthResponse: the answers of the health-probe server
// (--health-probe-bind-address). /healthz and /livez say the process serves;
// /readyz says whether the informer caches have synced. A pure function of
// the request, for tests; main hands it to an HttpServer. Thread-safe when
// `synced` is.
#pragma once

#include <functional>

#include "controller/http/http.h"

namespace rsc::controller {

// 200 "ok" on /healthz and /livez; on /readyz 200 "ok" once `synced()`
// returns true, else 503; 404 elsewhere. `synced` is called for /readyz only.
http::HttpResponse healthResponse(const http::HttpRequest& request,
                                  const std::function<bool()>& synced);

}  // namespace rsc::controller
