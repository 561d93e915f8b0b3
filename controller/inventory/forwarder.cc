#include "controller/inventory/forwarder.h"

#include "client/config.h"
#include "common/enum_names.h"
#include "common/log.h"
#include "controller/http/certificates.h"
#include "controller/inventory/handler.h"

namespace rsc::controller::inventory {

using http::HttpRequest;
using http::HttpResponse;
using http::readCertificateFile;

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

std::string_view forwardRefusalName(ForwardRefusal refusal) {
  static constexpr auto kNames =
      enumNames<ForwardRefusal>({{ForwardRefusal::kInsecure, "forward_insecure"},
                                 {ForwardRefusal::kFailed, "forward_failed"}});
  return kNames(refusal);
}

HttpResponse LeaderForwarder::refuse(ForwardRefusal refusal, const std::string& url,
                                     const std::string& why) {
  const std::string_view reason = forwardRefusalName(refusal);
  std::string leader = options_.leader_identity ? options_.leader_identity() : std::string();
  if (leader.empty()) leader = "(unknown)";
  if (options_.on_refused) options_.on_refused(refusal);
  if (std::optional<uint64_t> held = throttle_.allow(reason)) {
    log::warning("Not forwarding a push to the leader", {{"leader", leader},
                                                         {"url", url},
                                                         {"reason", std::string(reason)},
                                                         {"why", why},
                                                         {"held_back", std::to_string(*held)}});
  }
  HttpResponse response = errorResponse(
      503, "this replica is not the leader and does not forward to the leader " + leader + " (" +
               url + "): " + why + "; push to the leader directly, or retry");
  response.headers.emplace_back("Retry-After", "10");
  return response;
}

std::optional<HttpResponse> LeaderForwarder::forward(const HttpRequest& request) {
  if (request.header(kForwardedHeader)) return std::nullopt;
  const std::string url = options_.leader_url ? options_.leader_url() : "";
  if (url.empty() || url == options_.own_url) return std::nullopt;
  Sent sent = send(url, request);
  if (sent.response) return std::move(sent.response);
  // Not reached. The Lease as this replica last read it may name a leader
  // that went away: read it again, and try the leader it names now, once.
  const std::optional<std::string> fresh = refreshedLeaderUrl(url);
  if (!fresh) return refuse(ForwardRefusal::kFailed, url, sent.unreachable);
  if (fresh->empty() || *fresh == options_.own_url) return std::nullopt;
  log::info("Forwarding to the leader the Lease names now",
            {{"unreachable", url}, {"url", *fresh}});
  Sent again = send(*fresh, request);
  if (again.response) return std::move(again.response);
  return refuse(ForwardRefusal::kFailed, *fresh, again.unreachable);
}

std::optional<std::string> LeaderForwarder::refreshedLeaderUrl(const std::string& failed) {
  if (!options_.refresh_leader) return std::nullopt;
  bool read = false;
  {
    std::lock_guard lock(mu_);
    const Clock::TimePoint now = options_.clock->now();
    if (!refreshed_at_ || now - *refreshed_at_ >= options_.refresh_interval) {
      refreshed_at_ = now;
      read = true;
    }
  }
  if (read) options_.refresh_leader(options_.clock->now() + options_.refresh_wait);
  std::string url = options_.leader_url();
  if (url == failed) return std::nullopt;
  return url;
}

LeaderForwarder::Sent LeaderForwarder::send(const std::string& url, const HttpRequest& request) {
  const bool plain = url.starts_with("http://");
  if (!url.starts_with("https://") && !(plain && options_.allow_insecure)) {
    return {refuse(ForwardRefusal::kInsecure, url,
                   "its URL is not https, and the driver's credentials go only over verified TLS "
                   "(--forward-insecure allows plain http for a local test)"),
            ""};
  }

  std::shared_ptr<client::HttpTransport> transport;
  Status made_status = okStatus();
  ForwardRefusal refusal = ForwardRefusal::kFailed;
  {
    std::lock_guard lock(mu_);
    refreshCaLocked();
    if (!plain && ca_pem_.empty()) {
      refusal = ForwardRefusal::kInsecure;
      made_status = failedPrecondition(
          "there is no CA bundle to verify its certificate with (--inventory-ca-file)");
    } else if (url != url_ || transport_ == nullptr) {
      client::ClientConfig config;
      config.server = url;
      config.ca_pem = ca_pem_;
      config.tls_server_name = options_.tls_server_name;
      config.qps = 0;
      auto made = client::CpprestTransport::create(config, *options_.clock);
      if (made.ok()) {
        transport_ = std::shared_ptr<client::HttpTransport>(std::move(*made));
        url_ = url;
      } else {
        made_status = made.status();
      }
    }
    if (made_status.ok()) transport = transport_;
  }
  if (!made_status.ok()) return {refuse(refusal, url, made_status.message()), ""};

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
    return {std::nullopt, "it cannot be reached or its certificate does not verify: " +
                              answer.status().message()};
  }
  HttpResponse response;
  response.status = answer->code;
  response.content_type = answer->header("content-type");
  response.body = answer->body;
  for (const char* name : {"allow", "retry-after"}) {
    const std::string v = answer->header(name);
    if (!v.empty()) response.headers.emplace_back(name, v);
  }
  return {std::move(response), ""};
}

}  // namespace rsc::controller::inventory
