#include "controller/inventory/certificate_secret.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>

#include "controller/http/certificates.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller::inventory {

using http::certificateSignedBy;
using http::certificateValidity;
using http::TlsKeyPair;
using http::Validity;
namespace {

using std::chrono::seconds;

constexpr char kNamespace[] = "dra";
constexpr char kSecret[] = "rsc-inventory-tls";
constexpr char kConfigMap[] = "rsc-ca";

// The certificates of a PEM bundle.
std::vector<std::string> certificates(const std::string& bundle) {
  std::vector<std::string> out;
  size_t at = 0;
  constexpr std::string_view kEnd = "-----END CERTIFICATE-----";
  while ((at = bundle.find("-----BEGIN CERTIFICATE-----", at)) != std::string::npos) {
    const size_t end = bundle.find(kEnd, at);
    out.push_back(bundle.substr(at, end + kEnd.size() - at));
    at = end;
  }
  return out;
}

// True when one CA of `bundle` signed the served certificate.
bool trusted(const TlsKeyPair& served, const std::string& bundle) {
  for (const std::string& ca : certificates(bundle)) {
    if (certificateSignedBy(served.cert_pem, served.key_pem, ca)) return true;
  }
  return false;
}

class CertificateSecretTest : public ::testing::Test {
 protected:
  std::unique_ptr<CertificateSecret> replica(Clock::Duration validity = std::chrono::hours(24)) {
    CertificateSecretOptions o;
    o.api = &api_;
    o.clock = &clock_;
    o.namespace_ = kNamespace;
    o.secret_name = kSecret;
    o.config_map_name = kConfigMap;
    o.names = {"rsc.dra.svc", "127.0.0.1"};
    o.validity = validity;
    o.on_event = [this](CertificateEvent e) { events_.push_back(e); };
    StatusOr<std::unique_ptr<CertificateSecret>> made = CertificateSecret::create(o);
    EXPECT_TRUE(made.ok()) << made.status().toString();
    return std::move(*made);
  }

  std::string publishedBundle() {
    StatusOr<client::ConfigMap> cm = api_.getConfigMap(kNamespace, kConfigMap);
    return cm.ok() ? cm->data[kConfigMapBundleKey] : "";
  }

  testing::FakeClock clock_;
  testing::FakeKubeApi api_{clock_};
  std::vector<CertificateEvent> events_;
};

TEST_F(CertificateSecretTest, CreatesTheSecretPublishesTheBundleAndServes) {
  auto r = replica();
  EXPECT_EQ(r->current(), nullptr);
  ASSERT_TRUE(r->sync().ok());
  ASSERT_NE(r->current(), nullptr);

  StatusOr<client::Secret> secret = api_.getSecret(kNamespace, kSecret);
  ASSERT_TRUE(secret.ok());
  EXPECT_EQ(secret->type, "kubernetes.io/tls");
  EXPECT_EQ(secret->data[kSecretCertKey], r->current()->cert_pem);
  EXPECT_EQ(secret->data[kSecretBundleKey], secret->data[kSecretCaCertKey]);
  EXPECT_EQ(publishedBundle(), secret->data[kSecretCaCertKey]);
  EXPECT_EQ(r->caBundle(), publishedBundle());
  EXPECT_TRUE(trusted(*r->current(), publishedBundle()));
  EXPECT_THAT(events_,
              ::testing::ElementsAre(CertificateEvent::kCreated, CertificateEvent::kPublished));

  // Nothing to do: no write, the same pair.
  const auto served = r->current();
  ASSERT_TRUE(r->sync().ok());
  EXPECT_EQ(r->current(), served);
  EXPECT_EQ(api_.countActions("update", "secrets"), 0U);
  EXPECT_EQ(api_.countActions("update", "configmaps"), 0U);
}

TEST_F(CertificateSecretTest, ReplicasAgreeOnOneSecret) {
  auto first = replica();
  auto second = replica();
  // The second replica read before the first created the Secret (its get
  // says NotFound), then loses the race to create: it uses the stored one.
  ASSERT_TRUE(first->sync().ok());
  bool raced = false;
  api_.prependReactor("get", "secrets", [&](testing::FakeKubeApi::Request&) -> Status {
    if (raced) return okStatus();
    raced = true;
    return Status(StatusCode::kNotFound, "secrets \"rsc-inventory-tls\" not found");
  });
  ASSERT_TRUE(second->sync().ok());
  ASSERT_NE(first->current(), nullptr);
  ASSERT_NE(second->current(), nullptr);
  EXPECT_EQ(second->current()->cert_pem, first->current()->cert_pem);
  EXPECT_EQ(second->caBundle(), first->caBundle());
  EXPECT_THAT(events_, ::testing::Contains(CertificateEvent::kAdopted));
  EXPECT_EQ(api_.countActions("create", "secrets"), 2U);
}

TEST_F(CertificateSecretTest, RotatesBeforeExpiryWithoutADriverEverDistrustingIt) {
  // Two replicas, a one-minute validity, a sync every second for five
  // minutes. A driver reloads its bundle from the ConfigMap ten seconds late
  // (a sixth of the validity: the propagation the rotation waits for).
  const Clock::Duration validity = seconds(60);
  auto a = replica(validity);
  auto b = replica(validity);
  std::deque<std::string> bundles;  // published bundle at each second
  int rotations = 0;
  std::string last_cert;
  for (int t = 0; t < 300; ++t) {
    ASSERT_TRUE((t % 2 == 0 ? a : b)->sync().ok()) << "t=" << t;
    ASSERT_TRUE((t % 2 == 0 ? b : a)->sync().ok()) << "t=" << t;
    bundles.push_back(publishedBundle());
    const std::string& driver_bundle =
        bundles.size() > 10 ? bundles[bundles.size() - 11] : bundles.front();
    for (const auto* r : {a.get(), b.get()}) {
      const TlsKeyPair served = *r->current();
      EXPECT_TRUE(trusted(served, driver_bundle)) << "t=" << t;
      StatusOr<Validity> v = certificateValidity(served.cert_pem);
      ASSERT_TRUE(v.ok());
      EXPECT_GT(v->not_after, clock_.systemNow()) << "served an expired certificate at t=" << t;
    }
    EXPECT_EQ(a->current()->cert_pem, b->current()->cert_pem) << "t=" << t;
    if (a->current()->cert_pem != last_cert) {
      if (!last_cert.empty()) ++rotations;
      last_cert = a->current()->cert_pem;
    }
    // Expired CAs leave the bundle.
    EXPECT_LE(certificates(publishedBundle()).size(), 3U) << "t=" << t;
    clock_.advance(seconds(1));
  }
  EXPECT_GE(rotations, 5);
  EXPECT_THAT(events_, ::testing::Contains(CertificateEvent::kPrepared));
  EXPECT_THAT(events_, ::testing::Contains(CertificateEvent::kRotated));
}

TEST_F(CertificateSecretTest, ALostRaceToPublishIsNotAFailure) {
  auto a = replica();
  auto b = replica();
  ASSERT_TRUE(a->sync().ok());
  // Replica b's update of the ConfigMap conflicts once (another replica
  // published first), after the next CA joined the bundle.
  clock_.advance(std::chrono::hours(12) + seconds(1));
  bool raced = false;
  api_.prependReactor("update", "configmaps", [&](testing::FakeKubeApi::Request&) -> Status {
    if (raced) return okStatus();
    raced = true;
    return Status(StatusCode::kConflict, "the object has been modified");
  });
  events_.clear();
  ASSERT_TRUE(b->sync().ok());
  EXPECT_TRUE(raced);
  EXPECT_THAT(events_, ::testing::Contains(CertificateEvent::kPrepared));
  EXPECT_THAT(events_, ::testing::Not(::testing::Contains(CertificateEvent::kFailed)));
  EXPECT_EQ(publishedBundle(), b->caBundle());
  EXPECT_EQ(certificates(publishedBundle()).size(), 2U);
}

TEST_F(CertificateSecretTest, ReplacesAnUnusableSecret) {
  client::Secret broken;
  broken.metadata.namespace_ = kNamespace;
  broken.metadata.name = kSecret;
  broken.data[kSecretCertKey] = "not a certificate";
  ASSERT_TRUE(api_.createSecret(broken).ok());
  auto r = replica();
  ASSERT_TRUE(r->sync().ok());
  ASSERT_NE(r->current(), nullptr);
  EXPECT_TRUE(trusted(*r->current(), publishedBundle()));
  EXPECT_THAT(events_, ::testing::Contains(CertificateEvent::kRepaired));
}

TEST_F(CertificateSecretTest, KeepsServingWhenTheApiServerFails) {
  auto r = replica();
  api_.prependReactor("get", "secrets",
                      [](testing::FakeKubeApi::Request&) { return unavailable("down"); });
  EXPECT_FALSE(r->sync().ok());  // nothing to serve yet
  api_.clearReactors();
  ASSERT_TRUE(r->sync().ok());
  const auto served = r->current();
  api_.prependReactor("get", "secrets",
                      [](testing::FakeKubeApi::Request&) { return unavailable("down"); });
  EXPECT_TRUE(r->sync().ok());
  EXPECT_EQ(r->current(), served);
  EXPECT_THAT(events_, ::testing::Contains(CertificateEvent::kFailed));
}

}  // namespace
}  // namespace rsc::controller::inventory
