// InventoryHandler: the inventory API (DESIGN.md section 4) as a pure function from HttpRequest
// to HttpResponse over the DesiredStore, without sockets. A ?wait= push not yet published comes
// back as a PendingWait, which the caller (InventoryEndpoint) holds until done() or its deadline
// and then answers with render(). Every check runs before the store is touched. A pool body
// byte-identical to the one that set the pool's current content is answered without decoding it.
// Thread-safe: handle() runs on several threads; store writes are serialised by one mutex.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/http/http.h"
#include "controller/inventory/authenticator.h"
#include "controller/inventory/body_digest.h"
#include "controller/pool/decode_budget.h"
#include "controller/pool/pool_json.h"
#include "controller/reconcile/desired_store.h"
#include "controller/reconcile/preview.h"

namespace rsc::controller::inventory {

// The longest ?wait= honoured; longer values are cut to it. Long enough for a
// reconcile of a large pool, short enough for proxies' idle timeouts.
inline constexpr Clock::Duration kDefaultMaxWait = std::chrono::seconds(60);
using pool::kDefaultMaxBodyBytes;
// Every other request needs no body; a few bytes ("{}") are tolerated.
inline constexpr size_t kMaxBodylessBytes = 4096;

// One route of the API: a path template and the methods it serves. The table
// drives routing, the Allow header of 405 answers and the OpenAPI test.
struct Route {
  std::string_view path;  // "/v1/drivers/{driver}/pools/{pool}"
  std::vector<std::string_view> methods;
};

// What a held push waits for.
struct PendingWait {
  enum class Kind {
    kPool,        // PUT or renew of one pool: render a PoolStatus
    kWithdrawal,  // DELETE of one pool: render a PoolStatus ("Withdrawn" when gone)
    kDriver,      // PUT of a whole driver: render a DriverStatus
  };
  Kind kind = Kind::kPool;
  std::string driver;
  // Pools that must reach a published version, and the version.
  std::vector<std::pair<std::string, uint64_t>> published;
  // Pools being withdrawn.
  std::vector<std::string> withdrawn;
  Clock::TimePoint deadline;
};

struct HandlerResult {
  http::HttpResponse response;
  // Set when the request asked to wait and the push is not yet published:
  // hold `response`, answer render(*wait) once done(*wait) or at the deadline.
  std::optional<PendingWait> wait = std::nullopt;
};

// Leadership, filled in by leader election when the service runs replicas.
struct LeaderHooks {
  // Unset: this replica always leads.
  std::function<bool()> is_leader;
  // The identity of the leading replica, reported in every PoolStatus.
  std::function<std::string()> leader_identity;
  // Sends a request to the leader and returns its answer; nullopt when it
  // cannot (the handler then answers 503). Unset: never forwards. Called on a
  // handler thread; it may block up to the request's wait.
  std::function<std::optional<http::HttpResponse>(const http::HttpRequest&)> forward;
};

struct InventoryHandlerOptions {
  reconcile::DesiredStore* store = nullptr;  // required
  Authenticator* authenticator = nullptr;    // required
  Clock* clock = nullptr;                    // required
  Clock::Duration max_wait = kDefaultMaxWait;
  // Body limit of PUT pool and PUT driver (--max-request-bytes).
  size_t max_body_bytes = kDefaultMaxBodyBytes;
  // What a body may occupy once parsed (--max-decoded-bytes).
  size_t max_decoded_bytes = pool::kDefaultMaxDecodedBytes;
  // The budget every body being decoded at once shares with the others, pushes and pulls
  // (--max-inflight-decoded-bytes); main passes the one the fetchers use too. Unset: the handler
  // keeps one of the default size for itself. A PUT whose body finds no room within decode_wait
  // is answered 503 with Retry-After and counted by on_decode_refused.
  pool::DecodeBudget* decode_budget = nullptr;
  Clock::Duration decode_wait = pool::kDefaultDecodeWait;
  // Counts each body refused because the budget was full, for
  // resourceslice_controller_inventory_refusals_total{reason="inflight_decoded"}. Optional.
  std::function<void()> on_decode_refused = nullptr;
  // Lets a token bound to no node publish devices bound to a node
  // (--allow-unbound-node-pools); off: only that node's own token may.
  bool allow_unbound_node_pools = false;
  // Counts each answered push (PUT, DELETE, renew) by driver and HTTP code,
  // for resourceslice_controller_pushes_total. `driver` is "" for a push
  // refused before its caller was authenticated and authorized for the
  // driver: the name in its path is anyone's to choose. Optional.
  std::function<void(std::string_view driver, int code)> on_push = nullptr;
  // Counts each body of PUT /v1/drivers/{driver}/pools/{pool} that got past
  // the Content-Type check, by how it was taken: decoded in full, or
  // recognised as the body of the pool's current content (unchanged: no
  // decoding, validation or comparison), for
  // resourceslice_controller_push_bodies_total. Optional.
  std::function<void(std::string_view driver, bool unchanged)> on_pool_body = nullptr;
  // True for a driver whose inventory the controller pulls from its own endpoint (pull mode):
  // writes for it are refused with 409, so that each driver has one source of truth. Unset:
  // every driver pushes.
  std::function<bool(std::string_view driver)> is_pulled = nullptr;
  // Answers dry runs (?dryRun=All): what the writes of a push would be.
  // Unset: dry runs are answered 501. Dry runs change nothing and are not
  // counted by on_push or on_pool_body.
  reconcile::PoolPreviewer* previewer = nullptr;
};

class InventoryHandler {
 public:
  static StatusOr<std::unique_ptr<InventoryHandler>> create(InventoryHandlerOptions options);

  // The routes this handler serves, in the order of the OpenAPI document.
  static const std::vector<Route>& routes();

  // Replaces the leadership hooks; safe while requests run.
  void setLeaderHooks(LeaderHooks hooks);

  // Decides on a request from its headers alone (route, query,
  // authentication, authorization) and sets its body limit; for
  // HttpServerOptions::admit. May block on the Authenticator.
  http::Admission admit(const http::HttpRequest& head);

  // Answers one request: one that admit() let in (its decision in
  // request.admission), or any other, which is admitted first. May block on
  // the Authenticator (cached API calls) and the forward hook; never waits
  // for publication.
  HandlerResult handle(const http::HttpRequest& request);

  // The two calls above where they need no blocking call, for the HTTP
  // server's I/O thread; nullopt where they would block, and the caller
  // then makes the blocking call on a worker. admitNow() decides with cached
  // credentials. handleNow() answers only the cheapest frequent request, a
  // driver renewing its lease by pushing the body that set its pool's
  // current content (on the leader, admitted, at most kMaxBodyDigestedNow
  // bytes); its answer and counting equal handle()'s.
  std::optional<http::Admission> admitNow(const http::HttpRequest& head);
  std::optional<HandlerResult> handleNow(const http::HttpRequest& request);
  // The largest body handleNow() digests on the calling thread (about 0.1 ms
  // of CPU); larger ones wait for a worker.
  static constexpr size_t kMaxBodyDigestedNow = 1024 * 1024;

  // True when what `wait` waits for has happened.
  bool done(const PendingWait& wait) const;
  // The answer to a held push now: 200 when done, 422 when the API server
  // refused the slices of a waited-for pool, else 202.
  http::HttpResponse render(const PendingWait& wait);

 private:
  explicit InventoryHandler(InventoryHandlerOptions options);

  struct Admitted;
  struct Context;
  // Admission could not decide without a blocking call.
  struct WouldBlock {};
  // What the push counter needs to know about a request.
  struct PushInfo {
    std::optional<std::string> driver;  // set for writes to a driver's path
    // Set once the caller is authenticated and authorized for `driver`: only
    // then is the driver's name a metric label (a name from anyone else
    // could take the label slots of the real drivers).
    bool authorized = false;
    bool forwarded = false;
  };
  // Routing, query, authentication and authorization: a refusal, or what
  // serve() needs; with `may_block` false, WouldBlock where the
  // Authenticator would have to ask the API server.
  using Decision = std::variant<http::HttpResponse, Admitted, WouldBlock>;
  Decision admitRequest(const http::HttpRequest& request, PushInfo& push, bool may_block);
  http::Admission admission(Decision decided, const http::HttpRequest& head, const PushInfo& push);
  HandlerResult serve(const http::HttpRequest& request, const Admitted& admitted, PushInfo& push);
  void countPush(const PushInfo& push, const http::HttpResponse& response);
  http::HttpResponse dispatch(Context& ctx, size_t route, const std::string& method);
  http::HttpResponse getPool(Context& ctx);
  http::HttpResponse putPool(Context& ctx);
  // The digest of the request's body, when the request is a PUT of a pool
  // with a JSON body (putPool's other answers need no digest).
  std::optional<Digest128> poolBodyDigest(const Context& ctx) const;
  // Answers a PUT of a pool whose body has the digest of the body that set
  // the pool's current content, as putPool would; nullopt when it has not,
  // or, unless `may_block`, when another write holds the store.
  std::optional<http::HttpResponse> putUnchangedPool(Context& ctx, const Digest128& body_digest,
                                                     bool may_block);
  // The request's body parsed under the decode budget; a refusal is counted and logged.
  StatusOr<pool::BudgetedJson> parseBody(const Context& ctx);
  http::HttpResponse deletePool(Context& ctx);
  http::HttpResponse renewPool(Context& ctx);
  http::HttpResponse getDriver(Context& ctx);
  http::HttpResponse putDriver(Context& ctx);
  http::HttpResponse listDrivers(Context& ctx);
  // Answers a push: at once when done or not waiting, else held.
  http::HttpResponse answerPush(Context& ctx, PendingWait wait);
  // answerPush() of the request's one pool, accepted at `version`.
  http::HttpResponse answerPoolPush(Context& ctx, uint64_t version);
  http::HttpResponse renderNow(const PendingWait& wait, bool is_done);
  // The answer to a dry run of the driver's pools: each pool's preview with
  // its desired content (null: withdrawn).
  http::HttpResponse answerDryRun(
      const Context& ctx, const std::vector<std::pair<std::string, const reconcile::Pool*>>& pools);
  std::string leaderIdentity() const;
  LeaderHooks hooks() const;

  const InventoryHandlerOptions options_;
  // The budget of options_.decode_budget, or one of the handler's own.
  const std::unique_ptr<pool::DecodeBudget> own_decode_budget_;
  pool::DecodeBudget* const decode_budget_;
  log::Throttle refusal_log_;
  // Digests pushed bodies under a key random per process, so that no client
  // can make two different bodies collide on purpose.
  const BodyDigester digester_;
  mutable std::mutex hooks_mu_;
  LeaderHooks hooks_;  // guarded by hooks_mu_
  // Serialises check-then-write sequences on the store.
  std::mutex write_mu_;
};

// Parses a ?wait= value: a Go duration made of decimal numbers with the
// units ms, s and m ("10s", "1m30s", "1.5s", "0"). Negative or malformed
// values are InvalidArgument.
StatusOr<Clock::Duration> parseWaitDuration(std::string_view text);

// The answer for a Status error: {code, reason, message, details}, with the
// HTTP code its StatusCode maps to (400, 401, 403, 404, 409, 413, 422, 503,
// else 500).
http::HttpResponse errorResponse(const Status& status);
// An error answer with an explicit HTTP code (405, 415, ...).
http::HttpResponse errorResponse(int http_code, std::string_view message,
                                 const std::vector<FieldError>& details = {});

}  // namespace rsc::controller::inventory
