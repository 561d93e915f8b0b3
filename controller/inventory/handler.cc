#include "controller/inventory/handler.h"

#include <algorithm>
#include <any>
#include <map>
#include <set>
#include <variant>

#include "client/http_status.h"
#include "client/names.h"
#include "common/duration.h"
#include "common/strings.h"
#include "controller/inventory/openapi.h"
#include "controller/pool/node_restriction.h"
#include "controller/pool/pool_json.h"

namespace rsc::controller::inventory {

using http::Admission;
using http::asciiLower;
using http::HttpRequest;
using http::HttpResponse;
using http::parseQuery;
using http::percentDecode;
using http::splitTarget;

using client::driverNameError;
using client::poolNameError;
using pool::Json;

namespace {

constexpr std::string_view kJson = "application/json";

enum RouteIndex : size_t { kOpenApi, kDrivers, kDriver, kPoolRoute, kRenew };

std::vector<std::string_view> splitPath(std::string_view path) {
  if (path.empty() || path.front() != '/') return {};
  return split(path.substr(1), '/');
}

// Matches `segments` against a template. Returns false when it does not
// match; sets *malformed when it matches but a parameter has a bad escape.
bool matchRoute(std::string_view path_template, const std::vector<std::string_view>& segments,
                std::map<std::string, std::string>* params, bool* malformed) {
  const std::vector<std::string_view> parts = splitPath(path_template);
  if (parts.size() != segments.size()) return false;
  std::map<std::string, std::string> found;
  bool bad_escape = false;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string_view part = parts[i];
    if (part.size() > 2 && part.front() == '{' && part.back() == '}') {
      if (segments[i].empty()) return false;
      std::optional<std::string> value = percentDecode(segments[i]);
      if (!value) {
        bad_escape = true;
      } else {
        found[std::string(part.substr(1, part.size() - 2))] = std::move(*value);
      }
    } else if (part != segments[i]) {
      return false;
    }
  }
  *params = std::move(found);
  *malformed = bad_escape;
  return true;
}

HttpResponse jsonResponse(int code, const Json& body) {
  HttpResponse response;
  response.status = code;
  response.content_type = std::string(kJson);
  response.body = pool::dumpJson(body);
  return response;
}

bool isJsonContentType(std::optional<std::string_view> header) {
  if (!header) return false;
  std::string_view media = header->substr(0, header->find(';'));
  while (!media.empty() && (media.front() == ' ' || media.front() == '\t')) media.remove_prefix(1);
  while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
  return asciiLower(media) == kJson;
}

bool isWrite(const std::string& method) { return method != "GET"; }

// The node restriction of a PUT of one pool, for the pool as pushed and the
// pool it replaces (null when new): the 403 answer, or nullopt. `existing`
// may be `pushed` itself (a body recognised by its digest).
std::optional<Status> poolPushRefusal(const pool::Caller& caller, const reconcile::Pool& pushed,
                                      const reconcile::Pool* existing, bool allow_unbound) {
  std::vector<FieldError> denied;
  const std::optional<FieldError> pushed_why = pool::nodeRestriction(caller, pushed, allow_unbound);
  if (pushed_why) denied.push_back(*pushed_why);
  if (existing != nullptr) {
    const std::optional<FieldError> existing_why =
        existing == &pushed ? pushed_why : pool::nodeRestriction(caller, *existing, allow_unbound);
    if (existing_why) denied.push_back({"", "the pool exists and " + existing_why->message});
  }
  if (denied.empty()) return std::nullopt;
  return Status(StatusCode::kPermissionDenied, denied.front().message, denied);
}

using client::keyPath;

}  // namespace

// What admission found out from a request's headers; carried to handle() in
// HttpRequest::admission.
struct InventoryHandler::Admitted {
  size_t route = 0;
  std::string driver;
  std::string pool;
  std::optional<Clock::Duration> wait;
  pool::Caller caller;
  bool dry_run = false;
};

struct InventoryHandler::Context {
  const HttpRequest& request;
  std::string driver;
  std::string pool;
  std::optional<Clock::Duration> wait;
  pool::Caller caller;
  // ?dryRun=All: validate, authorize and plan; change nothing.
  bool dry_run = false;
  std::optional<PendingWait> pending;

  reconcile::PoolKey key() const { return {driver, pool}; }
};

StatusOr<std::unique_ptr<InventoryHandler>> InventoryHandler::create(
    InventoryHandlerOptions options) {
  if (options.store == nullptr) return invalidArgument("inventory handler: store is required");
  if (options.authenticator == nullptr) {
    return invalidArgument("inventory handler: authenticator is required");
  }
  if (options.clock == nullptr) return invalidArgument("inventory handler: clock is required");
  if (options.max_wait < Clock::Duration::zero()) {
    return invalidArgument("inventory handler: max_wait must not be negative");
  }
  return std::unique_ptr<InventoryHandler>(new InventoryHandler(std::move(options)));
}

InventoryHandler::InventoryHandler(InventoryHandlerOptions options)
    : options_(std::move(options)),
      own_decode_budget_(options_.decode_budget != nullptr
                             ? nullptr
                             : std::make_unique<pool::DecodeBudget>(
                                   pool::DecodeBudgetOptions{.clock = options_.clock})),
      decode_budget_(options_.decode_budget != nullptr ? options_.decode_budget
                                                       : own_decode_budget_.get()),
      refusal_log_(*options_.clock) {}

const std::vector<Route>& InventoryHandler::routes() {
  // Indexed by RouteIndex.
  static const std::vector<Route> table = {
      {"/openapi.json", {"GET"}},
      {"/v1/drivers", {"GET"}},
      {"/v1/drivers/{driver}", {"GET", "PUT"}},
      {"/v1/drivers/{driver}/pools/{pool}", {"GET", "PUT", "DELETE"}},
      {"/v1/drivers/{driver}/pools/{pool}/renew", {"POST"}},
  };
  return table;
}

void InventoryHandler::setLeaderHooks(LeaderHooks hooks) {
  std::lock_guard lock(hooks_mu_);
  hooks_ = std::move(hooks);
}

LeaderHooks InventoryHandler::hooks() const {
  std::lock_guard lock(hooks_mu_);
  return hooks_;
}

std::string InventoryHandler::leaderIdentity() const {
  std::function<std::string()> identity;
  {
    std::lock_guard lock(hooks_mu_);
    identity = hooks_.leader_identity;
  }
  return identity ? identity() : std::string();
}

Admission InventoryHandler::admit(const HttpRequest& head) {
  PushInfo push;
  return admission(admitRequest(head, push, /*may_block=*/true), head, push);
}

std::optional<Admission> InventoryHandler::admitNow(const HttpRequest& head) {
  PushInfo push;
  Decision decided = admitRequest(head, push, /*may_block=*/false);
  if (std::holds_alternative<WouldBlock>(decided)) return std::nullopt;
  return admission(std::move(decided), head, push);
}

Admission InventoryHandler::admission(Decision decided, const HttpRequest& head,
                                      const PushInfo& push) {
  Admission admission;
  if (HttpResponse* refusal = std::get_if<HttpResponse>(&decided)) {
    countPush(push, *refusal);
    admission.refusal = std::move(*refusal);
    return admission;
  }
  const Admitted& a = std::get<Admitted>(decided);
  // Only the two PUTs carry a pool; anything else needs no body.
  const bool has_body = head.method == "PUT" && (a.route == kDriver || a.route == kPoolRoute);
  admission.max_body_bytes = has_body ? options_.max_body_bytes : kMaxBodylessBytes;
  admission.state = std::move(std::get<Admitted>(decided));
  return admission;
}

HandlerResult InventoryHandler::handle(const HttpRequest& request) {
  PushInfo push;
  HandlerResult result;
  if (const auto* admitted = std::any_cast<Admitted>(&request.admission)) {
    if (isWrite(request.method) && admitted->route != kDrivers && !admitted->dry_run) {
      push.driver = admitted->driver;
      push.authorized = true;
    }
    result = serve(request, *admitted, push);
  } else {
    // Not admitted by the server (a direct call): admit here.
    Decision decided = admitRequest(request, push, /*may_block=*/true);
    if (HttpResponse* refusal = std::get_if<HttpResponse>(&decided)) {
      result.response = std::move(*refusal);
    } else {
      result = serve(request, std::get<Admitted>(decided), push);
    }
  }
  // A held push is counted when it is answered.
  if (!result.wait) countPush(push, result.response);
  return result;
}

std::optional<HandlerResult> InventoryHandler::handleNow(const HttpRequest& request) {
  const auto* admitted = std::any_cast<Admitted>(&request.admission);
  if (admitted == nullptr || admitted->route != kPoolRoute || request.method != "PUT" ||
      admitted->dry_run || request.body.size() > kMaxBodyDigestedNow) {
    return std::nullopt;
  }
  // A follower forwards, which blocks.
  const LeaderHooks leader = hooks();
  if (leader.is_leader && !leader.is_leader()) return std::nullopt;
  Context ctx{request, admitted->driver, admitted->pool, admitted->wait, admitted->caller,
              false,   std::nullopt};
  const std::optional<Digest128> digest = poolBodyDigest(ctx);
  if (!digest) return std::nullopt;
  std::optional<HttpResponse> response = putUnchangedPool(ctx, *digest, /*may_block=*/false);
  if (!response) return std::nullopt;
  HandlerResult result{std::move(*response), std::move(ctx.pending)};
  if (!result.wait) countPush({.driver = admitted->driver, .authorized = true}, result.response);
  return result;
}

void InventoryHandler::countPush(const PushInfo& push, const HttpResponse& response) {
  // Every answered push is counted, refused ones too (their ratio is what
  // alerts watch); a forwarded one is counted by the leader. One refused
  // before its caller was authorized is counted without a driver name.
  if (push.driver && !push.forwarded && options_.on_push) {
    options_.on_push(push.authorized ? std::string_view(*push.driver) : std::string_view(),
                     response.status);
  }
}

InventoryHandler::Decision InventoryHandler::admitRequest(const HttpRequest& request,
                                                          PushInfo& push, bool may_block) {
  // Route.
  const auto [path, query] = splitTarget(request.target);
  const std::vector<std::string_view> segments = splitPath(path);
  const std::vector<Route>& table = routes();
  std::map<std::string, std::string> params;
  bool malformed_param = false;
  size_t route = table.size();
  for (size_t i = 0; i < table.size(); ++i) {
    if (matchRoute(table[i].path, segments, &params, &malformed_param)) {
      route = i;
      break;
    }
  }
  if (route == table.size()) {
    return {errorResponse(404, "no such path: " + std::string(path) +
                                   " (see GET /openapi.json; '/' in a pool name is sent as %2F)")};
  }
  const std::vector<std::string_view>& methods = table[route].methods;
  if (std::find(methods.begin(), methods.end(), request.method) == methods.end()) {
    std::string allow;
    for (std::string_view m : methods) allow += (allow.empty() ? "" : ", ") + std::string(m);
    HttpResponse response =
        errorResponse(405, "method " + request.method + " is not allowed on " +
                               std::string(table[route].path) + "; allowed: " + allow);
    response.headers.emplace_back("Allow", allow);
    return {std::move(response)};
  }
  if (isWrite(request.method) && params.contains("driver")) push.driver = params["driver"];
  if (malformed_param) return {errorResponse(400, "malformed %-escape in the path")};

  // Query.
  Admitted ctx{route, params["driver"], params["pool"], std::nullopt, {}, false};
  const std::optional<std::vector<std::pair<std::string, std::string>>> query_params =
      parseQuery(query);
  if (!query_params) return {errorResponse(400, "malformed %-escape in the query")};
  for (const auto& [name, value] : *query_params) {
    if (name == "wait" && isWrite(request.method)) {
      StatusOr<Clock::Duration> wait = parseWaitDuration(value);
      if (!wait.ok()) {
        return {errorResponse(400, "wait: " + wait.status().message(),
                              {{"wait", wait.status().message()}})};
      }
      ctx.wait = std::min(*wait, options_.max_wait);
    } else if (name == "dryRun" && isWrite(request.method)) {
      // As the API server: "All" is the only stage there is.
      if (value != "All") {
        return {errorResponse(400, "dryRun: must be All, not " + inQuotes(value),
                              {{"dryRun", "must be All"}})};
      }
      ctx.dry_run = true;
    } else {
      return {errorResponse(400,
                            "unknown query parameter " + inQuotes(name) +
                                (isWrite(request.method) ? "; only wait and dryRun are supported"
                                                         : "; none is supported here"),
                            {{name, "unknown query parameter"}})};
    }
  }

  // A dry run is not a push: the push counters leave it out.
  if (ctx.dry_run) push.driver.reset();

  // The OpenAPI document is public.
  if (route == kOpenApi) return ctx;

  // Authentication, from the headers alone: nothing of the body is read for
  // a caller without valid credentials.
  const std::optional<std::string_view> authorization = request.header("authorization");
  std::optional<StatusOr<pool::Caller>> caller =
      may_block ? options_.authenticator->authenticate(authorization, request.client_address)
                : options_.authenticator->authenticateCached(authorization);
  if (!caller) return WouldBlock{};
  if (!caller->ok()) return {errorResponse(caller->status())};
  ctx.caller = std::move(**caller);

  // Names from the path.
  std::vector<FieldError> name_errors;
  if (route != kDrivers) {
    if (const Status e = driverNameError(ctx.driver); !e.ok()) {
      name_errors.push_back({"driver", e.message()});
    }
  }
  if (route == kPoolRoute || route == kRenew) {
    if (const Status e = poolNameError(ctx.pool); !e.ok())
      name_errors.push_back({"pool", e.message()});
  }
  if (!name_errors.empty()) {
    return {errorResponse(
        Status(StatusCode::kUnprocessable,
               name_errors.front().field + " name in the path: " + name_errors.front().message,
               name_errors))};
  }

  // Authorization.
  const std::string_view verb =
      isWrite(request.method) ? kVerbPublish : (route == kDrivers ? kVerbList : kVerbGet);
  std::optional<Status> allowed =
      may_block ? options_.authenticator->authorize(ctx.caller, verb, ctx.driver)
                : options_.authenticator->authorizeCached(ctx.caller, verb, ctx.driver);
  if (!allowed) return WouldBlock{};
  if (!allowed->ok()) return {errorResponse(*allowed)};
  push.authorized = true;

  // One source of truth per driver: a pulled driver's pools come from its endpoint alone.
  if (isWrite(request.method) && options_.is_pulled && options_.is_pulled(ctx.driver)) {
    const std::string why = "driver " + inQuotes(ctx.driver) +
                            " is pulled from its inventory endpoint (--inventory-source); the "
                            "controller takes no pushes for it";
    return {errorResponse(Status(StatusCode::kConflict, why, {{"driver", why}}))};
  }
  return ctx;
}

HandlerResult InventoryHandler::serve(const HttpRequest& request, const Admitted& admitted,
                                      PushInfo& push) {
  if (admitted.route == kOpenApi) {
    HttpResponse response;
    response.content_type = std::string(kJson);
    response.body = std::string(openApiDocument());
    return {std::move(response)};
  }

  // Leadership: only the leader's store is reconciled. The caller was
  // authenticated here already; the leader checks it again (from its cache).
  const LeaderHooks leader = hooks();
  if (leader.is_leader && !leader.is_leader()) {
    if (leader.forward) {
      if (std::optional<HttpResponse> forwarded = leader.forward(request)) {
        push.forwarded = true;  // the leader counts it
        return {std::move(*forwarded)};
      }
    }
    // The forwarder may have found this replica leading: it took the lease
    // of a leader that went away.
    if (!leader.is_leader()) {
      HttpResponse response = errorResponse(
          503, "this replica is not the leader and cannot forward the request; retry");
      response.headers.emplace_back("Retry-After", "1");
      return {std::move(response)};
    }
  }

  Context ctx{request,         admitted.driver,  admitted.pool, admitted.wait,
              admitted.caller, admitted.dry_run, std::nullopt};
  HttpResponse response = dispatch(ctx, admitted.route, request.method);
  return {std::move(response), std::move(ctx.pending)};
}

HttpResponse InventoryHandler::dispatch(Context& ctx, size_t route, const std::string& method) {
  switch (route) {
    case kDrivers:
      return listDrivers(ctx);
    case kDriver:
      if (method == "GET") return getDriver(ctx);
      if (method == "PUT") return putDriver(ctx);
      break;
    case kPoolRoute:
      if (method == "GET") return getPool(ctx);
      if (method == "PUT") return putPool(ctx);
      if (method == "DELETE") return deletePool(ctx);
      break;
    case kRenew:
      return renewPool(ctx);
    default:
      break;
  }
  // A route in the table without an implementation: a programmer error that
  // the OpenAPI test catches.
  return errorResponse(
      internalError("no implementation for " + method + " " + std::string(routes()[route].path)));
}

HttpResponse InventoryHandler::getPool(Context& ctx) {
  const std::optional<reconcile::PoolStatus> status = options_.store->status(ctx.key());
  if (!status) {
    return errorResponse(notFound("pool " + inQuotes(ctx.pool) + " of driver " +
                                  inQuotes(ctx.driver) + " is not known"));
  }
  return jsonResponse(
      200, pool::poolStatusToJson(*status, options_.store->get(ctx.key()), leaderIdentity()));
}

std::optional<Digest128> InventoryHandler::poolBodyDigest(const Context& ctx) const {
  if (!isJsonContentType(ctx.request.header("content-type"))) return std::nullopt;
  return digester_.digest(ctx.request.body);
}

HttpResponse InventoryHandler::putPool(Context& ctx) {
  const std::optional<Digest128> body_digest = poolBodyDigest(ctx);
  if (!body_digest) return errorResponse(415, "Content-Type must be application/json");
  // The body that set the pool's current content, again (a driver renewing
  // its lease by pushing): that content is taken without decoding. A dry run
  // renews nothing and is planned in full.
  if (!ctx.dry_run) {
    if (std::optional<HttpResponse> answer =
            putUnchangedPool(ctx, *body_digest, /*may_block=*/true)) {
      return std::move(*answer);
    }
    if (options_.on_pool_body) options_.on_pool_body(ctx.driver, /*unchanged=*/false);
  }

  // Decode and validate; nothing is written until every check passed.
  StatusOr<pool::BudgetedJson> body = parseBody(ctx);
  if (!body.ok()) return errorResponse(body.status());
  pool::BodyProblems problems;
  reconcile::Pool pool = pool::decodePool(body->json, "", problems, ctx.driver);
  body->json = Json();  // the tree is not needed past here
  if (!problems.malformed.empty()) return errorResponse(pool::problemsStatus(problems));
  const std::optional<reconcile::ServerRelease> server = options_.store->serverRelease();
  if (server && problems.empty()) pool::validateCounterPlacement(pool, "", *server, problems);

  uint64_t version = 0;
  {
    std::unique_lock lock(write_mu_);
    // Node restriction, for the pool as pushed and the pool it replaces.
    const std::shared_ptr<const reconcile::DesiredPool> existing = options_.store->get(ctx.key());
    if (std::optional<Status> refused =
            poolPushRefusal(ctx.caller, pool, existing ? &existing->pool : nullptr,
                            options_.allow_unbound_node_pools)) {
      return errorResponse(*refused);
    }
    if (!problems.invalid.empty()) return errorResponse(pool::problemsStatus(problems));
    if (ctx.dry_run) {
      // Planning may read from the API server: not under the lock.
      lock.unlock();
      return answerDryRun(ctx, {{ctx.pool, &pool}});
    }
    version = options_.store->put(ctx.key(), std::move(pool), body_digest);
  }
  return answerPoolPush(ctx, version);
}

std::optional<HttpResponse> InventoryHandler::putUnchangedPool(Context& ctx,
                                                               const Digest128& body_digest,
                                                               bool may_block) {
  uint64_t version = 0;
  std::optional<Status> refused;
  {
    // Without blocking, a write under way (a whole driver's, say) sends the
    // request to a worker instead of making the I/O thread wait for it.
    std::unique_lock lock(write_mu_, std::defer_lock);
    if (may_block) {
      lock.lock();
    } else if (!lock.try_lock()) {
      return std::nullopt;
    }
    const std::shared_ptr<const reconcile::DesiredPool> existing =
        options_.store->getByBodyDigest(ctx.key(), body_digest);
    if (!existing) return std::nullopt;
    // The same bytes decode to the same content, which passed validation
    // when it was put. The pool as pushed is the pool that exists, so the
    // node restriction answers as for a decoded body.
    refused = poolPushRefusal(ctx.caller, existing->pool, &existing->pool,
                              options_.allow_unbound_node_pools);
    if (!refused) {
      // Withdrawn or changed since the look-up (a lease that ran out): decode.
      if (!options_.store->repeatPush(ctx.key(), existing->version)) return std::nullopt;
      version = existing->version;
    }
  }
  if (options_.on_pool_body) options_.on_pool_body(ctx.driver, /*unchanged=*/true);
  if (refused) return errorResponse(*refused);
  return answerPoolPush(ctx, version);
}

StatusOr<pool::BudgetedJson> InventoryHandler::parseBody(const Context& ctx) {
  StatusOr<pool::BudgetedJson> body = pool::parseJsonBodyWithin(
      decode_budget_, ctx.request.body, options_.max_decoded_bytes, options_.decode_wait);
  if (!body.ok() && body.status().reason() == pool::kReasonBusy) {
    if (options_.on_decode_refused) options_.on_decode_refused();
    if (std::optional<uint64_t> held = refusal_log_.allow(pool::kReasonBusy)) {
      log::warning("Refused a request",
                   {{"server", "inventory"},
                    {"reason", "inflight_decoded"},
                    {"driver", ctx.driver},
                    {"bodyBytes", static_cast<int64_t>(ctx.request.body.size())},
                    {"alsoRefusedSinceLastLine", static_cast<int64_t>(*held)}});
    }
  }
  return body;
}

HttpResponse InventoryHandler::deletePool(Context& ctx) {
  {
    std::lock_guard lock(write_mu_);
    if (auto existing = options_.store->get(ctx.key())) {
      if (auto why = pool::nodeRestriction(ctx.caller, existing->pool,
                                           options_.allow_unbound_node_pools)) {
        return errorResponse(
            Status(StatusCode::kPermissionDenied, why->message, {{"", why->message}}));
      }
      if (!ctx.dry_run) options_.store->remove(ctx.key());
    } else {
      // A repeated DELETE of a pool still being withdrawn is accepted again.
      const std::optional<reconcile::PoolStatus> status = options_.store->status(ctx.key());
      if (!status || status->phase != reconcile::PoolPhase::kWithdrawing) {
        return errorResponse(notFound("pool " + inQuotes(ctx.pool) + " of driver " +
                                      inQuotes(ctx.driver) + " is not known"));
      }
    }
  }
  if (ctx.dry_run) return answerDryRun(ctx, {{ctx.pool, nullptr}});
  PendingWait wait;
  wait.kind = PendingWait::Kind::kWithdrawal;
  wait.driver = ctx.driver;
  wait.withdrawn = {ctx.pool};
  return answerPush(ctx, std::move(wait));
}

HttpResponse InventoryHandler::renewPool(Context& ctx) {
  uint64_t version = 0;
  {
    std::unique_lock lock(write_mu_);
    const std::shared_ptr<const reconcile::DesiredPool> existing = options_.store->get(ctx.key());
    if (!existing) {
      return errorResponse(notFound("pool " + inQuotes(ctx.pool) + " of driver " +
                                    inQuotes(ctx.driver) + " is not known; push it with PUT"));
    }
    if (auto why =
            pool::nodeRestriction(ctx.caller, existing->pool, options_.allow_unbound_node_pools)) {
      return errorResponse(
          Status(StatusCode::kPermissionDenied, why->message, {{"", why->message}}));
    }
    if (ctx.dry_run) {
      // Renewing writes nothing: the answer is what the pool's own
      // reconcile would write now (nothing, once it is published).
      lock.unlock();
      return answerDryRun(ctx, {{ctx.pool, &existing->pool}});
    }
    options_.store->renew(ctx.key());
    version = existing->version;
  }
  return answerPoolPush(ctx, version);
}

HttpResponse InventoryHandler::putDriver(Context& ctx) {
  if (!isJsonContentType(ctx.request.header("content-type"))) {
    return errorResponse(415, "Content-Type must be application/json");
  }
  StatusOr<pool::BudgetedJson> body = parseBody(ctx);
  if (!body.ok()) return errorResponse(body.status());
  pool::BodyProblems problems;
  std::map<std::string, reconcile::Pool> pools = pool::decodeDriverInventory(
      body->json, options_.store->serverRelease(), problems, ctx.driver);
  body->json = Json();  // the tree is not needed past here
  if (!problems.malformed.empty()) return errorResponse(pool::problemsStatus(problems));

  std::map<std::string, uint64_t> versions;
  std::vector<std::string> withdrawn;
  {
    std::unique_lock lock(write_mu_);
    // Node restriction for every pool pushed, replaced or withdrawn.
    std::vector<FieldError> denied;
    const bool unbound = options_.allow_unbound_node_pools;
    pool::deniedPools(ctx.caller, pools, unbound, denied);
    for (const reconcile::PoolKey& key : options_.store->keys(ctx.driver)) {
      const std::shared_ptr<const reconcile::DesiredPool> existing = options_.store->get(key);
      const bool kept = pools.contains(key.pool);
      if (!kept) withdrawn.push_back(key.pool);
      if (!existing) continue;
      if (auto why = pool::nodeRestriction(ctx.caller, existing->pool, unbound)) {
        denied.push_back({keyPath("pools", key.pool), (kept ? "the pool exists and "
                                                            : "leaving the pool out withdraws it, "
                                                              "but ") +
                                                          why->message});
      }
    }
    if (!denied.empty()) return errorResponse(pool::poolsNotAllowed(std::move(denied)));
    if (!problems.invalid.empty()) return errorResponse(pool::problemsStatus(problems));
    if (ctx.dry_run) {
      lock.unlock();
      std::vector<std::pair<std::string, const reconcile::Pool*>> previewed;
      previewed.reserve(pools.size() + withdrawn.size());
      for (const auto& [name, pool] : pools) previewed.emplace_back(name, &pool);
      for (const std::string& name : withdrawn) previewed.emplace_back(name, nullptr);
      return answerDryRun(ctx, previewed);
    }
    versions = options_.store->replaceDriver(ctx.driver, std::move(pools));
  }
  PendingWait wait;
  wait.kind = PendingWait::Kind::kDriver;
  wait.driver = ctx.driver;
  wait.published.assign(versions.begin(), versions.end());
  wait.withdrawn = std::move(withdrawn);
  return answerPush(ctx, std::move(wait));
}

HttpResponse InventoryHandler::getDriver(Context& ctx) {
  Json pools = Json::array();
  const std::string leader = leaderIdentity();
  for (const reconcile::PoolStatus& status : options_.store->statuses(ctx.driver)) {
    pools.push_back(pool::poolStatusToJson(status, options_.store->get(status.key), leader));
  }
  return jsonResponse(200, {{"driver", ctx.driver}, {"pools", std::move(pools)}});
}

HttpResponse InventoryHandler::listDrivers(Context&) {
  const std::string leader = leaderIdentity();
  std::map<std::string, Json> by_driver;
  for (const reconcile::PoolStatus& status : options_.store->statuses()) {
    Json& pools = by_driver.try_emplace(status.key.driver, Json::array()).first->second;
    pools.push_back(pool::poolStatusToJson(status, options_.store->get(status.key), leader));
  }
  Json drivers = Json::array();
  for (auto& [driver, pools] : by_driver) {
    drivers.push_back({{"driver", driver}, {"pools", std::move(pools)}});
  }
  return jsonResponse(200, {{"drivers", std::move(drivers)}});
}

HttpResponse InventoryHandler::answerDryRun(
    const Context& ctx, const std::vector<std::pair<std::string, const reconcile::Pool*>>& pools) {
  if (options_.previewer == nullptr) {
    return errorResponse(501, "dry runs are not available in this configuration");
  }
  client::DryRunResultJson result;
  result.driver = ctx.driver;
  for (const auto& [name, pool] : pools) {
    StatusOr<reconcile::PoolPreview> preview =
        options_.previewer->preview({ctx.driver, name}, pool);
    if (!preview.ok()) return errorResponse(preview.status());
    result.pools.push_back(pool::poolPreviewWire(*preview));
  }
  return jsonResponse(200, client::toJson(result));
}

HttpResponse InventoryHandler::answerPoolPush(Context& ctx, uint64_t version) {
  PendingWait wait;
  wait.kind = PendingWait::Kind::kPool;
  wait.driver = ctx.driver;
  wait.published = {{ctx.pool, version}};
  return answerPush(ctx, std::move(wait));
}

HttpResponse InventoryHandler::answerPush(Context& ctx, PendingWait wait) {
  const bool is_done = done(wait);
  if (is_done || !ctx.wait || *ctx.wait <= Clock::Duration::zero()) {
    return renderNow(wait, is_done);
  }
  wait.deadline = options_.clock->now() + *ctx.wait;
  HttpResponse provisional = renderNow(wait, false);
  ctx.pending = std::move(wait);
  return provisional;
}

bool InventoryHandler::done(const PendingWait& wait) const {
  for (const auto& [pool, version] : wait.published) {
    const std::optional<reconcile::PoolStatus> status = options_.store->status({wait.driver, pool});
    // No status: the pool was withdrawn since; there is nothing to wait for.
    // A version the API server refused is as final as a published one, and
    // so is a hold (it lasts until the next push or renewal).
    if (status && status->published_version < version && status->rejected_version < version &&
        status->phase != reconcile::PoolPhase::kHeld) {
      return false;
    }
  }
  for (const std::string& pool : wait.withdrawn) {
    const std::optional<reconcile::PoolStatus> status = options_.store->status({wait.driver, pool});
    if (status && status->phase == reconcile::PoolPhase::kWithdrawing) return false;
  }
  return true;
}

HttpResponse InventoryHandler::render(const PendingWait& wait) {
  HttpResponse response = renderNow(wait, done(wait));
  if (options_.on_push) options_.on_push(wait.driver, response.status);
  return response;
}

HttpResponse InventoryHandler::renderNow(const PendingWait& wait, bool is_done) {
  const std::string leader = leaderIdentity();
  const auto pool_json = [&](const std::string& pool) {
    const reconcile::PoolKey key{wait.driver, pool};
    if (std::optional<reconcile::PoolStatus> status = options_.store->status(key)) {
      return pool::poolStatusToJson(*status, options_.store->get(key), leader);
    }
    reconcile::PoolStatus gone;
    gone.key = key;
    return pool::poolStatusToJson(gone, nullptr, leader, "Withdrawn");
  };
  if (is_done) {
    // Pools whose waited-for version the API server refused: the push ends
    // as a 422 naming them, with the server's message.
    std::vector<FieldError> refused;
    for (const auto& [pool, version] : wait.published) {
      const std::optional<reconcile::PoolStatus> status =
          options_.store->status({wait.driver, pool});
      if (status && status->published_version < version && status->rejected_version >= version) {
        refused.push_back({"pools[" + pool + "]", status->last_error.message()});
      }
    }
    if (!refused.empty()) {
      std::string message =
          "the API server refused the slices of " +
          (refused.size() == 1 ? "pool " + inQuotes(wait.published.front().first)
                               : std::to_string(refused.size()) + " pools") +
          "; what was published before stays, and the pool is not retried until it changes: " +
          refused.front().message;
      return errorResponse(422, message, refused);
    }
  }
  const int code = is_done ? 200 : 202;
  switch (wait.kind) {
    case PendingWait::Kind::kPool:
      return jsonResponse(code, pool_json(wait.published.front().first));
    case PendingWait::Kind::kWithdrawal:
      return jsonResponse(code, pool_json(wait.withdrawn.front()));
    case PendingWait::Kind::kDriver: {
      std::set<std::string> names;
      for (const auto& [pool, version] : wait.published) names.insert(pool);
      names.insert(wait.withdrawn.begin(), wait.withdrawn.end());
      Json pools = Json::array();
      for (const std::string& pool : names) pools.push_back(pool_json(pool));
      return jsonResponse(code, {{"driver", wait.driver}, {"pools", std::move(pools)}});
    }
  }
  return errorResponse(internalError("unknown wait kind"));
}

StatusOr<Clock::Duration> parseWaitDuration(std::string_view text) {
  return parseDuration(text, std::chrono::minutes(1));
}

HttpResponse errorResponse(const Status& status) {
  const int code = client::httpCodeForStatus(status.code());
  HttpResponse response = jsonResponse(code, pool::errorToJson(code, client::kubeStatusReason(code),
                                                               status.message(), status.details()));
  if (code == 401) {
    response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"resourceslice-controller\"");
  }
  if (code == 503 || code == 429) response.headers.emplace_back("Retry-After", "1");
  return response;
}

HttpResponse errorResponse(int http_code, std::string_view message,
                           const std::vector<FieldError>& details) {
  return jsonResponse(http_code, pool::errorToJson(http_code, client::kubeStatusReason(http_code),
                                                   message, details));
}

}  // namespace rsc::controller::inventory
