// LeaderForwarder: on a replica that does not lead, sends an inventory
// request on to the leader (whose URL the leader publishes in the Lease) and
// returns the leader's answer, so that a driver may push to any replica.
// The driver's own Authorization header goes along: the leader checks it.
// The leader's URL comes from the Lease, which anyone who may patch Leases can
// rewrite, so nothing is sent to it unless it is https, the leader's
// certificate chains to the CA bundle in `ca_file` (re-read as it rotates)
// or `ca_bundle`, never the system store, and names `tls_server_name` (the
// Service's DNS name) when that is set, else the host of the leader's URL.
// Plain http only with `allow_insecure` (--forward-insecure, local tests).
// A refused or failed forward is answered 503 naming the leader and why.
// Thread-safe; forward() blocks its caller (an inventory worker thread).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "client/http_transport.h"
#include "common/clock.h"
#include "common/log.h"
#include "controller/http/http.h"

namespace rsc::controller::inventory {

// Why a follower did not forward a request, answering 503 instead.
enum class ForwardRefusal {
  kInsecure,  // the leader's URL is not https, or there is no CA bundle to verify it with
  kFailed,    // the leader cannot be reached, or its certificate does not verify
};
// "forward_insecure", "forward_failed": the reason label of the inventory API's refusals.
std::string_view forwardRefusalName(ForwardRefusal refusal);

struct LeaderForwarderOptions {
  Clock* clock = nullptr;
  // Returns the leader's inventory URL ("" while unknown).
  std::function<std::string()> leader_url;
  // Returns this replica's own URL, never forwarded to.
  std::string own_url;
  // PEM file with the bundle that the leader's certificate must chain to (for
  // https). Checked at most once per ca_reload_interval; a changed bundle is
  // used from the next forward on, an unreadable one keeps the last good one.
  std::string ca_file;
  std::chrono::milliseconds ca_reload_interval{5'000};
  // The bundle itself, cheap to call, instead of ca_file (the self-signed
  // mode's, which changes as it rotates); checked on every forward.
  std::function<std::string()> ca_bundle = nullptr;
  // The name the leader's certificate is checked against, if not its host.
  std::string tls_server_name;
  // Forwards to a plain-http leader URL too, the driver's token in clear
  // text to whatever URL the Lease names (--forward-insecure). Default off.
  bool allow_insecure = false;
  // Returns the leader's identity (the Lease holder), for the 503's message.
  std::function<std::string()> leader_identity = nullptr;
  // Counts a forward that was refused or failed. Optional.
  std::function<void(ForwardRefusal refusal)> on_refused = nullptr;
  // When the leader cannot be reached, asks for a fresh read of the Lease
  // and returns once it was read or at the deadline given (the elector's
  // pollNow()): a leader that went away released the Lease, and another
  // replica, maybe this one, holds it by now. Then the request goes to the
  // new leader, once. At most one such read per refresh_interval, however
  // many requests fail; a push waits at most refresh_wait for it. Optional.
  std::function<void(Clock::TimePoint deadline)> refresh_leader = nullptr;
  Clock::Duration refresh_interval = std::chrono::seconds(2);
  Clock::Duration refresh_wait = std::chrono::seconds(2);
};

class LeaderForwarder {
 public:
  explicit LeaderForwarder(LeaderForwarderOptions options)
      : options_(std::move(options)), throttle_(*options_.clock) {}

  // Returns the leader's answer; a 503 naming the leader and why when its
  // URL is refused or it cannot be reached or verified; nullopt when there is
  // no other leader to ask (the caller answers 503, unless it leads by now).
  std::optional<http::HttpResponse> forward(const http::HttpRequest& request);

  // How many times the CA bundle was (re)loaded; for tests.
  size_t caLoadsForTest() const;

 private:
  // Re-reads ca_file when due; drops the transport when the bundle changed.
  void refreshCaLocked();
  // What sending to one URL gave: the answer (the leader's, or the 503 of a
  // refused URL), or why the leader could not be reached.
  struct Sent {
    std::optional<http::HttpResponse> response;
    std::string unreachable;
  };
  Sent send(const std::string& url, const http::HttpRequest& request);
  // After `failed` could not be reached: the leader's URL after a fresh read
  // of the Lease (or the last one, within refresh_interval of another), or
  // nullopt when it still names `failed`.
  std::optional<std::string> refreshedLeaderUrl(const std::string& failed);
  // The 503 of a refused or failed forward, counted and logged (throttled).
  http::HttpResponse refuse(ForwardRefusal refusal, const std::string& url, const std::string& why);

  LeaderForwarderOptions options_;
  log::Throttle throttle_;  // of the refusals' log lines
  mutable std::mutex mu_;
  std::string url_;                                   // guarded by mu_
  std::shared_ptr<client::HttpTransport> transport_;  // guarded by mu_
  std::string ca_pem_;                                // guarded by mu_
  std::optional<Clock::TimePoint> ca_checked_at_;     // guarded by mu_
  size_t ca_loads_ = 0;                               // guarded by mu_
  std::optional<Clock::TimePoint> refreshed_at_;      // guarded by mu_
};

}  // namespace rsc::controller::inventory
