#include "client/credentials.h"

#include <utility>

#include "common/log.h"

namespace rsc::client {

CredentialSource::CredentialSource(const ClientConfig& config, Clock& clock,
                                   ExecRunOptions exec_options)
    : config_(config), clock_(clock), exec_options_(exec_options), token_(config.bearer_token) {}

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
  exec_credential_.reset();
  StatusOr<ExecCredential> answer = runExecPlugin(*config_.exec, config_, exec_options_);
  if (!answer.ok()) {
    log::warning("exec credential plugin failed",
                 {{"command", config_.exec->command}, {"error", answer.status().message()}});
    return answer.status();
  }
  Credential credential{answer->token, nullptr};
  if (!answer->client_cert_pem.empty()) {
    credential.identity = std::make_shared<const ClientIdentity>(
        ClientIdentity{answer->client_cert_pem, answer->client_key_pem});
  }
  exec_credential_ = std::move(credential);
  exec_expiry_ = answer->expiry;
  log::info("exec credential plugin gave a credential",
            {{"command", config_.exec->command},
             {"expires", answer->expiry ? formatTime(*answer->expiry) : std::string("never")},
             {"token", answer->token.empty() ? "no" : "yes"},
             {"clientCertificate", answer->client_cert_pem.empty() ? "no" : "yes"}});
  return okStatus();
}

StatusOr<Credential> CredentialSource::get() {
  std::lock_guard lock(mu_);
  if (config_.exec) {
    const bool expired = exec_expiry_ && clock_.systemNow() >= *exec_expiry_;
    if (!exec_credential_ || expired) RETURN_IF_ERROR(runPlugin());
    return *exec_credential_;
  }
  if (!config_.token_file.empty() && (!read_at_ || clock_.now() - *read_at_ >= kRereadInterval)) {
    reloadTokenFile();
  }
  return Credential{token_, nullptr};
}

bool CredentialSource::refreshAfterUnauthorized(const Credential& used) {
  std::lock_guard lock(mu_);
  if (config_.exec) {
    // Another request may have refreshed it already: use that answer.
    if (exec_credential_ && *exec_credential_ != used) return true;
    return runPlugin().ok() && *exec_credential_ != used;
  }
  if (config_.token_file.empty()) return false;
  reloadTokenFile();
  return token_ != used.token;
}

}  // namespace rsc::client
