// RestKubeApi over CpprestTransport against a real kube-apiserver: the admin
// kubeconfig loaded with our own loader, ResourceSlice CRUD with the server's
// own answers (409, 422, 403), pagination, a watch, Leases and the reviews.
#include "client/rest_kube_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <openssl/x509.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "client/config.h"
#include "client/http_transport.h"
#include "client/load_config.h"
#include "test/integration/cluster_env.h"

namespace rsc::client {
namespace {

using rsc::testing::ClusterEnvironment;
using ::testing::HasSubstr;

const auto* const kCluster = ClusterEnvironment::install();

constexpr std::string_view kDriver = "gpu.example.com";
constexpr std::string_view kTestLabel = "rsc-test/case";

ResourceSlice newSlice(const std::string& test_case, const std::string& pool = "pool-a") {
  ResourceSlice s;
  s.metadata.generate_name = "rsc-it-" + test_case + "-";
  s.metadata.labels[std::string(kTestLabel)] = test_case;
  s.spec.driver = kDriver;
  s.spec.node_name = "node-a";
  s.spec.pool = {pool, 1, 1};
  Device d;
  d.name = "gpu-0";
  DeviceAttribute model;
  model.string_value = "A100";
  d.attributes["model"] = model;
  s.spec.devices.push_back(d);
  return s;
}

std::string selectorFor(const std::string& test_case) {
  return std::string(kTestLabel) + "=" + test_case;
}

// One API client per test, built the way main builds it.
class RestKubeApiIntegration : public ::testing::Test {
 protected:
  void SetUp() override {
    const ClusterEnvironment& cluster = ClusterEnvironment::get();
    ConfigEnvironment no_environment;  // only the explicit kubeconfig counts
    auto config = loadConfig(cluster.kubeconfig().string(), no_environment);
    ASSERT_TRUE(config.ok()) << config.status().toString();
    ASSERT_EQ(config->server, cluster.server());
    ASSERT_FALSE(config->client_cert_pem.empty());
    config_ = *config;
    api_ = makeApi(config_, &transport_);
  }

  std::unique_ptr<RestKubeApi> makeApi(const ClientConfig& config,
                                       std::unique_ptr<CpprestTransport>* transport) {
    auto t = CpprestTransport::create(config, RealClock::instance());
    EXPECT_TRUE(t.ok()) << t.status().toString();
    if (!t.ok()) {
      return nullptr;
    }
    *transport = std::move(*t);
    RestKubeApiOptions options;
    options.request_observer = [this](const RequestResult& r) {
      std::lock_guard lock(mu_);
      observed_.push_back(r);
    };
    auto api = RestKubeApi::create(**transport, RealClock::instance(), options);
    EXPECT_TRUE(api.ok()) << api.status().toString();
    return api.ok() ? std::move(*api) : nullptr;
  }

  // A raw request as admin, for objects KubeApi has no call for.
  HttpResponse raw(const std::string& method, const std::string& path, const Json& body) {
    HttpRequest req;
    req.method = method;
    req.path_and_query = path;
    req.headers = {{"Content-Type", "application/json"}};
    req.body = body.dump();
    auto response = transport_->send(req);
    EXPECT_TRUE(response.ok()) << response.status().toString();
    return response.ok() ? *response : HttpResponse{};
  }

  ClientConfig config_;
  std::unique_ptr<CpprestTransport> transport_;
  std::unique_ptr<RestKubeApi> api_;
  std::mutex mu_;
  std::vector<RequestResult> observed_;
};

// The controller's slice cache keeps no managedFields (about 5 KB per slice).
// An update made from such a copy must leave the server's managedFields as they
// were, not clear them.
TEST_F(RestKubeApiIntegration, AnUpdateWithoutManagedFieldsKeepsTheServers) {
  auto created = api_->createResourceSlice(newSlice("managed-fields"));
  ASSERT_TRUE(created.ok()) << created.status().toString();
  ASSERT_TRUE(created->metadata.unknown.contains("managedFields"));
  const Json before = created->metadata.unknown["managedFields"];
  ASSERT_FALSE(before.empty());

  ResourceSlice cached = *created;
  cached.metadata.unknown.erase("managedFields");
  cached.spec.devices[0].edit([](Device& d) { d.attributes["model"].string_value = "H100"; });
  auto updated = api_->updateResourceSlice(cached);
  ASSERT_TRUE(updated.ok()) << updated.status().toString();
  ASSERT_TRUE(updated->metadata.unknown.contains("managedFields"));
  const Json& after = updated->metadata.unknown["managedFields"];
  ASSERT_EQ(after.size(), before.size()) << after.dump();
  EXPECT_EQ(after[0]["manager"], before[0]["manager"]);
  EXPECT_EQ(after[0]["fieldsV1"], before[0]["fieldsV1"]);
}

TEST_F(RestKubeApiIntegration, ResourceSliceLifecycle) {
  // Create with generateName.
  auto created = api_->createResourceSlice(newSlice("crud"));
  ASSERT_TRUE(created.ok()) << created.status().toString();
  const std::string name = created->metadata.name;
  EXPECT_THAT(name, ::testing::StartsWith("rsc-it-crud-"));
  EXPECT_FALSE(created->metadata.uid.empty());
  EXPECT_EQ(created->spec.devices.at(0).device().attributes.at("model").string_value, "A100");

  // Get.
  auto got = api_->getResourceSlice(name);
  ASSERT_TRUE(got.ok()) << got.status().toString();
  EXPECT_EQ(got->metadata.uid, created->metadata.uid);
  EXPECT_EQ(got->spec, created->spec);

  // Update with the resourceVersion read.
  ResourceSlice changed = *got;
  changed.spec.devices[0].edit(
      [&](client::Device& d_) { d_.attributes["model"].string_value = "H100"; });
  changed.spec.pool.generation = 2;
  auto updated = api_->updateResourceSlice(changed);
  ASSERT_TRUE(updated.ok()) << updated.status().toString();
  EXPECT_NE(updated->metadata.resource_version, got->metadata.resource_version);
  EXPECT_EQ(updated->spec.pool.generation, 2);

  // The same write again carries a stale resourceVersion.
  auto stale = api_->updateResourceSlice(changed);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), StatusCode::kConflict);
  EXPECT_EQ(stale.status().reason(), "Conflict");
  EXPECT_THAT(stale.status().message(),
              HasSubstr("update ResourceSlice " + name + ": Operation cannot be fulfilled"));

  // Delete with a wrong UID precondition is refused; the right one works.
  Status wrong = api_->deleteResourceSlice(name, Preconditions{"not-the-uid", std::nullopt});
  EXPECT_EQ(wrong.code(), StatusCode::kConflict) << wrong.toString();
  EXPECT_THAT(wrong.message(),
              HasSubstr("the UID in the precondition (not-the-uid) does not match"));
  Status deleted = api_->deleteResourceSlice(
      name, Preconditions{updated->metadata.uid, updated->metadata.resource_version});
  ASSERT_TRUE(deleted.ok()) << deleted.toString();

  auto gone = api_->getResourceSlice(name);
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound) << gone.status().toString();
  Status again = api_->deleteResourceSlice(name, {});
  EXPECT_EQ(again.code(), StatusCode::kNotFound) << again.toString();

  // Every attempt was observed with the server's host and code.
  std::lock_guard lock(mu_);
  ASSERT_FALSE(observed_.empty());
  EXPECT_EQ(observed_.front().verb, "POST");
  EXPECT_EQ(observed_.front().code, 201);
  EXPECT_EQ("https://" + observed_.front().host, ClusterEnvironment::get().server());
}

TEST_F(RestKubeApiIntegration, ListPagesWithALabelSelector) {
  std::set<std::string> names;
  for (int i = 0; i < 5; ++i) {
    auto created = api_->createResourceSlice(newSlice("paging", "pool-" + std::to_string(i)));
    ASSERT_TRUE(created.ok()) << created.status().toString();
    names.insert(created->metadata.name);
  }
  ASSERT_TRUE(api_->createResourceSlice(newSlice("other")).ok());

  ListOptions options;
  options.label_selector = selectorFor("paging");
  options.limit = 2;
  std::set<std::string> listed;
  std::vector<size_t> page_sizes;
  for (int page = 0; page < 10; ++page) {
    auto list = api_->listResourceSlices(options);
    ASSERT_TRUE(list.ok()) << list.status().toString();
    EXPECT_FALSE(list->resource_version.empty());
    page_sizes.push_back(list->items.size());
    for (const auto& s : list->items) {
      listed.insert(s.metadata.name);
    }
    if (list->continue_token.empty()) {
      break;
    }
    options.continue_token = list->continue_token;
  }
  EXPECT_EQ(page_sizes, (std::vector<size_t>{2, 2, 1}));
  EXPECT_EQ(listed, names);

  // Delete the collection by selector; the other slice stays.
  ListOptions paging;
  paging.label_selector = selectorFor("paging");
  ASSERT_TRUE(api_->deleteResourceSlices(paging).ok());
  auto after = api_->listResourceSlices(paging);
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->items.empty());
  ListOptions other;
  other.label_selector = selectorFor("other");
  auto others = api_->listResourceSlices(other);
  ASSERT_TRUE(others.ok());
  EXPECT_EQ(others->items.size(), 1u);
  ASSERT_TRUE(api_->deleteResourceSlices(other).ok());
}

TEST_F(RestKubeApiIntegration, WatchFromAListSeesChangesInOrder) {
  ListOptions options;
  options.label_selector = selectorFor("watch");
  auto list = api_->listResourceSlices(options);
  ASSERT_TRUE(list.ok()) << list.status().toString();

  struct Seen {
    WatchEventType type;
    std::string name;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Seen> seen;
  bool done = false;
  Status watch_status;
  std::stop_source stop;
  ListOptions watch = options;
  watch.resource_version = list->resource_version;
  watch.allow_watch_bookmarks = true;
  watch.timeout_seconds = 120;
  std::thread watcher([&] {
    Status s = api_->watchResourceSlices(
        watch,
        [&](const WatchEvent<ResourceSlice>& e) {
          std::lock_guard lock(mu);
          if (e.type != WatchEventType::kBookmark) {
            seen.push_back({e.type, e.object.metadata.name});
          }
          cv.notify_all();
          return e.type != WatchEventType::kDeleted;
        },
        stop.get_token());
    std::lock_guard lock(mu);
    watch_status = s;
    done = true;
    cv.notify_all();
  });

  auto created = api_->createResourceSlice(newSlice("watch"));
  ASSERT_TRUE(created.ok()) << created.status().toString();
  ResourceSlice changed = *created;
  changed.spec.pool.generation = 2;
  auto updated = api_->updateResourceSlice(changed);
  ASSERT_TRUE(updated.ok()) << updated.status().toString();
  ASSERT_TRUE(api_->deleteResourceSlice(created->metadata.name, {}).ok());

  {
    std::unique_lock lock(mu);
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; });
  }
  if (!done) {
    stop.request_stop();
  }
  watcher.join();
  EXPECT_TRUE(watch_status.ok()) << watch_status.toString();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].type, WatchEventType::kAdded);
  EXPECT_EQ(seen[1].type, WatchEventType::kModified);
  EXPECT_EQ(seen[2].type, WatchEventType::kDeleted);
  for (const auto& s : seen) {
    EXPECT_EQ(s.name, created->metadata.name);
  }
}

TEST_F(RestKubeApiIntegration, StoppingAQuietWatchEndsItPromptly) {
  ListOptions options;
  options.label_selector = selectorFor("nothing-happens");
  options.timeout_seconds = 300;
  std::stop_source stop;
  Status status;
  std::thread watcher([&] {
    status = api_->watchResourceSlices(
        options, [](const auto&) { return true; }, stop.get_token());
  });
  // Let the request reach the server, then stop it.
  Clock& clock = RealClock::instance();
  clock.sleepFor(std::chrono::milliseconds(500));
  const Clock::TimePoint stopped_at = clock.now();
  stop.request_stop();
  watcher.join();
  EXPECT_LT(clock.now() - stopped_at, std::chrono::seconds(5));
  EXPECT_EQ(status.code(), StatusCode::kCancelled) << status.toString();
}

TEST_F(RestKubeApiIntegration, WatchEndsWhenTheServerTimesOut) {
  ListOptions options;
  options.label_selector = selectorFor("short-watch");
  options.timeout_seconds = 1;
  const Clock::TimePoint started = RealClock::instance().now();
  Status status = api_->watchResourceSlices(options, [](const auto&) { return true; }, {});
  EXPECT_TRUE(status.ok()) << status.toString();
  EXPECT_LT(RealClock::instance().now() - started, std::chrono::seconds(20));
}

TEST_F(RestKubeApiIntegration, InvalidSliceIsUnprocessableWithCauses) {
  ResourceSlice bad = newSlice("invalid");
  bad.spec.driver = "";
  bad.spec.devices[0].edit([&](client::Device& d_) { d_.name = "Not_A_Valid_Name"; });
  auto created = api_->createResourceSlice(bad);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kUnprocessable) << created.status().toString();
  EXPECT_EQ(created.status().reason(), "Invalid");
  std::set<std::string> fields;
  const Status error = created.status();
  for (const auto& d : error.details()) {
    fields.insert(d.field);
  }
  EXPECT_TRUE(fields.count("spec.driver")) << created.status().toString();
  EXPECT_TRUE(fields.count("spec.devices[0].name")) << created.status().toString();
}

TEST_F(RestKubeApiIntegration, TokensWithoutRightsAreRefused) {
  const ClusterEnvironment& cluster = ClusterEnvironment::get();
  ClientConfig nobody;
  nobody.server = cluster.server();
  nobody.ca_pem = config_.ca_pem;
  nobody.bearer_token = cluster.token("nobody");
  std::unique_ptr<CpprestTransport> transport;
  auto api = makeApi(nobody, &transport);
  ASSERT_NE(api, nullptr);
  auto list = api->listResourceSlices({});
  EXPECT_EQ(list.status().code(), StatusCode::kPermissionDenied) << list.status().toString();
  EXPECT_THAT(list.status().message(), HasSubstr("list ResourceSlices: "));

  ClientConfig stranger = nobody;
  stranger.bearer_token = "not-a-token";
  auto api2 = makeApi(stranger, &transport);
  ASSERT_NE(api2, nullptr);
  EXPECT_EQ(api2->listResourceSlices({}).status().code(), StatusCode::kUnauthenticated);
}

TEST_F(RestKubeApiIntegration, RotatedTokenFileIsReadAgainAfterA401) {
  const ClusterEnvironment& cluster = ClusterEnvironment::get();
  const std::filesystem::path token_file = cluster.dir() / "rotating-token";
  std::ofstream(token_file) << "expired-token\n";
  ClientConfig rotating;
  rotating.server = cluster.server();
  rotating.ca_pem = config_.ca_pem;
  rotating.token_file = token_file.string();
  std::unique_ptr<CpprestTransport> transport;
  auto api = makeApi(rotating, &transport);
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->getNode("x").status().code(), StatusCode::kUnauthenticated);

  // The kubelet writes a new token; the next 401 makes the transport read
  // it at once instead of waiting for the minute to pass.
  std::ofstream(token_file) << cluster.token("admin") << "\n";
  auto node = api->getNode("rsc-it-no-such-node");
  EXPECT_EQ(node.status().code(), StatusCode::kNotFound) << node.status().toString();
}

// The release decides where counter sets go (counterPlacementFor).
TEST_F(RestKubeApiIntegration, TheServerVersionIsRead) {
  StatusOr<ServerVersion> version = api_->getServerVersion();
  ASSERT_TRUE(version.ok()) << version.status().toString();
  EXPECT_EQ(version->majorNumber(), 1);
  EXPECT_GE(version->minorNumber(), 34);
  EXPECT_EQ(version->git_version.rfind("v1." + std::to_string(version->minorNumber()) + ".", 0), 0U)
      << version->git_version;
}

// Counts the opens of a file while it lives, by any thread or process and
// through any path (inotify). Opens between two calls of opens() may count
// as one: inotify merges identical events that are not yet read.
class OpenCounter {
 public:
  explicit OpenCounter(const std::string& path)
      : fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)),
        watch_(fd_ < 0 ? -1 : inotify_add_watch(fd_, path.c_str(), IN_OPEN)) {}
  ~OpenCounter() {
    if (fd_ >= 0) close(fd_);
  }
  bool watching() const { return watch_ >= 0; }
  int opens() {
    alignas(inotify_event) char buf[4096];
    for (ssize_t n; (n = read(fd_, buf, sizeof buf)) > 0;) {
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buf + at);
        if (event->mask & IN_OPEN) ++opens_;
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
    return opens_;
  }

 private:
  int fd_;
  int watch_;
  int opens_ = 0;
};

// Sends `per_thread` GETs from each of `threads` threads at once, so that the
// transport opens several new connections; returns the codes seen.
std::multiset<int> getConcurrently(CpprestTransport& transport, int threads, int per_thread) {
  std::mutex mu;
  std::multiset<int> codes;
  std::vector<std::jthread> senders;
  for (int t = 0; t < threads; ++t) {
    senders.emplace_back([&] {
      for (int i = 0; i < per_thread; ++i) {
        HttpRequest req;
        req.path_and_query = "/version";
        StatusOr<HttpResponse> got = transport.send(req);
        std::lock_guard lock(mu);
        codes.insert(got.ok() ? got->code : 0);
      }
    });
  }
  senders.clear();
  return codes;
}

// cpprest loads OpenSSL's default trust store (the system's CA bundle) into
// every new connection, which cost about 23 ms of CPU each and made eight
// concurrent slice writes slower than one at a time. With a configured CA
// the system bundle is not read at all; without one it is read once in the
// process, however many connections open.
TEST_F(RestKubeApiIntegration, NewConnectionsDoNotReadTheSystemTrustStore) {
  OpenCounter bundle(X509_get_default_cert_file());
  if (!bundle.watching()) {
    GTEST_SKIP() << "no system CA bundle at " << X509_get_default_cert_file();
  }
  auto configured = CpprestTransport::create(config_, RealClock::instance());
  ASSERT_TRUE(configured.ok()) << configured.status().toString();
  const std::multiset<int> codes = getConcurrently(**configured, 8, 3);
  EXPECT_EQ(codes.count(200), 24u) << "codes: " << ::testing::PrintToString(codes);
  EXPECT_EQ(bundle.opens(), 0);

  // Without a CA the system store verifies the server (which it does not
  // know): every connection fails its handshake, and the bundle is read at
  // most once (not at all if an earlier test of this process read it). One
  // new connection at a time, counting in between: inotify merges identical
  // events that are not yet read.
  ClientConfig system = config_;
  system.ca_pem.clear();
  for (int round = 0; round < 3; ++round) {
    auto t = CpprestTransport::create(system, RealClock::instance());
    ASSERT_TRUE(t.ok()) << t.status().toString();
    EXPECT_EQ(getConcurrently(**t, 1, 1), std::multiset<int>{0});
    EXPECT_LE(bundle.opens(), 1) << "round " << round;
  }
}

TEST_F(RestKubeApiIntegration, WrongCertificateAuthorityFailsTheHandshake) {
  ClientConfig other = config_;
  // The client certificate as trust anchor: a valid PEM that did not sign
  // the server's certificate.
  other.ca_pem = config_.client_cert_pem;
  auto transport = CpprestTransport::create(other, RealClock::instance());
  ASSERT_TRUE(transport.ok()) << transport.status().toString();
  RestKubeApiOptions no_retries;
  no_retries.max_retries = 0;
  auto quick = RestKubeApi::create(**transport, RealClock::instance(), no_retries);
  ASSERT_TRUE(quick.ok());
  auto got = (*quick)->getNode("x");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().toString();
  EXPECT_EQ(got.status().reason(), kReasonRequestNotSent) << got.status().toString();
}

TEST_F(RestKubeApiIntegration, ConnectionRefusedIsRequestNotSent) {
  ClientConfig closed = config_;
  closed.server = "https://127.0.0.1:1";  // nothing listens on port 1
  auto t = CpprestTransport::create(closed, RealClock::instance());
  ASSERT_TRUE(t.ok());
  HttpRequest req;
  req.path_and_query = "/version";
  auto response = (*t)->send(req);
  ASSERT_FALSE(response.ok());
  EXPECT_EQ(response.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(response.status().reason(), kReasonRequestNotSent) << response.status().toString();
}

TEST_F(RestKubeApiIntegration, LeaseCreateGetUpdate) {
  Lease lease;
  lease.metadata.name = "rsc-it-leader";
  lease.metadata.namespace_ = "default";
  lease.spec.holder_identity = "replica-a";
  lease.spec.lease_duration_seconds = 15;
  lease.spec.acquire_time = formatMicroTime(RealClock::instance().systemNow());
  lease.spec.renew_time = lease.spec.acquire_time;
  lease.spec.lease_transitions = 0;
  auto created = api_->createLease(lease);
  ASSERT_TRUE(created.ok()) << created.status().toString();
  auto duplicate = api_->createLease(lease);
  EXPECT_EQ(duplicate.status().code(), StatusCode::kAlreadyExists) << duplicate.status().toString();

  auto got = api_->getLease("default", "rsc-it-leader");
  ASSERT_TRUE(got.ok()) << got.status().toString();
  EXPECT_EQ(got->spec.holder_identity, "replica-a");
  EXPECT_EQ(got->spec.lease_duration_seconds, 15);
  EXPECT_EQ(got->spec.renew_time, lease.spec.renew_time);

  Lease next = *got;
  next.spec.holder_identity = "replica-b";
  next.spec.lease_transitions = 1;
  auto updated = api_->updateLease(next);
  ASSERT_TRUE(updated.ok()) << updated.status().toString();
  EXPECT_EQ(updated->spec.holder_identity, "replica-b");
  auto stale = api_->updateLease(next);
  EXPECT_EQ(stale.status().code(), StatusCode::kConflict) << stale.status().toString();

  EXPECT_EQ(api_->getLease("default", "rsc-it-absent").status().code(), StatusCode::kNotFound);
}

TEST_F(RestKubeApiIntegration, NodeIsReadWithItsUid) {
  EXPECT_EQ(api_->getNode("rsc-it-node").status().code(), StatusCode::kNotFound);
  HttpResponse made =
      raw("POST", "/api/v1/nodes",
          {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "rsc-it-node"}}}});
  ASSERT_EQ(made.code, 201) << made.body;
  auto node = api_->getNode("rsc-it-node");
  ASSERT_TRUE(node.ok()) << node.status().toString();
  EXPECT_EQ(node->metadata.uid, Json::parse(made.body)["metadata"]["uid"].get<std::string>());
  raw("DELETE", "/api/v1/nodes/rsc-it-node", Json::object());
}

TEST_F(RestKubeApiIntegration, TokenReviewOfAnIssuedToken) {
  // A ServiceAccount and a token for it, as the kubelet would request one.
  HttpResponse sa = raw("POST", "/api/v1/namespaces/default/serviceaccounts",
                        {{"apiVersion", "v1"},
                         {"kind", "ServiceAccount"},
                         {"metadata", {{"name", "rsc-it-driver"}}}});
  ASSERT_EQ(sa.code, 201) << sa.body;
  HttpResponse issued =
      raw("POST", "/api/v1/namespaces/default/serviceaccounts/rsc-it-driver/token",
          {{"apiVersion", "authentication.k8s.io/v1"},
           {"kind", "TokenRequest"},
           {"spec", {{"audiences", {"rsc-it"}}, {"expirationSeconds", 600}}}});
  ASSERT_EQ(issued.code, 201) << issued.body;
  const std::string token = Json::parse(issued.body)["status"]["token"].get<std::string>();

  TokenReview review;
  review.token = token;
  review.audiences = {"rsc-it"};
  auto reviewed = api_->createTokenReview(review);
  ASSERT_TRUE(reviewed.ok()) << reviewed.status().toString();
  EXPECT_TRUE(reviewed->authenticated) << reviewed->error;
  EXPECT_EQ(reviewed->user.username, "system:serviceaccount:default:rsc-it-driver");
  EXPECT_THAT(reviewed->user.groups, ::testing::Contains("system:serviceaccounts:default"));
  EXPECT_EQ(reviewed->status_audiences, std::vector<std::string>{"rsc-it"});

  // The wrong audience and a made-up token are not authenticated.
  review.audiences = {"someone-else"};
  auto wrong_audience = api_->createTokenReview(review);
  ASSERT_TRUE(wrong_audience.ok()) << wrong_audience.status().toString();
  EXPECT_FALSE(wrong_audience->authenticated);
  review.token = "made-up";
  auto made_up = api_->createTokenReview(review);
  ASSERT_TRUE(made_up.ok()) << made_up.status().toString();
  EXPECT_FALSE(made_up->authenticated);
}

TEST_F(RestKubeApiIntegration, TokenOfAPodOnANodeCarriesTheNodeName) {
  // A Node, a ServiceAccount and a Pod on the node, and a token bound to the
  // pod as the kubelet would request it for a projected volume.
  ASSERT_EQ(raw("POST", "/api/v1/nodes",
                {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "rsc-it-node"}}}})
                .code,
            201);
  ASSERT_EQ(raw("POST", "/api/v1/namespaces/default/serviceaccounts",
                {{"apiVersion", "v1"},
                 {"kind", "ServiceAccount"},
                 {"metadata", {{"name", "rsc-it-pod-driver"}}}})
                .code,
            201);
  Json container = {{"name", "driver"}, {"image", "example.com/driver:1"}};
  HttpResponse pod = raw("POST", "/api/v1/namespaces/default/pods",
                         {{"apiVersion", "v1"},
                          {"kind", "Pod"},
                          {"metadata", {{"name", "rsc-it-driver-pod"}}},
                          {"spec",
                           {{"nodeName", "rsc-it-node"},
                            {"serviceAccountName", "rsc-it-pod-driver"},
                            {"automountServiceAccountToken", false},
                            {"containers", Json::array({container})}}}});
  ASSERT_EQ(pod.code, 201) << pod.body;
  const std::string uid = Json::parse(pod.body)["metadata"]["uid"].get<std::string>();
  HttpResponse issued = raw(
      "POST", "/api/v1/namespaces/default/serviceaccounts/rsc-it-pod-driver/token",
      {{"apiVersion", "authentication.k8s.io/v1"},
       {"kind", "TokenRequest"},
       {"spec",
        {{"audiences", {"rsc-it"}},
         {"expirationSeconds", 600},
         {"boundObjectRef",
          {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", "rsc-it-driver-pod"}, {"uid", uid}}}}}});
  ASSERT_EQ(issued.code, 201) << issued.body;

  TokenReview review;
  review.token = Json::parse(issued.body)["status"]["token"].get<std::string>();
  review.audiences = {"rsc-it"};
  auto reviewed = api_->createTokenReview(review);
  ASSERT_TRUE(reviewed.ok()) << reviewed.status().toString();
  ASSERT_TRUE(reviewed->authenticated) << reviewed->error;
  EXPECT_EQ(reviewed->user.extra["authentication.kubernetes.io/node-name"],
            std::vector<std::string>{"rsc-it-node"});
  EXPECT_EQ(reviewed->user.extra["authentication.kubernetes.io/pod-name"],
            std::vector<std::string>{"rsc-it-driver-pod"});
}

// cpprestsdk's timeout is an idle timeout per read: a quiet watch must
// outlive it, ending only when the server ends it.
TEST_F(RestKubeApiIntegration, QuietWatchOutlivesTheClientIdleTimeout) {
  auto t = CpprestTransport::create(config_, RealClock::instance());
  ASSERT_TRUE(t.ok());
  RestKubeApiOptions options;
  options.request_timeout = std::chrono::seconds(1);
  options.watch_idle_timeout = std::chrono::seconds(1);
  auto api = RestKubeApi::create(**t, RealClock::instance(), options);
  ASSERT_TRUE(api.ok());
  ListOptions watch;
  watch.label_selector = selectorFor("quiet-watch");
  watch.timeout_seconds = 4;
  const Clock::TimePoint started = RealClock::instance().now();
  Status status = (*api)->watchResourceSlices(watch, [](const auto&) { return true; }, {});
  const auto lasted = RealClock::instance().now() - started;
  EXPECT_TRUE(status.ok()) << status.toString();
  EXPECT_GE(lasted, std::chrono::milliseconds(3500))
      << "the watch ended before the server ended it";
}

TEST_F(RestKubeApiIntegration, SubjectAccessReviewFollowsRbac) {
  SubjectAccessReview review;
  review.user.username = "system:serviceaccount:default:rsc-it-nobody";
  review.user.groups = {"system:serviceaccounts", "system:authenticated"};
  review.verb = "create";
  review.group = "resource.k8s.io";
  review.resource = "resourceslices";
  auto denied = api_->createSubjectAccessReview(review);
  ASSERT_TRUE(denied.ok()) << denied.status().toString();
  EXPECT_FALSE(denied->allowed);

  review.user.groups.emplace_back("system:masters");
  auto allowed = api_->createSubjectAccessReview(review);
  ASSERT_TRUE(allowed.ok()) << allowed.status().toString();
  EXPECT_TRUE(allowed->allowed);
}

TEST_F(RestKubeApiIntegration, EventIsCreatedAndARepeatPatchesItsSeries) {
  Event event;
  event.metadata.generate_name = "rsc-it-";
  event.event_time = formatMicroTime(RealClock::instance().systemNow());
  event.reporting_controller = "resourceslice-controller";
  event.reporting_instance = "rsc-it";
  event.action = "Publish";
  event.reason = "Published";
  event.type = "Normal";
  event.note = "pool published";
  event.regarding = {kResourceApiVersion, "ResourceSlice", "", "some-slice", ""};
  StatusOr<Event> created = api_->createEvent(event);
  ASSERT_TRUE(created.ok()) << created.status().toString();
  EXPECT_EQ(created->metadata.namespace_, "default");
  EXPECT_FALSE(created->metadata.name.empty());
  EXPECT_FALSE(created->series.has_value());

  // A repeat sets the series; the server keeps the rest of the Event.
  EventSeries series;
  series.count = 2;
  series.last_observed_time = "2026-12-02T10:00:00.123456Z";
  StatusOr<Event> patched =
      api_->patchEventSeries(created->metadata.namespace_, created->metadata.name, series);
  ASSERT_TRUE(patched.ok()) << patched.status().toString();
  ASSERT_TRUE(patched->series.has_value());
  EXPECT_EQ(patched->series->count, 2);
  EXPECT_EQ(patched->series->last_observed_time, series.last_observed_time);
  EXPECT_EQ(patched->note, "pool published");
}

}  // namespace
}  // namespace rsc::client
