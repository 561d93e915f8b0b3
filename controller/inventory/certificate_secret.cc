#include "controller/inventory/certificate_secret.h"

#include <algorithm>
#include <utility>

#include "common/enum_names.h"
#include "common/log.h"
#include "controller/http/certificates.h"

namespace rsc::controller::inventory {

using http::CertificateRequest;
using http::certificateSignedBy;
using http::certificateValidity;
using http::issueServingCertificate;
using http::kCertificateBackdate;
using http::makeCertificateAuthority;
using http::TlsKeyPair;
using http::Validity;
namespace {

constexpr std::string_view kPemEnd = "-----END CERTIFICATE-----";

// The certificates of a PEM bundle, each with its END line and a newline.
std::vector<std::string> splitBundle(std::string_view bundle) {
  std::vector<std::string> out;
  constexpr std::string_view kBegin = "-----BEGIN CERTIFICATE-----";
  size_t at = 0;
  while ((at = bundle.find(kBegin, at)) != std::string_view::npos) {
    const size_t end = bundle.find(kPemEnd, at);
    if (end == std::string_view::npos) break;
    out.emplace_back(bundle.substr(at, end + kPemEnd.size() - at));
    out.back() += "\n";
    at = end + kPemEnd.size();
  }
  return out;
}

std::string joinBundle(const std::vector<std::string>& certificates) {
  std::string out;
  for (const std::string& c : certificates) out += c;
  return out;
}

std::string value(const client::Secret& secret, const char* key) {
  auto it = secret.data.find(key);
  return it != secret.data.end() ? it->second : std::string();
}

// The first certificate of `pem`, alone.
std::string firstCertificate(std::string_view pem) {
  std::vector<std::string> all = splitBundle(pem);
  return all.empty() ? std::string() : all.front();
}

}  // namespace

constexpr auto kCertificateEventNames = enumNames<CertificateEvent>({
    {CertificateEvent::kCreated, "created"},
    {CertificateEvent::kAdopted, "adopted"},
    {CertificateEvent::kPrepared, "prepared"},
    {CertificateEvent::kRotated, "rotated"},
    {CertificateEvent::kRepaired, "repaired"},
    {CertificateEvent::kPublished, "published"},
    {CertificateEvent::kFailed, "failed"},
});

std::string_view certificateEventName(CertificateEvent event) {
  return kCertificateEventNames(event);
}

StatusOr<std::unique_ptr<CertificateSecret>> CertificateSecret::create(
    CertificateSecretOptions options) {
  if (options.api == nullptr || options.clock == nullptr) {
    return invalidArgument("CertificateSecret needs an API and a clock");
  }
  if (options.namespace_.empty() || options.secret_name.empty() ||
      options.config_map_name.empty()) {
    return invalidArgument("CertificateSecret needs a namespace, a Secret and a ConfigMap name");
  }
  if (options.names.empty()) return invalidArgument("the serving certificate needs a name");
  if (options.validity < std::chrono::seconds(6)) {
    return invalidArgument("certificate validity must be at least 6s");
  }
  return std::unique_ptr<CertificateSecret>(new CertificateSecret(std::move(options)));
}

CertificateSecret::CertificateSecret(CertificateSecretOptions options)
    : options_(std::move(options)) {}

void CertificateSecret::emit(CertificateEvent event) const {
  if (options_.on_event) options_.on_event(event);
}

std::shared_ptr<const TlsKeyPair> CertificateSecret::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

std::string CertificateSecret::caBundle() const {
  std::lock_guard lock(mu_);
  return bundle_;
}

Status CertificateSecret::sync() {
  StatusOr<client::Secret> secret = readOrCreate();
  if (secret.ok()) secret = rotateIfDue(std::move(*secret));
  if (!secret.ok()) {
    emit(CertificateEvent::kFailed);
    log::error("Syncing the inventory API's certificate Secret failed; retrying", secret.status(),
               {{"secret", options_.namespace_ + "/" + options_.secret_name}});
    return current() != nullptr ? okStatus() : secret.status();
  }
  serve(*secret);
  std::vector<std::string> namespaces = {options_.namespace_};
  namespaces.insert(namespaces.end(), options_.config_map_namespaces.begin(),
                    options_.config_map_namespaces.end());
  for (const std::string& ns : namespaces) {
    Status published = publish(ns, value(*secret, kSecretBundleKey));
    if (!published.ok()) {
      emit(CertificateEvent::kFailed);
      log::error("Publishing the inventory API's CA bundle failed; retrying", published,
                 {{"configMap", ns + "/" + options_.config_map_name}});
    }
  }
  return okStatus();
}

void CertificateSecret::run(std::stop_token stop) {
  while (!stop.stop_requested()) {
    (void)sync();
    // On the Clock, as every wait: a stop ends it at once.
    options_.clock->sleepUntil(options_.clock->now() + options_.sync_interval, stop);
  }
}

StatusOr<client::Secret> CertificateSecret::readOrCreate() {
  const std::string ns = options_.namespace_;
  const auto fresh = [&]() -> StatusOr<std::map<std::string, std::string>> {
    CertificateRequest request;
    request.common_name = options_.secret_name + "-ca";
    request.not_before = options_.clock->systemNow();
    request.validity = options_.validity;
    ASSIGN_OR_RETURN(TlsKeyPair ca, makeCertificateAuthority(request));
    request.common_name = options_.names.front();
    request.names = options_.names;
    ASSIGN_OR_RETURN(TlsKeyPair leaf, issueServingCertificate(request, &ca));
    return std::map<std::string, std::string>{{kSecretCaCertKey, ca.cert_pem},
                                              {kSecretCaKeyKey, ca.key_pem},
                                              {kSecretCertKey, leaf.cert_pem},
                                              {kSecretKeyKey, leaf.key_pem},
                                              {kSecretBundleKey, ca.cert_pem}};
  };

  StatusOr<client::Secret> got = options_.api->getSecret(ns, options_.secret_name);
  if (got.ok()) {
    // A Secret someone broke (or one of an older layout) is replaced, with
    // the resourceVersion read: replicas that race here agree on one.
    const client::Secret& s = *got;
    const bool usable =
        certificateSignedBy(value(s, kSecretCertKey), value(s, kSecretKeyKey),
                            value(s, kSecretCaCertKey)) &&
        certificateSignedBy(value(s, kSecretCaCertKey), value(s, kSecretCaKeyKey),
                            value(s, kSecretCaCertKey)) &&
        !splitBundle(value(s, kSecretBundleKey)).empty() &&
        (!s.data.contains(kSecretNextCaCertKey) ||
         certificateSignedBy(value(s, kSecretNextCaCertKey), value(s, kSecretNextCaKeyKey),
                             value(s, kSecretNextCaCertKey)));
    if (usable) return got;
    log::warning("The inventory API's certificate Secret is unusable; replacing it",
                 {{"secret", ns + "/" + options_.secret_name}});
    client::Secret repaired = s;
    ASSIGN_OR_RETURN(repaired.data, fresh());
    // Nothing stored is usable, so nothing of it is kept: the new CA alone
    // is published (drivers see one failure window until their mount updates).
    StatusOr<client::Secret> updated = options_.api->updateSecret(repaired);
    if (updated.ok()) {
      emit(CertificateEvent::kRepaired);
      return updated;
    }
    if (updated.status().code() == StatusCode::kConflict) {
      return options_.api->getSecret(ns, options_.secret_name);
    }
    return updated.status();
  }
  if (got.status().code() != StatusCode::kNotFound) return got.status();

  client::Secret secret;
  secret.metadata.namespace_ = ns;
  secret.metadata.name = options_.secret_name;
  secret.metadata.labels["app.kubernetes.io/managed-by"] = "resourceslice-controller";
  secret.type = "kubernetes.io/tls";
  ASSIGN_OR_RETURN(secret.data, fresh());
  StatusOr<client::Secret> created = options_.api->createSecret(secret);
  if (created.ok()) {
    emit(CertificateEvent::kCreated);
    log::info("Created the inventory API's CA and serving certificate",
              {{"secret", ns + "/" + options_.secret_name}});
    return created;
  }
  if (created.status().code() != StatusCode::kAlreadyExists) return created.status();
  // Another replica was first: use its certificates.
  emit(CertificateEvent::kAdopted);
  return options_.api->getSecret(ns, options_.secret_name);
}

StatusOr<client::Secret> CertificateSecret::rotateIfDue(client::Secret secret) {
  const Clock::SystemTime now = options_.clock->systemNow();
  const auto validity = std::chrono::duration_cast<Clock::SystemTime::duration>(options_.validity);
  ASSIGN_OR_RETURN(Validity serving, certificateValidity(value(secret, kSecretCertKey)));

  // The bundle: CAs not expired, newest first.
  std::vector<std::string> bundle;
  for (const std::string& ca : splitBundle(value(secret, kSecretBundleKey))) {
    StatusOr<Validity> v = certificateValidity(ca);
    if (v.ok() && v->not_after > now) bundle.push_back(ca);
  }

  client::Secret next = secret;
  CertificateEvent event;
  if (!secret.data.contains(kSecretNextCaCertKey)) {
    // 1. Prepare: a next CA joins the bundle.
    if (now < serving.not_after - validity / 2) return secret;
    CertificateRequest request;
    request.common_name = options_.secret_name + "-ca";
    request.not_before = now;
    request.validity = options_.validity;
    ASSIGN_OR_RETURN(TlsKeyPair ca, makeCertificateAuthority(request));
    next.data[kSecretNextCaCertKey] = ca.cert_pem;
    next.data[kSecretNextCaKeyKey] = ca.key_pem;
    bundle.insert(bundle.begin(), ca.cert_pem);
    event = CertificateEvent::kPrepared;
  } else {
    // 2. Switch, once the bundle had time to reach drivers (the next CA's
    // age, from its backdated start), or at once when the serving
    // certificate expired anyway.
    ASSIGN_OR_RETURN(Validity next_ca, certificateValidity(value(secret, kSecretNextCaCertKey)));
    const Clock::SystemTime prepared_at = next_ca.not_before + kCertificateBackdate;
    const bool propagated = now >= prepared_at + validity / 6;
    const bool due = now >= serving.not_after - validity / 3;
    if (!(propagated && due) && now < serving.not_after) return secret;
    const TlsKeyPair ca{value(secret, kSecretNextCaCertKey), value(secret, kSecretNextCaKeyKey)};
    CertificateRequest request;
    request.common_name = options_.names.front();
    request.names = options_.names;
    request.not_before = now;
    // Never past its CA: a chain is only as valid as its CA.
    request.validity = std::min<Clock::Duration>(
        options_.validity, std::chrono::duration_cast<Clock::Duration>(next_ca.not_after - now));
    ASSIGN_OR_RETURN(TlsKeyPair leaf, issueServingCertificate(request, &ca));
    next.data[kSecretCaCertKey] = ca.cert_pem;
    next.data[kSecretCaKeyKey] = ca.key_pem;
    next.data[kSecretCertKey] = leaf.cert_pem;
    next.data[kSecretKeyKey] = leaf.key_pem;
    next.data.erase(kSecretNextCaCertKey);
    next.data.erase(kSecretNextCaKeyKey);
    const std::string new_ca = firstCertificate(ca.cert_pem);
    if (std::find(bundle.begin(), bundle.end(), new_ca) == bundle.end()) {
      bundle.insert(bundle.begin(), new_ca);
    }
    event = CertificateEvent::kRotated;
  }
  next.data[kSecretBundleKey] = joinBundle(bundle);

  StatusOr<client::Secret> updated = options_.api->updateSecret(next);
  if (updated.ok()) {
    emit(event);
    log::info(event == CertificateEvent::kPrepared
                  ? "Rotating the inventory API's CA: the next CA joined the bundle"
                  : "Rotated the inventory API's serving certificate to the next CA",
              {{"secret", options_.namespace_ + "/" + options_.secret_name},
               {"cas", static_cast<int64_t>(bundle.size())}});
    return updated;
  }
  // Another replica rotated first: use what it stored.
  if (updated.status().code() == StatusCode::kConflict) {
    return options_.api->getSecret(options_.namespace_, options_.secret_name);
  }
  return updated.status();
}

void CertificateSecret::serve(const client::Secret& secret) {
  const std::string cert = value(secret, kSecretCertKey);
  const std::string key = value(secret, kSecretKeyKey);
  std::lock_guard lock(mu_);
  bundle_ = value(secret, kSecretBundleKey);
  if (current_ != nullptr && current_->cert_pem == cert && current_->key_pem == key) return;
  if (current_ != nullptr) {
    log::info("Serving the inventory API's new certificate",
              {{"secret", options_.namespace_ + "/" + options_.secret_name}});
  }
  current_ = std::make_shared<const TlsKeyPair>(TlsKeyPair{cert, key});
}

Status CertificateSecret::publish(const std::string& ns, const std::string& bundle) {
  // Replicas publish the same bundle from the same Secret: losing a race
  // (AlreadyExists, Conflict) is looking again, once.
  Status last = okStatus();
  for (int attempt = 0; attempt < 2; ++attempt) {
    StatusOr<client::ConfigMap> got = options_.api->getConfigMap(ns, options_.config_map_name);
    if (got.ok()) {
      auto it = got->data.find(kConfigMapBundleKey);
      if (it != got->data.end() && it->second == bundle) return okStatus();
      client::ConfigMap updated = *got;
      updated.data[kConfigMapBundleKey] = bundle;
      last = options_.api->updateConfigMap(updated).status();
    } else if (got.status().code() == StatusCode::kNotFound) {
      client::ConfigMap created;
      created.metadata.namespace_ = ns;
      created.metadata.name = options_.config_map_name;
      created.metadata.labels["app.kubernetes.io/managed-by"] = "resourceslice-controller";
      created.data[kConfigMapBundleKey] = bundle;
      last = options_.api->createConfigMap(created).status();
    } else {
      return got.status();
    }
    if (last.ok()) {
      emit(CertificateEvent::kPublished);
      return okStatus();
    }
    if (last.code() != StatusCode::kConflict && last.code() != StatusCode::kAlreadyExists) {
      return last;
    }
  }
  return last;
}

}  // namespace rsc::controller::inventory
