// InventoryMetrics: what the inventory HTTP API reports: a counter of pushes
// by driver and HTTP status code, one of pool bodies by how they were taken, and one of what its
// limits refused. Built once by main and passed by reference to the request handler.
// Thread-safe: every connection's handler calls it.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include <array>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace rsc::metrics {

class InventoryMetrics {
 public:
  // The driver name of a push is a label only once its caller is
  // authenticated and authorized for that driver; still, a caller allowed
  // every driver could name many. Past this many distinct drivers, new ones
  // are counted under kOverflowDriver. A cluster runs a handful of DRA
  // drivers; 64 leaves room while bounding the series to 64 x the codes.
  static constexpr std::size_t kDefaultMaxDrivers = 64;
  // Not a valid DNS subdomain, so no real driver has this name.
  static constexpr std::string_view kOverflowDriver = "_other";
  // The label of every push refused before its caller was authenticated and
  // authorized (push() given driver ""): one series per code, whatever names
  // unauthenticated callers put in their paths; outside the limit above.
  static constexpr std::string_view kRefusedDriver = "_refused";

  // Registers the family in `registry`, which must outlive this object.
  explicit InventoryMetrics(prometheus::Registry& registry,
                            std::size_t max_drivers = kDefaultMaxDrivers);
  InventoryMetrics(const InventoryMetrics&) = delete;
  InventoryMetrics& operator=(const InventoryMetrics&) = delete;

  // Counts one push request of `driver` (kRefusedDriver when "") answered
  // with `http_code`. On a
  // driver's first push the codes the API answers with (DESIGN.md section 4)
  // are created at 0, so error-ratio alerts have a denominator from the start.
  void push(std::string_view driver, int http_code);

  // Counts one body of PUT /v1/drivers/{driver}/pools/{pool} by how the
  // handler took it: "decoded" (parsed, validated and compared) or
  // "unchanged" (the same bytes as the body of the pool's current content:
  // only the lease is renewed). Both series of a driver start at 0 with its
  // first body; drivers past the limit share kOverflowDriver as in push().
  void poolBody(std::string_view driver, bool unchanged);

  // The reasons the API refuses work before a handler sees it: the HTTP
  // server's limits (named as HttpServer's refusalName gives them), the
  // authenticator's, the decode budget's (inflight_decoded) and a follower's
  // refusals to forward (LeaderForwarder: forward_insecure, a leader URL not
  // https or no CA to verify it; forward_failed, a leader unreachable or not
  // verified). Created at 0 so that rate() alerts work from the start.
  static constexpr std::array<std::string_view, 15> kRefusalReasons = {
      "connections",      "client_connections", "evicted",          "header_timeout",
      "body_timeout",     "headers_too_large",  "body_too_large",   "inflight_bodies",
      "malformed",        "auth_client_rate",   "auth_review_rate", "token_rejected",
      "inflight_decoded", "forward_insecure",   "forward_failed"};
  // Counts one refusal; `reason` is one of kRefusalReasons (others are a
  // programmer error and counted as "other").
  void refused(std::string_view reason);

  // What the self-signed certificate of the inventory API went through
  // (CertificateSecret's events); created at 0. "failed" rising means the
  // Secret or the CA bundle ConfigMap cannot be read or written: rotation
  // stalls while the served certificate ages.
  static constexpr std::array<std::string_view, 7> kCertificateEvents = {
      "created", "adopted", "prepared", "rotated", "repaired", "published", "failed"};
  // Counts one event; others are counted as "other".
  void certificateEvent(std::string_view event);

 private:
  prometheus::Counter& counterLocked(const std::string& driver, int http_code);

  prometheus::Family<prometheus::Counter>& pushes_;
  prometheus::Family<prometheus::Counter>& bodies_;
  prometheus::Family<prometheus::Counter>& refusals_;
  // One counter per reason, fixed at construction: no lock needed.
  std::map<std::string_view, prometheus::Counter*> refusal_counters_;
  prometheus::Family<prometheus::Counter>& certificate_events_;
  std::map<std::string_view, prometheus::Counter*> certificate_counters_;
  const std::size_t max_drivers_;

  std::mutex mu_;
  // Counters by driver and code. Counters are never removed, so a pointer
  // stays valid after the lock is released.
  std::map<std::string, std::map<int, prometheus::Counter*>, std::less<>>
      drivers_;  // guarded by mu_
  struct BodyCounters {
    prometheus::Counter* decoded;
    prometheus::Counter* unchanged;
  };
  std::map<std::string, BodyCounters, std::less<>> body_drivers_;  // guarded by mu_
};

}  // namespace rsc::metrics
