#include "client/credentials.h"

#include <map>
#include <utility>

#include "common/log.h"
#include "common/strings.h"

namespace rsc::client {

CredentialSource::CredentialSource(const ClientConfig& config, Clock& clock)
    : config_(config),
      use_exec_(config.exec.has_value()),
      exec_(config.exec.value_or(ExecConfig{})),
      clock_(clock),
      token_(config.bearer_token) {}

void CredentialSource::reloadTokenFile() {
  read_at_ = clock_.now();
  auto content = readConfigFile(config_.token_file);
  if (!content.ok()) {
    log::warning("cannot re-read the bearer token file; keeping the last token",
                 {{"file", config_.token_file}, {"error", content.status().message()}});
    return;
  }
  std::string token = trimBlanks(*content);
  if (!token.empty()) token_ = std::move(token);
}

Status CredentialSource::runPlugin() {
  has_exec_credential_ = false;
  StatusOr<ExecCredential> answer = runExecPlugin(exec_, config_);
  if (!answer.ok()) {
    log::warning("exec credential plugin failed",
                 {{"command", exec_.command}, {"error", answer.status().message()}});
    exec_failure_ = answer.status();
    exec_failed_at_ = clock_.now();
    return answer.status();
  }
  exec_failed_at_.reset();
  Credential credential{answer->token, nullptr};
  if (!answer->client_cert_pem.empty()) {
    credential.identity = std::make_shared<const ClientIdentity>(
        ClientIdentity{answer->client_cert_pem, answer->client_key_pem});
  }
  exec_credential_ = std::move(credential);
  has_exec_credential_ = true;
  exec_expiry_ = answer->expiry;
  std::string expires = "never";
  if (exec_expiry_) expires = formatTime(*exec_expiry_);
  log::info("exec credential plugin gave a credential",
            {{"command", exec_.command},
             {"expires", expires},
             {"token", answer->token.empty() ? "no" : "yes"},
             {"clientCertificate", answer->client_cert_pem.empty() ? "no" : "yes"}});
  return okStatus();
}

std::shared_ptr<CredentialSource> CredentialSource::shared(const ClientConfig& config,
                                                           Clock& clock) {
  if (!config.exec) return std::make_shared<CredentialSource>(config, clock);
  const ExecConfig& exec = *config.exec;
  Json key = {config.server,
              exec.command,
              exec.args,
              exec.env,
              exec.api_version,
              execInfo(exec, config),
              exec.interactive_mode,
              exec.install_hint,
              config.client_cert_pem,
              config.exec_run.timeout.count(),
              config.exec_run.max_output_bytes};
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<CredentialSource>> sources;
  std::lock_guard lock(mu);
  std::weak_ptr<CredentialSource>& slot = sources[key.dump()];
  std::shared_ptr<CredentialSource> source = slot.lock();
  if (!source) {
    source = std::make_shared<CredentialSource>(config, clock);
    slot = source;
  }
  return source;
}

StatusOr<Credential> CredentialSource::get() {
  std::lock_guard lock(mu_);
  if (use_exec_) {
    const bool expired = exec_expiry_ && clock_.systemNow() >= *exec_expiry_;
    if (!has_exec_credential_ || expired) {
      if (exec_failed_at_ && clock_.now() - *exec_failed_at_ < kExecFailureHold) {
        return exec_failure_;
      }
      RETURN_IF_ERROR(runPlugin());
    }
    return exec_credential_;
  }
  if (!config_.token_file.empty() && (!read_at_ || clock_.now() - *read_at_ >= kRereadInterval)) {
    reloadTokenFile();
  }
  return Credential{token_, nullptr};
}

bool CredentialSource::refreshAfterUnauthorized(const Credential& used) {
  std::lock_guard lock(mu_);
  if (use_exec_) {
    // Another request may have refreshed it already: use that answer.
    if (has_exec_credential_ && exec_credential_ != used) return true;
    return runPlugin().ok() && exec_credential_ != used;
  }
  if (config_.token_file.empty()) return false;
  reloadTokenFile();
  return token_ != used.token;
}

}  // namespace rsc::client
