// Who may push to the inventory API, or read /metrics: an Authenticator turns a bearer token
// into a pool::Caller and decides whether it may act on a driver (the handler adds the node
// restriction) or fetch a non-resource path (/metrics, as controller-runtime's metrics filter).
// TokenReviewAuthenticator asks the API server (TokenReview, SubjectAccessReview) and caches
// both answers; NoAuthAuthenticator (--auth=none, local development only) allows everything.
// Implementations are thread-safe: handler threads call them concurrently.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "client/kube_api.h"
#include "client/objects.h"
#include "client/token_bucket.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/pool/caller.h"

namespace rsc::controller::inventory {

// The virtual resource that RBAC rules grant access to, e.g.
//   rules: [{apiGroups: [resourceslice.dra.k8s.io], resources: [drivers],
//            resourceNames: [gpu.example.com], verbs: [publish, get]}]
inline constexpr char kAuthzGroup[] = "resourceslice.dra.k8s.io";
inline constexpr char kAuthzResource[] = "drivers";
// Verbs: writes (PUT, DELETE, renew) of one driver, reads of one driver, and
// the read of every driver (GET /v1/drivers, which names none).
inline constexpr char kVerbPublish[] = "publish";
inline constexpr char kVerbGet[] = "get";
inline constexpr char kVerbList[] = "list";
// The TokenReview extra that names the node a pod's token is bound to.
inline constexpr char kNodeNameExtra[] = "authentication.kubernetes.io/node-name";

class Authenticator {
 public:
  virtual ~Authenticator() = default;

  // Authenticates the request's Authorization header value (nullopt when the
  // header is absent) sent from address `client`. Fails with Unauthenticated
  // (HTTP 401) for a missing or rejected token, ResourceExhausted (429) when
  // the client sends too many new tokens, Unavailable (503) when the token
  // cannot be checked now.
  virtual StatusOr<pool::Caller> authenticate(std::optional<std::string_view> authorization,
                                              std::string_view client) = 0;

  // Decides whether `caller` may do `verb` on `driver` (empty: every driver).
  // Fails with PermissionDenied (403) or Unavailable (503).
  virtual Status authorize(const pool::Caller& caller, std::string_view verb,
                           std::string_view driver) = 0;

  // Decides whether `caller` may do `verb` on the non-resource URL `path`
  // (RBAC nonResourceURLs, e.g. get /metrics). Fails as authorize().
  virtual Status authorizePath(const pool::Caller& caller, std::string_view verb,
                               std::string_view path) = 0;

  // What authenticate() would answer, when that needs no call to the API
  // server (a cached token, a missing or malformed header); nullopt when it
  // would. Never blocks, so the HTTP server's I/O thread may call it. The
  // default knows nothing without asking.
  virtual std::optional<StatusOr<pool::Caller>> authenticateCached(
      std::optional<std::string_view> /*authorization*/) {
    return std::nullopt;
  }
  // What authorize() would answer, when that needs no call to the API server;
  // nullopt when it would. Never blocks.
  virtual std::optional<Status> authorizeCached(const pool::Caller& /*caller*/,
                                                std::string_view /*verb*/,
                                                std::string_view /*driver*/) {
    return std::nullopt;
  }
};

// Allows everything, as an unrestricted caller. For --auth=none only.
class NoAuthAuthenticator final : public Authenticator {
 public:
  StatusOr<pool::Caller> authenticate(std::optional<std::string_view> authorization,
                                      std::string_view client) override;
  Status authorize(const pool::Caller& caller, std::string_view verb,
                   std::string_view driver) override;
  Status authorizePath(const pool::Caller& caller, std::string_view verb,
                       std::string_view path) override;
  std::optional<StatusOr<pool::Caller>> authenticateCached(
      std::optional<std::string_view> authorization) override;
  std::optional<Status> authorizeCached(const pool::Caller& caller, std::string_view verb,
                                        std::string_view driver) override;
};

// Why TokenReviewAuthenticator refused to ask the API server; the label of
// its refusals metric.
enum class AuthRefusal {
  kClientRate,  // one client sent too many tokens that were not cached
  kReviewRate,  // every client together did
};

struct TokenReviewAuthenticatorOptions {
  // The audience drivers' tokens are issued for (a projected
  // serviceAccountToken volume with this audience). It is sent in
  // spec.audiences and must come back in status.audiences. Empty: the API
  // server's own audiences, not checked (weaker: any service-account token
  // of the cluster is accepted).
  std::string audience;
  // The API server's own delegating authenticator caches for 10 s; a revoked
  // token or RBAC grant takes effect within this time.
  Clock::Duration cache_ttl = std::chrono::seconds(10);
  // Bounds memory against callers that send many distinct tokens.
  size_t max_cache_entries = 4096;
  // TokenReviews and SubjectAccessReviews (cache misses) per second, over
  // every client, and their burst (--auth-review-qps/-burst). Past it a
  // request is answered 503 at once instead of queueing, so that a flood of
  // invented tokens neither waits on nor spends the API budget of publishing
  // (the reviews go through their own client, see main).
  double review_qps = 20;
  int review_burst = 40;
  // TokenReviews per second that one client address may cause, and their
  // burst (--auth-client-review-qps/-burst); past it: 429. A node's drivers
  // present a few tokens an hour, each checked once per cache_ttl.
  double client_review_qps = 1;
  int client_review_burst = 10;
  // Client addresses tracked for the per-client limit; the least recently
  // seen is forgotten past it.
  size_t max_clients = 4096;
  // Counts each refusal, for a metric. Optional.
  std::function<void(AuthRefusal)> on_refused = nullptr;
  // Counts each token rejected by the API server, for a metric. Optional.
  std::function<void()> on_rejected = nullptr;
};

// Checks bearer tokens with TokenReview and access with SubjectAccessReview
// (user, groups, uid and extra copied from the TokenReview). Both answers,
// positive and negative, are cached for cache_ttl, keyed by a SHA-256 of the
// token (the token itself is not kept); failed API calls are not cached.
class TokenReviewAuthenticator final : public Authenticator {
 public:
  TokenReviewAuthenticator(client::KubeApi& api, Clock& clock,
                           TokenReviewAuthenticatorOptions options);
  ~TokenReviewAuthenticator() override;

  StatusOr<pool::Caller> authenticate(std::optional<std::string_view> authorization,
                                      std::string_view client) override;
  Status authorize(const pool::Caller& caller, std::string_view verb,
                   std::string_view driver) override;
  Status authorizePath(const pool::Caller& caller, std::string_view verb,
                       std::string_view path) override;
  std::optional<StatusOr<pool::Caller>> authenticateCached(
      std::optional<std::string_view> authorization) override;
  std::optional<Status> authorizeCached(const pool::Caller& caller, std::string_view verb,
                                        std::string_view driver) override;

  // The number of cached answers (tokens plus access decisions).
  size_t cacheSizeForTest() const;

 private:
  template <typename V>
  class Cache;
  class ClientLimits;

  // Takes one review from the budget of `client` (empty: none) and the
  // global one; the refusal when either is spent.
  Status takeReview(std::string_view client);
  // Sends `review` (its user filled in here) unless `key` is cached, and
  // caches the answer; a refusal says `denied`.
  Status decide(const pool::Caller& caller, const std::string& key,
                client::SubjectAccessReview review, const std::string& denied);

  client::KubeApi& api_;
  Clock& clock_;
  const TokenReviewAuthenticatorOptions options_;
  std::unique_ptr<Cache<StatusOr<pool::Caller>>> tokens_;
  std::unique_ptr<Cache<Status>> decisions_;
  std::unique_ptr<ClientLimits> clients_;
  client::TokenBucket reviews_;
  log::Throttle throttle_;
};

}  // namespace rsc::controller::inventory
