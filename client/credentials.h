// CredentialSource: what a request authenticates with, from a ClientConfig:
// a fixed token, a token file re-read as it rotates (in-cluster service
// account tokens, tokenFile), or an exec credential plugin whose token and/or
// client certificate are cached until they expire (exec_credential.h). After
// the server answers 401 the caller asks for a refresh and repeats the
// request once. Used by CpprestTransport for every request. Thread-safe: one
// mutex; a plugin runs under it, so concurrent requests wait for one run
// instead of starting one each.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "client/config.h"
#include "client/exec_credential.h"
#include "common/clock.h"
#include "common/status.h"

namespace rsc::client {

// A client certificate and key (PEM) an exec plugin gave. One object per
// plugin answer, so that a transport can tell a new one by its address.
struct ClientIdentity {
  std::string cert_pem;
  std::string key_pem;
};

struct Credential {
  // "" sends none.
  std::string token;
  // From an exec plugin; null: the ClientConfig's own certificate, if any.
  std::shared_ptr<const ClientIdentity> identity;

  friend bool operator==(const Credential&, const Credential&) = default;
};

class CredentialSource {
 public:
  // kubelet rotates projected tokens well before they expire, so re-reading
  // a token file once a minute is enough (client-go does the same).
  static constexpr std::chrono::minutes kRereadInterval{1};
  // After a plugin run failed, requests get the same error for this long
  // instead of each running the plugin again (and logging it), so that a
  // broken plugin costs one run per interval, not one per request.
  static constexpr std::chrono::seconds kExecFailureHold{5};

  CredentialSource(const ClientConfig& config, Clock& clock);

  // One source per exec plugin configuration (and server) in the process,
  // shared by every transport made from it (the leader election's client
  // and the main one), so that a plugin runs once per expiry, as client-go
  // caches exec authenticators; a new source for other configurations.
  static std::shared_ptr<CredentialSource> shared(const ClientConfig& config, Clock& clock);

  CredentialSource(const CredentialSource&) = delete;
  CredentialSource& operator=(const CredentialSource&) = delete;

  // The credential to send now: runs the exec plugin when nothing is cached
  // or the cached answer expired (an error when it fails, repeated without a
  // run for kExecFailureHold), re-reads a token file at most once per
  // kRereadInterval.
  StatusOr<Credential> get();

  // Called after the server answered 401 to a request sent with `used`:
  // re-reads the token file, or runs the plugin again (unless another
  // request already replaced `used`). Returns true when the credential now
  // differs from `used`, so that repeating the request may succeed.
  bool refreshAfterUnauthorized(const Credential& used);

 private:
  // Requires mu_. Reads the file into token_; keeps the old token when the
  // file cannot be read (it may be between a rename and a write).
  void reloadTokenFile();
  // Requires mu_. Runs the plugin and caches its answer.
  Status runPlugin();

  const ClientConfig config_;
  // A copy of *config_.exec, when use_exec_.
  const bool use_exec_;
  const ExecConfig exec_;
  Clock& clock_;
  std::mutex mu_;
  std::string token_;
  std::optional<Clock::TimePoint> read_at_;
  // The plugin's last failure and when it happened.
  Status exec_failure_;
  std::optional<Clock::TimePoint> exec_failed_at_;
  // The plugin's last answer (when has_exec_credential_) and when it
  // expires (nullopt: never).
  bool has_exec_credential_ = false;
  Credential exec_credential_;
  std::optional<Clock::SystemTime> exec_expiry_;
};

}  // namespace rsc::client
