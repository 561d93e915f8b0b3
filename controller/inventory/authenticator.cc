#include "controller/inventory/authenticator.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "common/log.h"

namespace rsc::controller::inventory {

namespace {

// Returns the token of "Bearer <token>" (scheme in any case), or nullopt.
std::optional<std::string_view> bearerToken(std::string_view header) {
  constexpr std::string_view kScheme = "bearer";
  if (header.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = header[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return std::nullopt;
  }
  std::string_view rest = header.substr(kScheme.size());
  if (rest.front() != ' ') return std::nullopt;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  if (rest.empty() || rest.find(' ') != std::string_view::npos) return std::nullopt;
  return rest;
}

// Hex SHA-256 of `text`, so that cache keys do not hold credentials.
std::string sha256Hex(std::string_view text) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1) {
    // Cannot happen with a built-in digest; an empty key would merge every
    // token into one cache entry, so crash loudly instead.
    std::abort();
  }
  constexpr std::string_view kHex = "0123456789abcdef";
  std::string out;
  out.reserve(static_cast<size_t>(length) * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

// Appends `s` with its length, so that distinct tuples never make equal keys.
void appendField(std::string& key, std::string_view s) {
  key += std::to_string(s.size());
  key.push_back(':');
  key.append(s);
}

std::string decisionKey(const pool::Caller& caller, std::string_view verb,
                        std::string_view driver) {
  std::string key;
  appendField(key, verb);
  appendField(key, driver);
  appendField(key, caller.user.username);
  appendField(key, caller.user.uid);
  std::vector<std::string> groups = caller.user.groups;
  std::sort(groups.begin(), groups.end());
  key += std::to_string(groups.size()) + "g";
  for (const std::string& g : groups) appendField(key, g);
  key += std::to_string(caller.user.extra.size()) + "x";
  for (const auto& [name, values] : caller.user.extra) {
    appendField(key, name);
    key += std::to_string(values.size()) + "v";
    for (const std::string& v : values) appendField(key, v);
  }
  return key;
}

}  // namespace

// A bounded map from key to answer whose entries expire after a TTL. When
// full, expired entries go first, then the oldest. Thread-safe.
template <typename V>
class TokenReviewAuthenticator::Cache {
 public:
  Cache(Clock& clock, Clock::Duration ttl, size_t max_entries)
      : clock_(clock), ttl_(ttl), max_entries_(std::max<size_t>(max_entries, 1)) {}

  std::optional<V> get(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    if (clock_.now() >= it->second->expires) {
      order_.erase(it->second);
      index_.erase(it);
      return std::nullopt;
    }
    return it->second->value;
  }

  void put(const std::string& key, V value) {
    std::lock_guard lock(mu_);
    const Clock::TimePoint now = clock_.now();
    if (auto it = index_.find(key); it != index_.end()) {
      order_.erase(it->second);
      index_.erase(it);
    }
    if (index_.size() >= max_entries_) {
      // Entries are in insertion order and share one TTL, so the expired ones
      // are at the front; when none has expired, the oldest goes.
      do {
        index_.erase(order_.front().key);
        order_.pop_front();
      } while (!order_.empty() && order_.front().expires <= now);
    }
    order_.push_back({key, std::move(value), now + ttl_});
    index_[key] = std::prev(order_.end());
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return index_.size();
  }

 private:
  struct Entry {
    std::string key;
    V value;
    Clock::TimePoint expires;
  };

  Clock& clock_;
  const Clock::Duration ttl_;
  const size_t max_entries_;
  mutable std::mutex mu_;
  std::list<Entry> order_;  // oldest first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
};

// A token bucket per client address, for as many addresses as fit; the least
// recently seen address is forgotten first. Thread-safe.
class TokenReviewAuthenticator::ClientLimits {
 public:
  ClientLimits(Clock& clock, double qps, int burst, size_t max_clients)
      : clock_(clock), qps_(qps), burst_(burst), max_(std::max<size_t>(max_clients, 1)) {}

  // Takes one token of `client`'s bucket; false when it is empty.
  bool take(std::string_view client) {
    if (qps_ <= 0) return true;
    std::lock_guard lock(mu_);
    auto it = index_.find(std::string(client));
    if (it == index_.end()) {
      if (index_.size() >= max_) {
        index_.erase(order_.back().client);
        order_.pop_back();
      }
      order_.push_front(
          {std::string(client), std::make_unique<client::TokenBucket>(qps_, burst_, clock_)});
      it = index_.emplace(order_.front().client, order_.begin()).first;
    } else {
      order_.splice(order_.begin(), order_, it->second);
    }
    // Under the lock: an eviction by another caller would free the bucket.
    return it->second->bucket->tryAcquire();
  }

 private:
  struct Entry {
    std::string client;
    std::unique_ptr<client::TokenBucket> bucket;
  };
  Clock& clock_;
  const double qps_;
  const int burst_;
  const size_t max_;
  std::mutex mu_;
  std::list<Entry> order_;  // most recently seen first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

StatusOr<pool::Caller> NoAuthAuthenticator::authenticate(std::optional<std::string_view>,
                                                         std::string_view) {
  pool::Caller caller;
  caller.user.username = "system:anonymous";
  caller.unrestricted = true;
  return caller;
}

Status NoAuthAuthenticator::authorize(const pool::Caller&, std::string_view, std::string_view) {
  return okStatus();
}

Status NoAuthAuthenticator::authorizePath(const pool::Caller&, std::string_view, std::string_view) {
  return okStatus();
}

std::optional<StatusOr<pool::Caller>> NoAuthAuthenticator::authenticateCached(
    std::optional<std::string_view> authorization) {
  return authenticate(authorization, "");
}

std::optional<Status> NoAuthAuthenticator::authorizeCached(const pool::Caller& caller,
                                                           std::string_view verb,
                                                           std::string_view driver) {
  return authorize(caller, verb, driver);
}

TokenReviewAuthenticator::TokenReviewAuthenticator(client::KubeApi& api, Clock& clock,
                                                   TokenReviewAuthenticatorOptions options)
    : api_(api),
      clock_(clock),
      options_(std::move(options)),
      tokens_(std::make_unique<Cache<StatusOr<pool::Caller>>>(clock_, options_.cache_ttl,
                                                              options_.max_cache_entries)),
      decisions_(
          std::make_unique<Cache<Status>>(clock_, options_.cache_ttl, options_.max_cache_entries)),
      clients_(std::make_unique<ClientLimits>(clock_, options_.client_review_qps,
                                              options_.client_review_burst, options_.max_clients)),
      reviews_(options_.review_qps, options_.review_burst, clock_),
      throttle_(clock_) {}

TokenReviewAuthenticator::~TokenReviewAuthenticator() = default;

Status TokenReviewAuthenticator::takeReview(std::string_view client) {
  const auto refuse = [&](AuthRefusal refusal, Status status) {
    if (options_.on_refused) options_.on_refused(refusal);
    const std::string_view reason =
        refusal == AuthRefusal::kClientRate ? "client_rate" : "review_rate";
    if (std::optional<uint64_t> held = throttle_.allow(reason)) {
      log::warning("Refused to review a token: too many new tokens",
                   {{"reason", reason},
                    {"client", client},
                    {"alsoRefusedSinceLastLine", static_cast<int64_t>(*held)}});
    }
    return status;
  };
  if (!client.empty() && !clients_->take(client)) {
    return refuse(AuthRefusal::kClientRate,
                  Status(StatusCode::kResourceExhausted,
                         "too many new tokens from this client; retry later"));
  }
  if (!reviews_.tryAcquire()) {
    return refuse(AuthRefusal::kReviewRate,
                  unavailable("too many new tokens to check right now; retry"));
  }
  return okStatus();
}

std::optional<StatusOr<pool::Caller>> TokenReviewAuthenticator::authenticateCached(
    std::optional<std::string_view> authorization) {
  if (!authorization) {
    return Status(StatusCode::kUnauthenticated,
                  "missing credentials: send Authorization: Bearer <service account token>");
  }
  const std::optional<std::string_view> token = bearerToken(*authorization);
  if (!token) {
    return Status(StatusCode::kUnauthenticated,
                  "malformed Authorization header: expected Bearer <service account token>");
  }
  return tokens_->get(sha256Hex(*token));
}

StatusOr<pool::Caller> TokenReviewAuthenticator::authenticate(
    std::optional<std::string_view> authorization, std::string_view client) {
  if (std::optional<StatusOr<pool::Caller>> known = authenticateCached(authorization))
    return *known;
  // A well-formed bearer token that is not cached: authenticateCached
  // answered every other case.
  const std::optional<std::string_view> bearer =
      authorization ? bearerToken(*authorization) : std::nullopt;
  if (!bearer) return internalError("authenticateCached let a malformed header through");
  const std::string_view token = *bearer;
  const std::string key = sha256Hex(token);
  RETURN_IF_ERROR(takeReview(client));

  client::TokenReview review;
  review.token = std::string(token);
  if (!options_.audience.empty()) review.audiences = {options_.audience};
  StatusOr<client::TokenReview> reviewed = api_.createTokenReview(review);
  if (!reviewed.ok()) {
    // Not cached: the next request tries again.
    log::warning("TokenReview failed", {{"error", reviewed.status().toString()}});
    return Status(StatusCode::kUnavailable,
                  "cannot check the token now (TokenReview failed); try again");
  }

  StatusOr<pool::Caller> result = Status(StatusCode::kUnauthenticated, "invalid bearer token");
  if (!reviewed->authenticated) {
    if (options_.on_rejected) options_.on_rejected();
    if (std::optional<uint64_t> held = throttle_.allow("rejected")) {
      log::warning("Token rejected by TokenReview",
                   {{"client", client},
                    {"error", reviewed->error},
                    {"alsoRejectedSinceLastLine", static_cast<int64_t>(*held)}});
    }
  } else if (!options_.audience.empty() &&
             std::find(reviewed->status_audiences.begin(), reviewed->status_audiences.end(),
                       options_.audience) == reviewed->status_audiences.end()) {
    result = Status(StatusCode::kUnauthenticated,
                    "the token is not issued for audience " + options_.audience);
  } else {
    pool::Caller caller;
    caller.user = reviewed->user;
    auto node = caller.user.extra.find(kNodeNameExtra);
    if (node != caller.user.extra.end() && !node->second.empty() && !node->second.front().empty()) {
      caller.node_name = node->second.front();
    }
    result = std::move(caller);
  }
  tokens_->put(key, result);
  return result;
}

Status TokenReviewAuthenticator::authorize(const pool::Caller& caller, std::string_view verb,
                                           std::string_view driver) {
  client::SubjectAccessReview review;
  review.verb = std::string(verb);
  review.group = kAuthzGroup;
  review.resource = kAuthzResource;
  review.name = std::string(driver);
  const std::string what =
      driver.empty() ? std::string("drivers") : "driver \"" + std::string(driver) + "\"";
  return decide(caller, decisionKey(caller, verb, driver), std::move(review),
                "user \"" + caller.user.username + "\" may not " + std::string(verb) + " " + what +
                    " (RBAC: verb " + std::string(verb) + " on " + kAuthzResource + "." +
                    kAuthzGroup + ")");
}

std::optional<Status> TokenReviewAuthenticator::authorizeCached(const pool::Caller& caller,
                                                                std::string_view verb,
                                                                std::string_view driver) {
  return decisions_->get(decisionKey(caller, verb, driver));
}

Status TokenReviewAuthenticator::authorizePath(const pool::Caller& caller, std::string_view verb,
                                               std::string_view path) {
  client::SubjectAccessReview review;
  review.non_resource = {std::string(path), std::string(verb)};
  // Driver keys start with a digit: a path never shares a driver's key.
  return decide(caller, "path" + decisionKey(caller, verb, path), std::move(review),
                "user \"" + caller.user.username + "\" may not " + std::string(verb) + " " +
                    std::string(path) + " (RBAC: verb " + std::string(verb) +
                    " on nonResourceURLs " + std::string(path) + ")");
}

Status TokenReviewAuthenticator::decide(const pool::Caller& caller, const std::string& key,
                                        client::SubjectAccessReview review,
                                        const std::string& denied) {
  if (std::optional<Status> cached = decisions_->get(key)) return *cached;
  // Only authenticated callers get here; they share the global budget.
  RETURN_IF_ERROR(takeReview(""));

  review.user = caller.user;
  StatusOr<client::SubjectAccessReview> reviewed = api_.createSubjectAccessReview(review);
  if (!reviewed.ok()) {
    log::warning("SubjectAccessReview failed", {{"error", reviewed.status().toString()}});
    return Status(StatusCode::kUnavailable,
                  "cannot check permissions now (SubjectAccessReview failed); try again");
  }

  Status decision = okStatus();
  if (!reviewed->allowed || reviewed->denied) {
    decision = Status(StatusCode::kPermissionDenied, denied);
    log::debug(2, "Access denied",
               {{"user", caller.user.username},
                {"verb", review.verb.empty() ? review.non_resource.verb : review.verb},
                {"driver", review.name},
                {"path", review.non_resource.path},
                {"reason", reviewed->reason}});
  }
  decisions_->put(key, decision);
  return decision;
}

size_t TokenReviewAuthenticator::cacheSizeForTest() const {
  return tokens_->size() + decisions_->size();
}

}  // namespace rsc::controller::inventory
