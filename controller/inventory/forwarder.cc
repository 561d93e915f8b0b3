#include "controller/inventory/forwarder.h"

#include "client/config.h"
#include "common/log.h"
#include "controller/inventory/certificates.h"

namespace rsc::controller::inventory {

// The header a forwarded request carries, so that a leader that lost its
// lease meanwhile does not send the request around again.
constexpr char kForwardedHeader[] = "x-resourceslice-forwarded";

size_t LeaderForwarder::caLoadsForTest() const {
  std::lock_guard lock(mu_);
  return ca_loads_;
}

void LeaderForwarder::refreshCaLocked() {
  if (options_.ca_bundle) {
    std::string pem = options_.ca_bundle();
    if (pem == ca_pem_) return;
    ca_pem_ = std::move(pem);
    ++ca_loads_;
    transport_.reset();
    return;
  }
  if (options_.ca_file.empty()) return;
  const Clock::TimePoint now = options_.clock->now();
  if (ca_checked_at_ && now - *ca_checked_at_ < options_.ca_reload_interval) return;
  ca_checked_at_ = now;
  StatusOr<std::string> pem = readCertificateFile(options_.ca_file);
  if (!pem.ok()) {
    log::error("Cannot read the CA bundle for forwarding to the leader; keeping the last one",
               pem.status(), {{"file", options_.ca_file}});
    return;
  }
  if (*pem == ca_pem_) return;
  if (ca_loads_ > 0)
    log::info("Reloaded the CA bundle for forwarding", {{"file", options_.ca_file}});
  ca_pem_ = std::move(*pem);
  ++ca_loads_;
  transport_.reset();
}

std::optional<HttpResponse> LeaderForwarder::forward(const HttpRequest& request) {
  if (request.header(kForwardedHeader)) return std::nullopt;
  const std::string url = options_.leader_url ? options_.leader_url() : "";
  if (url.empty() || url == options_.own_url) return std::nullopt;

  std::shared_ptr<client::HttpTransport> transport;
  {
    std::lock_guard lock(mu_);
    refreshCaLocked();
    if (url != url_ || transport_ == nullptr) {
      client::ClientConfig config;
      config.server = url;
      config.ca_pem = ca_pem_;
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
  HttpResponse response;
  response.status = answer->code;
  response.content_type = answer->header("content-type");
  response.body = answer->body;
  for (const char* name : {"allow", "retry-after"}) {
    const std::string v = answer->header(name);
    if (!v.empty()) response.headers.emplace_back(name, v);
  }
  return response;
}

}  // namespace rsc::controller::inventory
