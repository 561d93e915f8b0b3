// CertificateSecret: the inventory API's self-signed TLS (--inventory-tls-secret). The
// controller makes a CA and a serving certificate for its Service names, keeps them in one
// Secret of its namespace, and publishes the CA bundle in a ConfigMap that drivers mount (as
// kube-root-ca.crt is published). Replicas agree on one Secret through the API server: each
// creates it only if absent, and on AlreadyExists (or a conflict) reads and uses the stored one.
// Rotation, well before expiry, in two steps so that no driver sees a certificate its bundle
// does not vouch for:
//   1. prepare, at half the serving certificate's validity: a next CA joins the bundle;
//   2. switch, a propagation period later (a sixth of the validity), when the serving
//      certificate passed two thirds of its validity: a serving certificate of the next CA
//      is served, and the old CA stays in the bundle until it expires.
// Every replica polls the Secret (sync(), from run()) and serves what it holds, so a new
// certificate is served without a restart.
// Threading: sync() and run() from one thread; current() and caBundle() from any thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "client/kube_api.h"
#include "common/clock.h"
#include "common/status.h"
#include "controller/http/http_server.h"

namespace rsc::controller::inventory {

// Keys of the Secret. tls.crt and tls.key make it a kubernetes.io/tls Secret.
inline constexpr char kSecretCertKey[] = "tls.crt";
inline constexpr char kSecretKeyKey[] = "tls.key";
inline constexpr char kSecretCaCertKey[] = "ca.crt";
inline constexpr char kSecretCaKeyKey[] = "ca.key";
inline constexpr char kSecretNextCaCertKey[] = "next-ca.crt";
inline constexpr char kSecretNextCaKeyKey[] = "next-ca.key";
// Every CA drivers should trust now, newest first; the ConfigMap's ca.crt.
inline constexpr char kSecretBundleKey[] = "ca-bundle.crt";
inline constexpr char kConfigMapBundleKey[] = "ca.crt";

// What a sync did, for logs and a metric.
enum class CertificateEvent {
  kCreated,    // made the Secret
  kAdopted,    // another replica made it first
  kPrepared,   // a next CA joined the bundle
  kRotated,    // the serving certificate of the next CA is served
  kRepaired,   // the stored certificates were unusable and were replaced
  kPublished,  // the ConfigMap was created or updated
  kFailed,     // an API call failed; retried at the next sync
};
std::string_view certificateEventName(CertificateEvent event);

struct CertificateSecretOptions {
  client::KubeApi* api = nullptr;
  Clock* clock = nullptr;
  std::string namespace_;
  std::string secret_name;
  std::string config_map_name;
  // More namespaces to publish the ConfigMap in (drivers' namespaces: a pod
  // mounts ConfigMaps of its own namespace only).
  std::vector<std::string> config_map_namespaces;
  // The serving certificate's names: the Service's DNS names (and IPs).
  std::vector<std::string> names;
  // Validity of each CA and serving certificate. A year: rotation starts at
  // six months and switches at eight, so a controller that is down for
  // months still rotates before anything expires.
  Clock::Duration validity = std::chrono::hours(24 * 365);
  // How often run() reads the Secret. A rotation leaves a sixth of the
  // validity between the bundle's change and the switch; a minute is far
  // inside it for every real validity.
  Clock::Duration sync_interval = std::chrono::minutes(1);
  // Called for each event; optional.
  std::function<void(CertificateEvent)> on_event = nullptr;
};

class CertificateSecret {
 public:
  // Fails with InvalidArgument on missing options.
  static StatusOr<std::unique_ptr<CertificateSecret>> create(CertificateSecretOptions options);

  // One round: read the Secret (create it when absent), rotate when due,
  // publish the bundle in the ConfigMap, and serve what the Secret holds.
  // Fails when the API server cannot be reached and nothing is held yet;
  // later failures keep what is served and are retried by the next sync.
  Status sync();
  // sync() every sync_interval until `stop`.
  void run(std::stop_token stop);

  // The pair to serve (HttpServerOptions::tls_key_pair); null before the
  // first successful sync. A rotation gives a new pointer.
  std::shared_ptr<const http::TlsKeyPair> current() const;
  // The CA bundle, PEM, "" before the first successful sync.
  std::string caBundle() const;

 private:
  explicit CertificateSecret(CertificateSecretOptions options);

  void emit(CertificateEvent event) const;
  // Sync steps; each returns the Secret as stored after it.
  StatusOr<client::Secret> readOrCreate();
  StatusOr<client::Secret> rotateIfDue(client::Secret secret);
  Status publish(const std::string& ns, const std::string& bundle);
  void serve(const client::Secret& secret);

  const CertificateSecretOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<const http::TlsKeyPair> current_;  // guarded by mu_
  std::string bundle_;                               // guarded by mu_
};

}  // namespace rsc::controller::inventory
