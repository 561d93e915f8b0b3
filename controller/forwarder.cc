#include "controller/forwarder.h"

#include "client/config.h"
#include "common/log.h"

namespace rsc::controller {

// The header a forwarded request carries, so that a leader that lost its
// lease meanwhile does not send the request around again.
constexpr char kForwardedHeader[] = "x-resourceslice-forwarded";

std::optional<inventory::HttpResponse> LeaderForwarder::forward(
    const inventory::HttpRequest& request) {
  if (request.header(kForwardedHeader)) return std::nullopt;
  const std::string url = options_.leader_url ? options_.leader_url() : "";
  if (url.empty() || url == options_.own_url) return std::nullopt;

  std::shared_ptr<client::HttpTransport> transport;
  {
    std::lock_guard lock(mu_);
    if (url != url_ || transport_ == nullptr) {
      client::ClientConfig config;
      config.server = url;
      config.ca_pem = options_.ca_pem;
      config.tls_server_name = options_.tls_server_name;
      config.qps = 0;
      auto made = client::CpprestTransport::create(config, *options_.clock);
      if (!made.ok()) {
        log::error("Cannot forward to the leader", made.status(), {{"leader", url}});
        return std::nullopt;
      }
      transport_ = std::shared_ptr<client::HttpTransport>(std::move(*made));
      url_ = url;
    }
    transport = transport_;
  }

  client::HttpRequest out;
  out.method = request.method;
  out.path_and_query = request.target;
  out.body = request.body;
  // ?wait= may hold the answer for up to a minute.
  out.timeout = std::chrono::seconds(90);
  for (const auto& [name, value] : request.headers) {
    if (name == "authorization" || name == "content-type" || name == "accept") {
      out.headers.emplace_back(name, value);
    }
  }
  out.headers.emplace_back(kForwardedHeader, "1");
  StatusOr<client::HttpResponse> answer = transport->send(out);
  if (!answer.ok()) {
    log::warning("Forwarding to the leader failed",
                 {{"leader", url}, {"error", answer.status().toString()}});
    return std::nullopt;
  }
  inventory::HttpResponse response;
  response.status = answer->code;
  response.content_type = answer->header("content-type");
  response.body = answer->body;
  for (const char* name : {"allow", "retry-after"}) {
    const std::string v = answer->header(name);
    if (!v.empty()) response.headers.emplace_back(name, v);
  }
  return response;
}

}  // namespace rsc::controller
