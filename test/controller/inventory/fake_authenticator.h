// FakeAuthenticator: an Authenticator for handler tests. Tokens map to
// callers set up by the test; access is allowed unless denied for a verb and
// driver (or path); every authorize() and authorizePath() call is recorded. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "controller/inventory/authenticator.h"

namespace rsc::controller::inventory {

class FakeAuthenticator final : public Authenticator {
 public:
  struct Check {
    std::string user;
    std::string verb;
    std::string driver;
    friend bool operator==(const Check&, const Check&) = default;
  };

  FakeAuthenticator() {
    pool::Caller admin;
    admin.user.username = "system:serviceaccount:dra:central";
    addToken("admin", admin);
    for (const char* node : {"node-a", "node-b"}) {
      pool::Caller caller;
      caller.user.username = std::string("system:serviceaccount:dra:plugin-") + node;
      caller.node_name = node;
      addToken(node, caller);
    }
  }

  void addToken(const std::string& token, pool::Caller caller) {
    std::lock_guard lock(mu_);
    tokens_[token] = std::move(caller);
  }
  void deny(const std::string& verb, const std::string& driver) {
    std::lock_guard lock(mu_);
    denied_.insert({verb, driver});
  }
  void setUnavailable(bool unavailable) {
    std::lock_guard lock(mu_);
    unavailable_ = unavailable;
  }
  std::vector<Check> checks() const {
    std::lock_guard lock(mu_);
    return checks_;
  }

  StatusOr<pool::Caller> authenticate(std::optional<std::string_view> authorization,
                                      std::string_view) override {
    std::lock_guard lock(mu_);
    if (unavailable_) return unavailable("TokenReview failed");
    if (!authorization) return Status(StatusCode::kUnauthenticated, "missing credentials");
    constexpr std::string_view kPrefix = "Bearer ";
    if (!authorization->starts_with(kPrefix)) {
      return Status(StatusCode::kUnauthenticated, "malformed Authorization header");
    }
    auto it = tokens_.find(std::string(authorization->substr(kPrefix.size())));
    if (it == tokens_.end()) return Status(StatusCode::kUnauthenticated, "invalid bearer token");
    return it->second;
  }

  Status authorize(const pool::Caller& caller, std::string_view verb,
                   std::string_view driver) override {
    std::lock_guard lock(mu_);
    checks_.push_back({caller.user.username, std::string(verb), std::string(driver)});
    if (denied_.contains({std::string(verb), std::string(driver)})) {
      return Status(StatusCode::kPermissionDenied, "denied by the test");
    }
    return okStatus();
  }

  // The fake never blocks: its cached answers are its answers, unless the
  // test makes it a cache that knows nothing.
  std::optional<StatusOr<pool::Caller>> authenticateCached(
      std::optional<std::string_view> authorization) override {
    if (uncached()) return std::nullopt;
    return authenticate(authorization, "");
  }
  std::optional<Status> authorizeCached(const pool::Caller& caller, std::string_view verb,
                                        std::string_view driver) override {
    if (uncached()) return std::nullopt;
    return authorize(caller, verb, driver);
  }
  void setUncached(bool uncached) {
    std::lock_guard lock(mu_);
    uncached_ = uncached;
  }

  // Recorded and denied as authorize(), with the path in place of the driver.
  Status authorizePath(const pool::Caller& caller, std::string_view verb,
                       std::string_view path) override {
    return authorize(caller, verb, path);
  }

 private:
  bool uncached() const {
    std::lock_guard lock(mu_);
    return uncached_;
  }

  mutable std::mutex mu_;
  std::map<std::string, pool::Caller> tokens_;
  std::set<std::pair<std::string, std::string>> denied_;
  bool unavailable_ = false;
  bool uncached_ = false;
  std::vector<Check> checks_;
};

}  // namespace rsc::controller::inventory
