#include "client/rest_kube_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "test/fakes/fake_clock.h"

namespace rsc::client {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

// A retry's wait: `base` plus up to 20% jitter.
::testing::Matcher<Clock::Duration> jittered(Clock::Duration base) {
  return ::testing::AllOf(::testing::Ge(base), ::testing::Le(base + base / 5));
}

// A scripted HttpTransport: records every request and answers from queues.
class FakeTransport final : public HttpTransport {
 public:
  // A stream's answer: a head (or a failure to connect), the body chunks of
  // a 2xx, and how the stream ends after them.
  struct StreamScript {
    StatusOr<HttpResponse> head = HttpResponse{200, {}, ""};
    std::vector<std::string> chunks;
    Status end;  // non-OK: the connection breaks after the chunks
  };

  void reply(int code, std::string body = {}, std::map<std::string, std::string> headers = {}) {
    std::lock_guard lock(mu_);
    replies_.emplace_back(HttpResponse{code, std::move(headers), std::move(body)});
  }
  void fail(Status status) {
    std::lock_guard lock(mu_);
    replies_.emplace_back(std::move(status));
  }
  void script(StreamScript s) {
    std::lock_guard lock(mu_);
    streams_.push_back(std::move(s));
  }
  std::vector<HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  const HttpRequest& last() const { return requests_.back(); }
  size_t chunksDelivered() const { return chunks_delivered_; }

  StatusOr<HttpResponse> send(const HttpRequest& request) override {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    if (replies_.empty()) {
      return internalError("test: no reply scripted");
    }
    StatusOr<HttpResponse> r = std::move(replies_.front());
    replies_.pop_front();
    return r;
  }

  StatusOr<HttpResponse> stream(const HttpRequest& request,
                                const std::function<void(const HttpResponse&)>& on_head,
                                const std::function<bool(std::string_view)>& on_chunk,
                                std::stop_token stop) override {
    StreamScript s;
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
      if (streams_.empty()) {
        return internalError("test: no stream scripted");
      }
      s = std::move(streams_.front());
      streams_.pop_front();
    }
    if (!s.head.ok()) {
      return s.head;
    }
    HttpResponse head = *s.head;
    if (on_head) {
      on_head(head);
    }
    if (head.code < 200 || head.code >= 300) {
      return head;
    }
    for (const auto& chunk : s.chunks) {
      if (stop.stop_requested()) {
        return cancelled("stopped");
      }
      ++chunks_delivered_;
      if (!on_chunk(chunk)) {
        return head;
      }
    }
    if (!s.end.ok()) {
      return s.end;
    }
    return head;
  }

  std::string host() const override { return "api.test:6443"; }

 private:
  mutable std::mutex mu_;
  std::vector<HttpRequest> requests_;
  std::deque<StatusOr<HttpResponse>> replies_;
  std::deque<StreamScript> streams_;
  size_t chunks_delivered_ = 0;
};

std::string sliceJson(const std::string& name, const std::string& rv = "5") {
  return R"({"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":")" +
         name + R"(","uid":"uid-)" + name + R"(","resourceVersion":")" + rv +
         R"("},"spec":{"driver":"gpu.example.com","nodeName":"node-a",)"
         R"("pool":{"name":"node-a","generation":1,"resourceSliceCount":1},)"
         R"("devices":[{"name":"gpu-0"}]}})";
}

ResourceSlice slice(const std::string& name, const std::string& rv = "") {
  ResourceSlice s;
  s.metadata.name = name;
  s.metadata.resource_version = rv;
  s.spec.driver = "gpu.example.com";
  s.spec.node_name = "node-a";
  s.spec.pool = {"node-a", 1, 1};
  Device d;
  d.name = "gpu-0";
  s.spec.devices.push_back(d);
  return s;
}

std::string statusJson(int code, const std::string& reason, const std::string& message) {
  return Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"code", code},     {"reason", reason},   {"message", message}}
      .dump();
}

class RestKubeApiTest : public ::testing::Test {
 protected:
  RestKubeApiTest() { rebuild({}); }

  void rebuild(RestKubeApiOptions options) {
    if (options.qps == kDefaultQps) {
      options.qps = 0;  // no rate-limit sleeps unless asked
    }
    options.request_observer = [this](const RequestResult& r) { observed_.push_back(r); };
    auto created = RestKubeApi::create(transport_, clock_, std::move(options));
    ASSERT_TRUE(created.ok()) << created.status().toString();
    api_ = std::move(*created);
  }

  Clock::Duration slept() const {
    Clock::Duration total{};
    for (auto d : clock_.sleeps()) {
      total += d;
    }
    return total;
  }

  FakeTransport transport_;
  testing::FakeClock clock_;
  std::vector<RequestResult> observed_;
  std::unique_ptr<RestKubeApi> api_;
};

// ---------------------------------------------------------------------------
// Paths, queries and bodies.

TEST(RestKubeApiQuery, EncodesEveryListOption) {
  ListOptions o;
  o.label_selector = "app.kubernetes.io/managed-by=resourceslice-controller,tier in (a,b)";
  o.field_selector = "spec.nodeName=node-a,spec.driver!=x";
  o.resource_version = "123";
  o.resource_version_match = "NotOlderThan";
  o.limit = 2;
  o.continue_token = "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ==/+";
  o.timeout_seconds = 300;         // watch only
  o.allow_watch_bookmarks = true;  // watch only
  EXPECT_EQ(RestKubeApi::listQuery(o, /*watch=*/false),
            "?labelSelector=app.kubernetes.io%2Fmanaged-by%3Dresourceslice-controller%2Ctier%20in"
            "%20%28a%2Cb%29&fieldSelector=spec.nodeName%3Dnode-a%2Cspec.driver%21%3Dx"
            "&resourceVersion=123&resourceVersionMatch=NotOlderThan&limit=2"
            "&continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ%3D%3D%2F%2B");
  o.resource_version_match.clear();
  EXPECT_EQ(RestKubeApi::listQuery(o, /*watch=*/true),
            "?watch=1&labelSelector=app.kubernetes.io%2Fmanaged-by%3Dresourceslice-controller%2C"
            "tier%20in%20%28a%2Cb%29&fieldSelector=spec.nodeName%3Dnode-a%2Cspec.driver%21%3Dx"
            "&resourceVersion=123&allowWatchBookmarks=true&timeoutSeconds=300");
  EXPECT_EQ(RestKubeApi::listQuery(ListOptions{}, false), "");
  ListOptions any;
  any.resource_version = "0";
  EXPECT_EQ(RestKubeApi::listQuery(any, false), "?resourceVersion=0");
}

TEST(RestKubeApiQuery, UrlEncodeKeepsOnlyUnreserved) {
  EXPECT_EQ(RestKubeApi::urlEncode("aZ09-_.~"), "aZ09-_.~");
  EXPECT_EQ(RestKubeApi::urlEncode("a b/c?d&e=f%\xC3\xA9"), "a%20b%2Fc%3Fd%26e%3Df%25%C3%A9");
}

TEST_F(RestKubeApiTest, GetResourceSliceReadsTheItemPath) {
  transport_.reply(200, sliceJson("s1", "42"));
  auto got = api_->getResourceSlice("s1");
  ASSERT_TRUE(got.ok()) << got.status().toString();
  EXPECT_EQ(got->metadata.name, "s1");
  EXPECT_EQ(got->metadata.resource_version, "42");
  EXPECT_EQ(got->spec.driver, "gpu.example.com");
  ASSERT_EQ(transport_.requests().size(), 1u);
  EXPECT_EQ(transport_.last().method, "GET");
  EXPECT_EQ(transport_.last().path_and_query, "/apis/resource.k8s.io/v1/resourceslices/s1");
  EXPECT_TRUE(transport_.last().body.empty());
}

TEST_F(RestKubeApiTest, NotFoundGainsContext) {
  transport_.reply(
      404, statusJson(404, "NotFound", "resourceslices.resource.k8s.io \"gone\" not found"));
  auto got = api_->getResourceSlice("gone");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(got.status().message(),
            "get ResourceSlice gone: resourceslices.resource.k8s.io \"gone\" not found");
  EXPECT_TRUE(clock_.sleeps().empty());
}

TEST_F(RestKubeApiTest, AnAnswerThatDoesNotDecodeIsInternalAndNamesTheCall) {
  // Whatever code the decoder chose: the caller's input was fine.
  transport_.reply(200, R"({"metadata":"not an object"})");
  auto slice = api_->getResourceSlice("s1");
  ASSERT_FALSE(slice.ok());
  EXPECT_EQ(slice.status().code(), StatusCode::kInternal);
  EXPECT_THAT(slice.status().message(),
              ::testing::StartsWith("get ResourceSlice s1: cannot decode the answer: "));

  transport_.reply(200, R"({"metadata":"not an object"})");
  auto lease = api_->getLease("kube-system", "leader");
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().code(), StatusCode::kInternal);
  EXPECT_THAT(lease.status().message(),
              ::testing::StartsWith("get Lease kube-system/leader: cannot decode the answer: "));

  transport_.reply(200, "not JSON");
  auto node = api_->getNode("n1");
  EXPECT_EQ(node.status().code(), StatusCode::kInternal);
  EXPECT_EQ(node.status().message(), "get Node n1: the API server's answer is not JSON");

  transport_.reply(200, "not JSON");
  Status deleted = api_->deleteResourceSlice("s1", {});
  EXPECT_EQ(deleted.code(), StatusCode::kInternal);
  EXPECT_EQ(deleted.message(), "delete ResourceSlice s1: the API server's answer is not JSON");
  transport_.reply(200, "{}");
  EXPECT_TRUE(api_->deleteResourceSlice("s1", {}).ok());
}

TEST_F(RestKubeApiTest, ListDecodesPageMetadata) {
  transport_.reply(200, R"({"kind":"ResourceSliceList","apiVersion":"resource.k8s.io/v1",
      "metadata":{"resourceVersion":"77","continue":"next-page","remainingItemCount":3},
      "items":[)" + sliceJson("a") +
                            "," + sliceJson("b") + "]}");
  ListOptions o;
  o.label_selector = "x=y";
  o.limit = 2;
  auto list = api_->listResourceSlices(o);
  ASSERT_TRUE(list.ok()) << list.status().toString();
  EXPECT_EQ(transport_.last().path_and_query,
            "/apis/resource.k8s.io/v1/resourceslices?labelSelector=x%3Dy&limit=2");
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[1].metadata.name, "b");
  EXPECT_EQ(list->resource_version, "77");
  EXPECT_EQ(list->continue_token, "next-page");
  EXPECT_EQ(list->remaining_item_count, 3);
}

TEST_F(RestKubeApiTest, ListWithABadItemIsInternal) {
  transport_.reply(200, R"({"metadata":{"resourceVersion":"1"},"items":[{"metadata":5}]})");
  auto list = api_->listResourceSlices({});
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), StatusCode::kInternal);
  EXPECT_THAT(list.status().message(), HasSubstr("list ResourceSlices: cannot decode items[0]"));
}

TEST_F(RestKubeApiTest, CreatePostsTheSliceWithTypeMeta) {
  transport_.reply(201, sliceJson("s1", "1"));
  auto created = api_->createResourceSlice(slice("s1"));
  ASSERT_TRUE(created.ok()) << created.status().toString();
  EXPECT_EQ(created->metadata.uid, "uid-s1");
  const HttpRequest& req = transport_.last();
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path_and_query, "/apis/resource.k8s.io/v1/resourceslices");
  EXPECT_THAT(req.headers, ::testing::Contains(std::pair<std::string, std::string>(
                               "Content-Type", "application/json")));
  Json body = Json::parse(req.body);
  EXPECT_EQ(body["apiVersion"], "resource.k8s.io/v1");
  EXPECT_EQ(body["kind"], "ResourceSlice");
  EXPECT_EQ(body["metadata"]["name"], "s1");
  EXPECT_EQ(body["spec"]["devices"][0]["name"], "gpu-0");
}

TEST_F(RestKubeApiTest, UpdatePutsToTheNameAndNeedsAResourceVersion) {
  auto refused = api_->updateResourceSlice(slice("s1"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "update ResourceSlice s1: metadata.resourceVersion is required");
  EXPECT_TRUE(transport_.requests().empty());

  transport_.reply(200, sliceJson("s1", "8"));
  auto updated = api_->updateResourceSlice(slice("s1", "7"));
  ASSERT_TRUE(updated.ok()) << updated.status().toString();
  EXPECT_EQ(updated->metadata.resource_version, "8");
  EXPECT_EQ(transport_.last().method, "PUT");
  EXPECT_EQ(transport_.last().path_and_query, "/apis/resource.k8s.io/v1/resourceslices/s1");
  EXPECT_EQ(Json::parse(transport_.last().body)["metadata"]["resourceVersion"], "7");
}

TEST_F(RestKubeApiTest, ConflictIsNotRetried) {
  transport_.reply(409,
                   statusJson(409, "Conflict",
                              "Operation cannot be fulfilled on resourceslices.resource.k8s.io "
                              "\"s1\": the object has been modified"));
  auto updated = api_->updateResourceSlice(slice("s1", "7"));
  ASSERT_FALSE(updated.ok());
  EXPECT_EQ(updated.status().code(), StatusCode::kConflict);
  EXPECT_EQ(updated.status().reason(), "Conflict");
  EXPECT_EQ(updated.status().message(),
            "update ResourceSlice s1: Operation cannot be fulfilled on "
            "resourceslices.resource.k8s.io \"s1\": the object has been modified");
  EXPECT_EQ(transport_.requests().size(), 1u);
  EXPECT_TRUE(clock_.sleeps().empty());
}

TEST_F(RestKubeApiTest, InvalidKeepsFieldErrors) {
  transport_.reply(422, R"({"kind":"Status","code":422,"reason":"Invalid","message":"bad",
      "details":{"causes":[{"reason":"FieldValueRequired","message":"Required value","field":"spec.driver"}]}})");
  auto created = api_->createResourceSlice(slice("s1"));
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kUnprocessable);
  ASSERT_EQ(created.status().details().size(), 1u);
  EXPECT_EQ(created.status().details()[0].field, "spec.driver");
  EXPECT_EQ(transport_.requests().size(), 1u);
}

TEST_F(RestKubeApiTest, DeleteSendsPreconditions) {
  transport_.reply(200, R"({"kind":"Status","status":"Success"})");
  Status s = api_->deleteResourceSlice("s1", Preconditions{"uid-1", "9"});
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(transport_.last().method, "DELETE");
  EXPECT_EQ(transport_.last().path_and_query, "/apis/resource.k8s.io/v1/resourceslices/s1");
  EXPECT_EQ(Json::parse(transport_.last().body),
            Json::parse(R"({"apiVersion":"v1","kind":"DeleteOptions",
                "preconditions":{"uid":"uid-1","resourceVersion":"9"}})"));

  transport_.reply(409, statusJson(409, "Conflict", "Precondition failed: UID in precondition: x"));
  s = api_->deleteResourceSlice("s1", Preconditions{"x", std::nullopt});
  EXPECT_EQ(s.code(), StatusCode::kConflict);
  EXPECT_EQ(s.message(), "delete ResourceSlice s1: Precondition failed: UID in precondition: x");
  EXPECT_EQ(Json::parse(transport_.last().body)["preconditions"], Json::parse(R"({"uid":"x"})"));
}

TEST_F(RestKubeApiTest, EmptyNamesNeverReachTheCollection) {
  EXPECT_EQ(api_->deleteResourceSlice("", {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_->getResourceSlice("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_->getNode("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_->getLease("ns", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(api_->getLease("", "x").status().code(), StatusCode::kInvalidArgument);
  ResourceSlice nameless = slice("");
  EXPECT_EQ(api_->createResourceSlice(nameless).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(transport_.requests().empty());
}

TEST_F(RestKubeApiTest, DeleteCollectionNeedsASelector) {
  Status s = api_->deleteResourceSlices({});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(transport_.requests().empty());

  transport_.reply(200, R"({"kind":"ResourceSliceList","items":[]})");
  ListOptions o;
  o.field_selector = "spec.nodeName=node-a";
  o.label_selector = "app.kubernetes.io/managed-by=resourceslice-controller";
  ASSERT_TRUE(api_->deleteResourceSlices(o).ok());
  EXPECT_EQ(transport_.last().method, "DELETE");
  EXPECT_EQ(transport_.last().path_and_query,
            "/apis/resource.k8s.io/v1/resourceslices?labelSelector=app.kubernetes.io%2F"
            "managed-by%3Dresourceslice-controller&fieldSelector=spec.nodeName%3Dnode-a");
}

TEST_F(RestKubeApiTest, LeaseNodeReviewAndEventPaths) {
  const std::string lease = R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",
      "metadata":{"name":"leader","namespace":"kube-system","resourceVersion":"3"},
      "spec":{"holderIdentity":"me","leaseDurationSeconds":15}})";
  transport_.reply(200, lease);
  auto got = api_->getLease("kube-system", "leader");
  ASSERT_TRUE(got.ok()) << got.status().toString();
  EXPECT_EQ(got->spec.holder_identity, "me");
  EXPECT_EQ(transport_.last().path_and_query,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/leader");

  transport_.reply(201, lease);
  ASSERT_TRUE(api_->createLease(*got).ok());
  EXPECT_EQ(transport_.last().method, "POST");
  EXPECT_EQ(transport_.last().path_and_query,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases");

  transport_.reply(200, lease);
  ASSERT_TRUE(api_->updateLease(*got).ok());
  EXPECT_EQ(transport_.last().method, "PUT");
  EXPECT_EQ(transport_.last().path_and_query,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/leader");
  Lease no_rv = *got;
  no_rv.metadata.resource_version.clear();
  EXPECT_EQ(api_->updateLease(no_rv).status().code(), StatusCode::kInvalidArgument);

  transport_.reply(
      200, R"({"kind":"Node","apiVersion":"v1","metadata":{"name":"n1","uid":"node-uid"}})");
  auto node = api_->getNode("n1");
  ASSERT_TRUE(node.ok()) << node.status().toString();
  EXPECT_EQ(node->metadata.uid, "node-uid");
  EXPECT_EQ(transport_.last().path_and_query, "/api/v1/nodes/n1");

  transport_.reply(201, R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",
      "status":{"authenticated":true,"user":{"username":"system:serviceaccount:ns:sa"}}})");
  TokenReview review;
  review.token = "tok";
  review.audiences = {"aud"};
  auto reviewed = api_->createTokenReview(review);
  ASSERT_TRUE(reviewed.ok()) << reviewed.status().toString();
  EXPECT_TRUE(reviewed->authenticated);
  EXPECT_EQ(reviewed->user.username, "system:serviceaccount:ns:sa");
  EXPECT_EQ(transport_.last().path_and_query, "/apis/authentication.k8s.io/v1/tokenreviews");
  EXPECT_EQ(Json::parse(transport_.last().body)["spec"]["token"], "tok");

  transport_.reply(201, R"({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview",
      "status":{"allowed":true,"reason":"RBAC"}})");
  SubjectAccessReview sar;
  sar.user.username = "u";
  sar.verb = "publish";
  sar.resource = "drivers";
  auto allowed = api_->createSubjectAccessReview(sar);
  ASSERT_TRUE(allowed.ok()) << allowed.status().toString();
  EXPECT_TRUE(allowed->allowed);
  EXPECT_EQ(transport_.last().path_and_query, "/apis/authorization.k8s.io/v1/subjectaccessreviews");
  EXPECT_EQ(Json::parse(transport_.last().body)["kind"], "SubjectAccessReview");

  transport_.reply(201, "{}");
  Event event;
  event.metadata.generate_name = "slice-";
  event.reason = "Published";
  ASSERT_TRUE(api_->createEvent(event).ok());
  EXPECT_EQ(transport_.last().path_and_query, "/apis/events.k8s.io/v1/namespaces/default/events");
  EXPECT_EQ(Json::parse(transport_.last().body)["metadata"]["namespace"], "default");

  // A repeat is a merge patch of the series alone.
  transport_.reply(200,
                   R"({"metadata":{"name":"slice-1","namespace":"default"},)"
                   R"("series":{"count":2,"lastObservedTime":"2026-12-02T10:00:00.000000Z"}})");
  EventSeries series;
  series.count = 2;
  series.last_observed_time = "2026-12-02T10:00:00.000000Z";
  StatusOr<Event> patched = api_->patchEventSeries("default", "slice-1", series);
  ASSERT_TRUE(patched.ok()) << patched.status().toString();
  ASSERT_TRUE(patched->series.has_value());
  EXPECT_EQ(patched->series->count, 2);
  EXPECT_EQ(transport_.last().method, "PATCH");
  EXPECT_EQ(transport_.last().path_and_query,
            "/apis/events.k8s.io/v1/namespaces/default/events/slice-1");
  EXPECT_EQ(
      Json::parse(transport_.last().body),
      Json::parse(R"({"series":{"count":2,"lastObservedTime":"2026-12-02T10:00:00.000000Z"}})"));
  bool merge_patch = false;
  for (const auto& [header, value] : transport_.last().headers) {
    merge_patch =
        merge_patch || (header == "Content-Type" && value == "application/merge-patch+json");
  }
  EXPECT_TRUE(merge_patch);
}

// ---------------------------------------------------------------------------
// Retries and rate limiting.

TEST_F(RestKubeApiTest, RetriesTooManyRequestsAfterRetryAfter) {
  transport_.reply(429, "Too many requests, please try again later.\n", {{"retry-after", "3"}});
  transport_.reply(201, sliceJson("s1"));
  auto created = api_->createResourceSlice(slice("s1"));
  ASSERT_TRUE(created.ok()) << created.status().toString();
  EXPECT_EQ(transport_.requests().size(), 2u);
  EXPECT_EQ(clock_.sleeps(), std::vector<Clock::Duration>{seconds(3)});
  ASSERT_EQ(observed_.size(), 2u);
  EXPECT_EQ(observed_[0].code, 429);
  EXPECT_EQ(observed_[1].code, 201);
  EXPECT_EQ(observed_[1].verb, "POST");
  EXPECT_EQ(observed_[1].host, "api.test:6443");
}

// A 429 slows every caller, not only the one it answered: a request that
// starts while the API server's Retry-After runs waits it out before it is
// sent, though it was never refused itself.
TEST_F(RestKubeApiTest, TooManyRequestsHoldsEveryCallerForItsRetryAfter) {
  RestKubeApiOptions options;
  options.max_retries = 0;  // the refused call gives up at once, and holds the rest
  rebuild(options);
  transport_.reply(429, "Too many requests, please try again later.\n", {{"retry-after", "3"}});
  EXPECT_FALSE(api_->createResourceSlice(slice("s1")).ok());
  EXPECT_TRUE(clock_.sleeps().empty());

  const Clock::TimePoint asked = clock_.now();
  transport_.reply(200, sliceJson("s2"));
  ASSERT_TRUE(api_->getResourceSlice("s2").ok());
  EXPECT_EQ(clock_.sleeps(), std::vector<Clock::Duration>{seconds(3)});
  EXPECT_EQ(clock_.now() - asked, seconds(3)) << "sent when the hold ended";

  // Once it is over, nobody waits.
  transport_.reply(200, sliceJson("s3"));
  ASSERT_TRUE(api_->getResourceSlice("s3").ok());
  EXPECT_EQ(clock_.sleeps().size(), 1U);
}

TEST_F(RestKubeApiTest, RetryAfterIsCapped) {
  RestKubeApiOptions options;
  options.call_timeout = std::chrono::minutes(5);
  rebuild(options);
  transport_.reply(429, "", {{"retry-after", "3600"}});
  transport_.reply(200, sliceJson("s1"));
  ASSERT_TRUE(api_->getResourceSlice("s1").ok());
  EXPECT_EQ(clock_.sleeps(), std::vector<Clock::Duration>{seconds(60)});
}

TEST_F(RestKubeApiTest, RetriesUnavailableWithExponentialJitteredBackoff) {
  transport_.reply(503, statusJson(503, "ServiceUnavailable", "etcd is down"));
  transport_.fail(Status(StatusCode::kUnavailable, "connection reset", {}, kReasonConnectionLost));
  transport_.reply(500, "oops", {{"retry-after", "not a number"}});
  transport_.reply(200, sliceJson("s1"));
  auto got = api_->getResourceSlice("s1");
  ASSERT_TRUE(got.ok()) << got.status().toString();
  EXPECT_THAT(clock_.sleeps(),
              ::testing::ElementsAre(jittered(milliseconds(100)), jittered(milliseconds(200)),
                                     jittered(milliseconds(400))));
  ASSERT_EQ(observed_.size(), 4u);
  EXPECT_EQ(observed_[1].code, RequestResult::kNoResponse);
}

TEST_F(RestKubeApiTest, BackoffStopsAtTheCap) {
  RestKubeApiOptions options;
  options.max_retries = 10;
  options.backoff_base = milliseconds(100);
  options.backoff_cap = seconds(1);
  rebuild(options);
  for (int i = 0; i < 10; ++i) {
    transport_.reply(503);
  }
  transport_.reply(200, sliceJson("s1"));
  ASSERT_TRUE(api_->getResourceSlice("s1").ok());
  auto sleeps = clock_.sleeps();
  ASSERT_EQ(sleeps.size(), 10u);
  EXPECT_THAT(std::vector(sleeps.begin() + 4, sleeps.end()), ::testing::Each(jittered(seconds(1))));
}

TEST_F(RestKubeApiTest, GivesUpAfterMaxRetries) {
  for (int i = 0; i < 6; ++i) {
    transport_.reply(503, "busy");
  }
  auto got = api_->getResourceSlice("s1");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(got.status().message(), "get ResourceSlice s1: HTTP 503: busy (after 6 attempts)");
  EXPECT_EQ(transport_.requests().size(), 6u);
  EXPECT_EQ(clock_.sleeps().size(), 5u);
}

TEST_F(RestKubeApiTest, NoRetryStartsThatWouldEndPastTheCallTimeout) {
  RestKubeApiOptions options;
  options.call_timeout = seconds(10);
  rebuild(options);
  for (int i = 0; i < 6; ++i) {
    transport_.reply(429, "slow down", {{"retry-after", "4"}});
  }
  const Clock::TimePoint start = clock_.now();
  auto got = api_->getResourceSlice("s1");
  ASSERT_FALSE(got.ok());
  // Attempts at 0 s, 4 s and 8 s; a fourth at 12 s would be past 10 s.
  EXPECT_EQ(transport_.requests().size(), 3u);
  EXPECT_EQ(clock_.now() - start, seconds(8));
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().toString();
  EXPECT_THAT(got.status().message(),
              HasSubstr("(after 3 attempts; no retry fits in the call timeout)"));
}

TEST_F(RestKubeApiTest, EveryRequestCarriesTheClientsStopToken) {
  std::stop_source stopping;
  RestKubeApiOptions options;
  options.stop = stopping.get_token();
  rebuild(options);
  transport_.reply(200, sliceJson("s1"));
  ASSERT_TRUE(api_->getResourceSlice("s1").ok());
  ASSERT_EQ(transport_.requests().size(), 1u);
  EXPECT_FALSE(transport_.last().stop.stop_requested());
  stopping.request_stop();
  // The transport cancels an exchange under way with this token.
  EXPECT_TRUE(transport_.last().stop.stop_requested());
  // And once stopped, no call reaches the transport.
  auto got = api_->getResourceSlice("s1");
  EXPECT_EQ(got.status().code(), StatusCode::kCancelled) << got.status().toString();
  EXPECT_EQ(transport_.requests().size(), 1u);
}

// A FakeClock that requests a stop once `after` sleeps have passed.
class StoppingClock final : public Clock {
 public:
  StoppingClock(testing::FakeClock& inner, std::stop_source& stop, int after)
      : inner_(inner), stop_(stop), left_(after) {}
  TimePoint now() const override { return inner_.now(); }
  SystemTime systemNow() const override { return inner_.systemNow(); }
  void sleepFor(Duration d) override {
    inner_.sleepFor(d);
    if (--left_ == 0) stop_.request_stop();
  }

 private:
  testing::FakeClock& inner_;
  std::stop_source& stop_;
  int left_;
};

TEST_F(RestKubeApiTest, AStopEndsARetryWaitAtOnce) {
  std::stop_source stopping;
  StoppingClock clock(clock_, stopping, /*after=*/3);
  RestKubeApiOptions options;
  options.qps = 0;
  options.stop = stopping.get_token();
  auto api = RestKubeApi::create(transport_, clock, options);
  ASSERT_TRUE(api.ok());
  transport_.reply(429, "", {{"retry-after", "20"}});
  transport_.reply(200, sliceJson("s1"));
  auto got = (*api)->getResourceSlice("s1");
  EXPECT_EQ(got.status().code(), StatusCode::kCancelled) << got.status().toString();
  EXPECT_THAT(got.status().message(), HasSubstr("stopped while waiting to retry"));
  // Three steps of the 20 s wait (the wait of a clock without its own), then nothing more.
  EXPECT_EQ(clock_.sleeps().size(), 3u);
  EXPECT_EQ(transport_.requests().size(), 1u);
}

TEST_F(RestKubeApiTest, GenerateNameCreateRetriesOnlyWhenNothingHappened) {
  ResourceSlice generated = slice("");
  generated.metadata.generate_name = "00000-gpu.example.com-node-a-";

  // A 503 or a lost connection may have created the slice: no retry.
  transport_.reply(503, "");
  auto created = api_->createResourceSlice(generated);
  EXPECT_EQ(created.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(created.status().message(),
              HasSubstr("create ResourceSlice 00000-gpu.example.com-node-a-: HTTP 503"));
  transport_.fail(Status(StatusCode::kUnavailable, "reset", {}, kReasonConnectionLost));
  EXPECT_FALSE(api_->createResourceSlice(generated).ok());
  transport_.fail(Status(StatusCode::kDeadlineExceeded, "timeout", {}, kReasonConnectionLost));
  EXPECT_FALSE(api_->createResourceSlice(generated).ok());
  EXPECT_EQ(transport_.requests().size(), 3u);
  EXPECT_TRUE(clock_.sleeps().empty());

  // A refused connection and a 429 did nothing on the server: retry.
  transport_.fail(Status(StatusCode::kUnavailable, "refused", {}, kReasonRequestNotSent));
  transport_.reply(429, "Too many requests", {{"retry-after", "1"}});
  transport_.reply(201, sliceJson("00000-gpu.example.com-node-a-x7k2p"));
  created = api_->createResourceSlice(generated);
  ASSERT_TRUE(created.ok()) << created.status().toString();
  EXPECT_EQ(created->metadata.name, "00000-gpu.example.com-node-a-x7k2p");
  EXPECT_EQ(transport_.requests().size(), 6u);
  EXPECT_EQ(clock_.sleeps().size(), 2u);
}

TEST_F(RestKubeApiTest, EveryAttemptTakesAToken) {
  RestKubeApiOptions options;
  options.qps = 2;
  options.burst = 1;
  rebuild(options);
  transport_.reply(200, sliceJson("a"));
  transport_.reply(200, sliceJson("b"));
  ASSERT_TRUE(api_->getResourceSlice("a").ok());
  EXPECT_TRUE(clock_.sleeps().empty());
  ASSERT_TRUE(api_->getResourceSlice("b").ok());
  EXPECT_EQ(clock_.sleeps(), std::vector<Clock::Duration>{milliseconds(500)});
}

TEST(RestKubeApiOptions, InvalidOptionsAreRefused) {
  FakeTransport transport;
  testing::FakeClock clock;
  auto with = [&](auto change) {
    RestKubeApiOptions o;
    change(o);
    return RestKubeApi::create(transport, clock, o).status().code();
  };
  EXPECT_EQ(with([](auto& o) { o.max_retries = -1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.backoff_base = Clock::Duration::zero(); }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.backoff_cap = milliseconds(1); }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.burst = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) { o.watch_idle_timeout = milliseconds(0); }),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](auto& o) {
              o.qps = 0;
              o.burst = 0;
            }),
            StatusCode::kOk);
}

// ---------------------------------------------------------------------------
// Watch.

std::string event(const std::string& type, const std::string& object) {
  return R"({"type":")" + type + R"(","object":)" + object + "}\n";
}

std::string bookmark(const std::string& rv) {
  return event("BOOKMARK", R"({"kind":"ResourceSlice","apiVersion":"resource.k8s.io/v1",)"
                           R"("metadata":{"resourceVersion":")" +
                               rv + R"("}})");
}

struct Seen {
  WatchEventType type;
  std::string name;
  std::string resource_version;
  StatusCode error = StatusCode::kOk;

  bool operator==(const Seen&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const Seen& s) {
    return os << static_cast<int>(s.type) << " " << s.name << "@" << s.resource_version << " "
              << statusCodeName(s.error);
  }
};

// A watch's options as the informer sends them: from `resource_version`, with
// bookmarks, ended by the server after `timeout_seconds`.
ListOptions watchFrom(const std::string& resource_version, int64_t timeout_seconds) {
  ListOptions o;
  o.resource_version = resource_version;
  o.allow_watch_bookmarks = true;
  o.timeout_seconds = timeout_seconds;
  return o;
}

template <typename T = ResourceSlice>
WatchHandler<T> recordInto(std::vector<Seen>& seen) {
  return [&seen](const WatchEvent<T>& e) {
    seen.push_back(
        {e.type, e.object.metadata.name, e.object.metadata.resource_version, e.error.code()});
    return true;
  };
}

// The watch tests script the server's stream; watch() watches it.
class RestKubeApiWatchTest : public RestKubeApiTest {
 protected:
  struct Watched {
    Status status;
    std::vector<Seen> seen;
  };
  // Scripts `stream` (after any the test scripted before) and watches
  // ResourceSlices with `options`: how the watch ended, and what it delivered.
  Watched watch(FakeTransport::StreamScript stream, const ListOptions& options = {}) {
    transport_.script(std::move(stream));
    Watched w;
    w.status = api_->watchResourceSlices(options, recordInto(w.seen), {});
    return w;
  }
};

TEST_F(RestKubeApiWatchTest, WatchDeliversEventsAcrossChunkBoundaries) {
  const std::string all = event("ADDED", sliceJson("a", "10")) +
                          event("MODIFIED", sliceJson("a", "11")) + bookmark("12") +
                          event("DELETED", sliceJson("a", "13"));
  // Cut the stream at awkward places: inside a string, between events, and
  // one byte at a time for a stretch.
  FakeTransport::StreamScript s;
  s.chunks = {all.substr(0, 7), all.substr(7, 60)};
  size_t pos = 67;
  for (int i = 0; i < 40; ++i, ++pos) {
    s.chunks.push_back(all.substr(pos, 1));
  }
  s.chunks.push_back(all.substr(pos));

  const Watched w = watch(s, watchFrom("9", 480));
  ASSERT_TRUE(w.status.ok()) << w.status.toString();
  EXPECT_EQ(w.seen, (std::vector<Seen>{{WatchEventType::kAdded, "a", "10"},
                                       {WatchEventType::kModified, "a", "11"},
                                       {WatchEventType::kBookmark, "", "12"},
                                       {WatchEventType::kDeleted, "a", "13"}}));

  const HttpRequest& req = transport_.last();
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.path_and_query,
            "/apis/resource.k8s.io/v1/resourceslices?watch=1&resourceVersion=9"
            "&allowWatchBookmarks=true&timeoutSeconds=480");
  // The idle timeout outlasts the server's own end of the watch.
  EXPECT_EQ(req.timeout, std::chrono::duration_cast<milliseconds>(seconds(480 + 30)));
  ASSERT_EQ(observed_.size(), 1u);
  EXPECT_EQ(observed_[0].code, 200);
}

TEST_F(RestKubeApiTest, WatchIdleTimeoutIsAtLeastTheDefault) {
  transport_.script({});
  ListOptions o;
  o.timeout_seconds = 10;
  ASSERT_TRUE(api_->watchResourceSlices(o, [](const auto&) { return true; }, {}).ok());
  EXPECT_EQ(transport_.last().timeout, std::chrono::minutes(5));
}

// An event in the state the caller holds (ListOptions::held_slice) takes the
// held spec; any other state is read from the stream.
TEST_F(RestKubeApiWatchTest, WatchTakesTheSpecOfAHeldState) {
  FakeTransport::StreamScript s;
  s.chunks = {event("ADDED", sliceJson("a", "10")) + event("MODIFIED", sliceJson("a", "11"))};
  transport_.script(std::move(s));
  auto held = std::make_shared<ResourceSlice>(slice("a", "10"));
  held->metadata.uid = "uid-a";
  held->spec.driver = "held.example.com";
  ListOptions options;
  options.held_slice = [&](const std::string& name) -> std::shared_ptr<const ResourceSlice> {
    return name == "a" ? held : nullptr;
  };
  std::vector<std::string> drivers;
  const Status status = api_->watchResourceSlices(
      options,
      [&](const WatchEvent<ResourceSlice>& e) {
        drivers.push_back(e.object.metadata.resource_version + " " + e.object.spec.driver);
        return true;
      },
      {});
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(drivers, (std::vector<std::string>{"10 held.example.com", "11 gpu.example.com"}));
}

TEST_F(RestKubeApiWatchTest, WatchManyEventsInOneChunk) {
  FakeTransport::StreamScript s;
  s.chunks = {event("ADDED", sliceJson("a", "1")) + event("ADDED", sliceJson("b", "2")) +
              event("ADDED", sliceJson("c", "3"))};
  const Watched w = watch(s);
  ASSERT_TRUE(w.status.ok());
  ASSERT_EQ(w.seen.size(), 3u);
  EXPECT_EQ(w.seen[2].name, "c");
}

TEST_F(RestKubeApiWatchTest, WatchErrorEventGoesToTheHandlerAndEndsTheStream) {
  FakeTransport::StreamScript s;
  s.chunks = {event("ADDED", sliceJson("a", "1")) +
                  event("ERROR", statusJson(410, "Expired", "too old resource version: 1 (50)")),
              event("ADDED", sliceJson("b", "51"))};
  const Watched w = watch(s);
  EXPECT_EQ(w.status.code(), StatusCode::kGone);
  EXPECT_EQ(w.status.message(), "watch ResourceSlices: too old resource version: 1 (50)");
  ASSERT_EQ(w.seen.size(), 2u);
  EXPECT_EQ(w.seen[1].type, WatchEventType::kError);
  EXPECT_EQ(w.seen[1].error, StatusCode::kGone);
  EXPECT_EQ(transport_.chunksDelivered(), 1u) << "the stream was not read past the ERROR event";
}

TEST_F(RestKubeApiTest, WatchHandlerCanStopTheStream) {
  FakeTransport::StreamScript s;
  s.chunks = {event("ADDED", sliceJson("a", "1")) + event("ADDED", sliceJson("b", "2")),
              event("ADDED", sliceJson("c", "3"))};
  transport_.script(s);
  int calls = 0;
  Status status = api_->watchResourceSlices(
      {}, [&](const WatchEvent<ResourceSlice>&) { return ++calls < 1; }, {});
  EXPECT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(transport_.chunksDelivered(), 1u);
}

TEST_F(RestKubeApiWatchTest, WatchNonOkAnswerIsTheMappedStatus) {
  FakeTransport::StreamScript gone;
  gone.head = HttpResponse{410, {}, statusJson(410, "Gone", "gone")};
  const Watched w = watch(gone);
  EXPECT_EQ(w.status.code(), StatusCode::kGone);
  EXPECT_TRUE(w.seen.empty());

  FakeTransport::StreamScript forbidden;
  forbidden.head = HttpResponse{403, {}, statusJson(403, "Forbidden", "no")};
  const Watched refused = watch(forbidden);
  EXPECT_EQ(refused.status.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.status.message(), "watch ResourceSlices: no");
  EXPECT_EQ(transport_.requests().size(), 2u);
  EXPECT_TRUE(clock_.sleeps().empty());
}

TEST_F(RestKubeApiWatchTest, WatchRetriesOpeningTheStream) {
  FakeTransport::StreamScript busy;
  busy.head = HttpResponse{429, {{"retry-after", "2"}}, "Too many requests"};
  transport_.script(busy);
  FakeTransport::StreamScript refused;
  refused.head = Status(StatusCode::kUnavailable, "refused", {}, kReasonRequestNotSent);
  transport_.script(refused);
  FakeTransport::StreamScript ok;
  ok.chunks = {event("ADDED", sliceJson("a", "1"))};
  const Watched w = watch(ok);
  ASSERT_TRUE(w.status.ok()) << w.status.toString();
  EXPECT_EQ(w.seen.size(), 1u);
  EXPECT_EQ(transport_.requests().size(), 3u);
  // The Retry-After wait is one wait that a stop would end at once.
  EXPECT_THAT(clock_.sleeps(), ::testing::ElementsAre(seconds(2), jittered(milliseconds(200))));
  ASSERT_EQ(observed_.size(), 3u);
  EXPECT_EQ(observed_[0].code, 429);
  EXPECT_EQ(observed_[1].code, RequestResult::kNoResponse);
  EXPECT_EQ(observed_[2].code, 200);
}

TEST_F(RestKubeApiWatchTest, WatchBrokenAfterEventsIsReturnedNotRetried) {
  FakeTransport::StreamScript s;
  s.chunks = {event("ADDED", sliceJson("a", "1"))};
  s.end = Status(StatusCode::kUnavailable, "connection reset", {}, kReasonConnectionLost);
  const Watched w = watch(s);
  EXPECT_EQ(w.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(w.status.message(), "watch ResourceSlices: connection reset");
  EXPECT_EQ(w.seen.size(), 1u);
  EXPECT_EQ(transport_.requests().size(), 1u);
}

TEST_F(RestKubeApiWatchTest, WatchEndingInsideAnEventIsUnavailable) {
  FakeTransport::StreamScript s;
  const std::string e = event("ADDED", sliceJson("a", "1"));
  s.chunks = {e + e.substr(0, 20)};
  const Watched w = watch(s);
  EXPECT_EQ(w.status.code(), StatusCode::kUnavailable);
  EXPECT_THAT(w.status.message(), HasSubstr("the stream ended inside an event"));
  EXPECT_EQ(w.seen.size(), 1u);
}

TEST_F(RestKubeApiWatchTest, WatchMalformedEventIsAnError) {
  FakeTransport::StreamScript s;
  s.chunks = {event("ADDED", sliceJson("a", "1")) + "{\"type\":\"ADDED\",\"object\":{]}\n"};
  const Watched w = watch(s);
  EXPECT_FALSE(w.status.ok());
  EXPECT_THAT(w.status.message(), HasSubstr("watch ResourceSlices: "));
  EXPECT_EQ(w.seen.size(), 1u);
}

TEST_F(RestKubeApiTest, WatchStoppedBeforeStartIsCancelled) {
  std::stop_source stop;
  stop.request_stop();
  std::vector<Seen> seen;
  Status status = api_->watchResourceSlices({}, recordInto(seen), stop.get_token());
  EXPECT_EQ(status.code(), StatusCode::kCancelled);
  EXPECT_TRUE(transport_.requests().empty());
}

TEST_F(RestKubeApiTest, WatchEndsOnTheClientsStopToo) {
  std::stop_source client_stop;
  RestKubeApiOptions options;
  options.stop = client_stop.get_token();
  rebuild(options);
  client_stop.request_stop();
  std::vector<Seen> seen;
  Status status = api_->watchResourceSlices({}, recordInto(seen), std::stop_token());
  EXPECT_EQ(status.code(), StatusCode::kCancelled);
  EXPECT_TRUE(transport_.requests().empty());
}

// ---------------------------------------------------------------------------
// Node metadata.

// The value of header `name` of `req` ("" when absent).
std::string header(const HttpRequest& req, const std::string& name) {
  for (const auto& [key, value] : req.headers) {
    if (key == name) {
      return value;
    }
  }
  return "";
}

std::string nodeMetadataJson(const std::string& name, const std::string& rv) {
  return R"({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":")" +
         name + R"(","uid":"uid-)" + name + R"(","resourceVersion":")" + rv +
         R"(","labels":{"zone":"a"},"managedFields":[{"manager":"kubelet"}]}})";
}

TEST_F(RestKubeApiTest, NodeMetadataListAsksForPartialObjectMetadataList) {
  transport_.reply(200, R"({"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1",
      "metadata":{"resourceVersion":"40","continue":"more"},"items":[)" +
                            nodeMetadataJson("n1", "31") + "," + nodeMetadataJson("n2", "32") +
                            "]}");
  ListOptions o;
  o.limit = 500;
  auto list = api_->listNodeMetadata(o);
  ASSERT_TRUE(list.ok()) << list.status().toString();
  const HttpRequest& req = transport_.last();
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.path_and_query, "/api/v1/nodes?limit=500");
  EXPECT_EQ(header(req, "Accept"),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
  EXPECT_EQ(list->resource_version, "40");
  EXPECT_EQ(list->continue_token, "more");
  ASSERT_EQ(list->items.size(), 2u);
  EXPECT_EQ(list->items[1].metadata.name, "n2");
  EXPECT_EQ(list->items[1].metadata.uid, "uid-n2");
  EXPECT_EQ(list->items[1].metadata.resource_version, "32");
  EXPECT_EQ(list->items[1].metadata.labels.at("zone"), "a");

  // A whole Node is refused: the answer must be what was asked for.
  transport_.reply(200, R"({"metadata":{"resourceVersion":"1"},"items":[{"kind":"Node",
      "apiVersion":"v1","metadata":{"name":"n1"}}]})");
  auto whole = api_->listNodeMetadata({});
  EXPECT_EQ(whole.status().code(), StatusCode::kInternal);
  EXPECT_THAT(whole.status().message(), HasSubstr("list Node metadata: cannot decode items[0]"));
}

TEST_F(RestKubeApiTest, NodeMetadataWatchAsksForPartialObjectMetadata) {
  FakeTransport::StreamScript s;
  s.chunks = {event("ADDED", nodeMetadataJson("n1", "41")) +
                  event("BOOKMARK", R"({"kind":"PartialObjectMetadata",)"
                                    R"("apiVersion":"meta.k8s.io/v1",)"
                                    R"("metadata":{"resourceVersion":"42"}})"),
              event("DELETED", nodeMetadataJson("n1", "43"))};
  transport_.script(s);
  std::vector<Seen> seen;
  Status status =
      api_->watchNodeMetadata(watchFrom("40", 300), recordInto<PartialObjectMetadata>(seen), {});
  ASSERT_TRUE(status.ok()) << status.toString();
  const HttpRequest& req = transport_.last();
  EXPECT_EQ(req.path_and_query,
            "/api/v1/nodes?watch=1&resourceVersion=40&allowWatchBookmarks=true&timeoutSeconds=300");
  EXPECT_EQ(header(req, "Accept"), "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
  EXPECT_EQ(seen, (std::vector<Seen>{{WatchEventType::kAdded, "n1", "41"},
                                     {WatchEventType::kBookmark, "", "42"},
                                     {WatchEventType::kDeleted, "n1", "43"}}));
}

TEST_F(RestKubeApiTest, ServicesAndEndpointSlicesOfOneNamespaceOrAll) {
  transport_.reply(200, R"({"metadata":{"resourceVersion":"50"},"items":[{"metadata":
      {"name":"svc","namespace":"drivers"},"spec":{"ports":[{"name":"inventory","port":80}]}}]})");
  ListOptions o;
  o.namespace_ = "drivers";
  o.label_selector = "resourceslice.dra.k8s.io/driver";
  auto services = api_->listServices(o);
  ASSERT_TRUE(services.ok()) << services.status().toString();
  EXPECT_EQ(transport_.last().path_and_query,
            "/api/v1/namespaces/drivers/services?labelSelector=resourceslice.dra.k8s.io%2Fdriver");
  ASSERT_EQ(services->items.size(), 1u);
  EXPECT_EQ(services->items[0].spec.ports[0].name, "inventory");

  transport_.reply(200, R"({"metadata":{"resourceVersion":"51"},"items":[{"metadata":
      {"name":"s-1","namespace":"drivers"},"addressType":"IPv4","endpoints":[],"ports":[]}]})");
  auto slices = api_->listEndpointSlices({});
  ASSERT_TRUE(slices.ok()) << slices.status().toString();
  EXPECT_EQ(transport_.last().path_and_query, "/apis/discovery.k8s.io/v1/endpointslices");
  ASSERT_EQ(slices->items.size(), 1u);
  EXPECT_EQ(slices->items[0].address_type, "IPv4");

  FakeTransport::StreamScript s;
  s.chunks = {event("ADDED", R"({"metadata":{"name":"s-1","namespace":"drivers",)"
                             R"("resourceVersion":"52"},"addressType":"IPv6"})")};
  transport_.script(s);
  o.resource_version = "51";
  std::vector<Seen> seen;
  ASSERT_TRUE(api_->watchEndpointSlices(o, recordInto<EndpointSlice>(seen), {}).ok());
  EXPECT_EQ(transport_.last().path_and_query,
            "/apis/discovery.k8s.io/v1/namespaces/drivers/endpointslices?watch=1&labelSelector="
            "resourceslice.dra.k8s.io%2Fdriver&resourceVersion=51");
  EXPECT_EQ(seen, (std::vector<Seen>{{WatchEventType::kAdded, "s-1", "52"}}));

  transport_.script(s);
  o.namespace_.clear();
  seen.clear();
  ASSERT_TRUE(api_->watchServices(o, recordInto<Service>(seen), {}).ok());
  EXPECT_EQ(transport_.last().path_and_query,
            "/api/v1/services?watch=1&labelSelector=resourceslice.dra.k8s.io%2Fdriver&"
            "resourceVersion=51");
  EXPECT_EQ(seen.size(), 1u);
}

// Pods are read for their identity alone: where they run, as whom, at which addresses, and
// whether they are going. Everything else of a real Pod is dropped, unknown fields included.
TEST_F(RestKubeApiTest, PodsOfOneNamespaceTrimmedToTheirIdentity) {
  transport_.reply(200, R"({"metadata":{"resourceVersion":"60"},"items":[{"metadata":
      {"name":"nic-a","namespace":"nic-system","uid":"u-1","resourceVersion":"59",
       "deletionTimestamp":"2026-12-04T10:00:00Z","labels":{"app":"nic"},
       "annotations":{"big":"xxxxxxxxxxxxxxxx"},"managedFields":[{"manager":"kubelet"}],
       "ownerReferences":[{"apiVersion":"apps/v1","kind":"DaemonSet","name":"nic","uid":"d"}]},
      "spec":{"nodeName":"node-a","serviceAccountName":"nic-driver",
              "containers":[{"name":"driver","image":"example.com/nic:1"}],"futureField":1},
      "status":{"phase":"Running","podIP":"10.0.0.7",
                "podIPs":[{"ip":"10.0.0.7"},{"ip":"fd00::7"}],"conditions":[]}}]})");
  ListOptions o;
  o.namespace_ = "nic-system";
  auto pods = api_->listPods(o);
  ASSERT_TRUE(pods.ok()) << pods.status().toString();
  EXPECT_EQ(transport_.last().path_and_query, "/api/v1/namespaces/nic-system/pods");
  ASSERT_EQ(pods->items.size(), 1u);
  Pod expected;
  expected.metadata.name = "nic-a";
  expected.metadata.namespace_ = "nic-system";
  expected.metadata.uid = "u-1";
  expected.metadata.resource_version = "59";
  expected.metadata.deletion_timestamp = "2026-12-04T10:00:00Z";
  expected.spec = {"node-a", "nic-driver"};
  expected.status = {"Running", "10.0.0.7", {{"10.0.0.7"}, {"fd00::7"}}};
  EXPECT_EQ(pods->items[0], expected);
  EXPECT_TRUE(pods->items[0].hasIp("fd00::7"));
  EXPECT_FALSE(pods->items[0].hasIp("10.0.0.8"));
  EXPECT_FALSE(pods->items[0].hasIp(""));

  FakeTransport::StreamScript s;
  s.chunks = {event("MODIFIED", R"({"metadata":{"name":"nic-a","namespace":"nic-system",)"
                                R"("resourceVersion":"61"},"spec":{"nodeName":"node-a"}})")};
  transport_.script(s);
  o.resource_version = "60";
  std::vector<Seen> seen;
  ASSERT_TRUE(api_->watchPods(o, recordInto<Pod>(seen), {}).ok());
  EXPECT_EQ(transport_.last().path_and_query,
            "/api/v1/namespaces/nic-system/pods?watch=1&resourceVersion=60");
  EXPECT_EQ(seen, (std::vector<Seen>{{WatchEventType::kModified, "nic-a", "61"}}));
}

TEST_F(RestKubeApiTest, AnEndpointsTargetRefIsDecoded) {
  transport_.reply(200, R"({"metadata":{"resourceVersion":"70"},"items":[{"metadata":
      {"name":"s-1","namespace":"nic-system"},"addressType":"IPv4","ports":[],
      "endpoints":[{"addresses":["10.0.0.7"],"nodeName":"node-a","targetRef":{"kind":"Pod",
        "namespace":"nic-system","name":"nic-a","uid":"u-1","resourceVersion":"5"}}]}]})");
  auto slices = api_->listEndpointSlices({});
  ASSERT_TRUE(slices.ok()) << slices.status().toString();
  ASSERT_EQ(slices->items.size(), 1u);
  ASSERT_EQ(slices->items[0].endpoints.size(), 1u);
  const auto& ref = slices->items[0].endpoints[0].target_ref;
  ASSERT_TRUE(ref.has_value());
  EXPECT_EQ(ref->kind, "Pod");
  EXPECT_EQ(ref->namespace_, "nic-system");
  EXPECT_EQ(ref->name, "nic-a");
  EXPECT_EQ(ref->uid, "u-1");
  // What it does not model is kept, as for every object read from the server.
  EXPECT_EQ(ref->unknown, Json::parse(R"({"resourceVersion":"5"})"));
}

}  // namespace
}  // namespace rsc::client
