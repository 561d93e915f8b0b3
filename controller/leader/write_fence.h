// WriteFence: an HttpTransport in front of the real one that refuses writes to
// the resource.k8s.io API group (the slices the leader lease guards) while
// `may_write` is false, without reaching the server. RestKubeApi sends every
// attempt, retries included, through it, so with LeaderElector::holdsLease no
// slice write leaves a replica past its renew deadline. Thread-safe if
// `may_write` is.
#pragma once

#include <functional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>

#include "client/http_transport.h"

namespace rsc::controller::leader {

// Status::reason() of a write the fence refused.
inline constexpr char kReasonNotLeader[] = "NotLeader";

class WriteFence final : public client::HttpTransport {
 public:
  WriteFence(client::HttpTransport& inner, std::function<bool()> may_write)
      : inner_(inner), may_write_(std::move(may_write)) {}

  // Whether `request` is a write that the fence guards.
  static bool guarded(const client::HttpRequest& request);

  StatusOr<client::HttpResponse> send(const client::HttpRequest& request) override;
  StatusOr<client::HttpResponse> stream(
      const client::HttpRequest& request,
      const std::function<void(const client::HttpResponse&)>& on_head,
      const std::function<bool(std::string_view)>& on_chunk, std::stop_token stop) override;
  std::string host() const override { return inner_.host(); }

 private:
  Status refused(const client::HttpRequest& request) const;

  client::HttpTransport& inner_;
  std::function<bool()> may_write_;
};

}  // namespace rsc::controller::leader
