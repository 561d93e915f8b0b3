// RestKubeApi: KubeApi against a real API server, over an HttpTransport. It
// builds paths and queries, encodes and decodes objects, maps answers to Status
// (api_error.h), rate-limits every attempt with a TokenBucket and retries 429,
// 5xx and connection errors with backoff, honouring Retry-After. Used by main
// and by unit tests (over a fake transport). Thread-safe: calls may come from
// any thread at once; a watch runs on its caller's thread.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>
#include <string_view>

#include "client/config.h"
#include "client/http_transport.h"
#include "client/kube_api.h"
#include "client/token_bucket.h"
#include "common/clock.h"
#include "common/log.h"

namespace rsc::client {

// One HTTP attempt, for rest_client_requests_total and
// rest_client_request_duration_seconds (client/ does not depend on metrics/).
struct RequestResult {
  // The code of an attempt that got no answer.
  static constexpr int kNoResponse = 0;
  std::string verb;            // the HTTP method
  std::string host;            // "host:port"
  int code = kNoResponse;      // the HTTP status, or kNoResponse
  Clock::Duration duration{};  // until the whole answer (a watch: its head)
};

struct RestKubeApiOptions {
  // Client-side rate limit; qps <= 0 turns it off.
  double qps = kDefaultQps;
  int burst = kDefaultBurst;
  // Retries after the first attempt. Five retries with the backoff below span
  // about 3 s without Retry-After, and up to minutes with it.
  int max_retries = 5;
  // Exponential backoff between retries when the server gives no
  // Retry-After: base * 2^retry, at most cap, plus up to 20 % jitter so that
  // many clients do not retry in step.
  Clock::Duration backoff_base = std::chrono::milliseconds(100);
  Clock::Duration backoff_cap = std::chrono::seconds(10);
  // A Retry-After above this is cut to it (the API server sends 1-32 s).
  Clock::Duration max_retry_after = std::chrono::seconds(60);
  // Idle timeout of ordinary requests.
  std::chrono::milliseconds request_timeout = kDefaultRequestTimeout;
  // A deadline for each call, all attempts and the waits between them
  // together: no retry starts, and no wait before one is begun, that would
  // end past it; the call then returns its last error. The attempt under way
  // is bounded by request_timeout, so a call takes at most
  // call_timeout + request_timeout. Watches are bounded by their stop token
  // instead.
  Clock::Duration call_timeout = std::chrono::seconds(30);
  // Once requested, every call gives up: the attempt in flight is cancelled,
  // waits end and nothing is retried; the call returns kCancelled. A watch
  // ends on this or on its own stop token.
  std::stop_token stop;
  // Idle timeout of a watch: bookmarks come about once a minute, so five
  // minutes of silence means a dead connection. Raised to the watch's
  // timeoutSeconds plus a margin when that is longer, so that the server,
  // not the client, ends a quiet watch.
  std::chrono::milliseconds watch_idle_timeout = std::chrono::minutes(5);
  // Sees every HTTP attempt. Called on the requesting thread; must be cheap
  // and thread-safe. May be empty.
  std::function<void(const RequestResult&)> request_observer;
};

// One namespaced kind of object for RestKubeApi's shared get, create and
// update (Leases, Secrets, ConfigMaps): `kind` names it in errors,
// `group_version` is "v1" or "group/v1", `resource` its plural.
struct NamespacedKind {
  std::string_view kind;
  std::string_view group_version;
  std::string_view resource;
};

class RestKubeApi final : public KubeApi {
 public:
  static constexpr std::string_view kJsonMediaType = "application/json";

  // Fails with InvalidArgument on options that cannot work (negative
  // retries, a zero backoff, a cap below the base, burst < 1).
  static StatusOr<std::unique_ptr<RestKubeApi>> create(HttpTransport& transport, Clock& clock,
                                                       RestKubeApiOptions options = {});

  StatusOr<ResourceSlice> getResourceSlice(const std::string& name) override;
  StatusOr<ResourceSliceList> listResourceSlices(const ListOptions& options) override;
  // Retries opening the stream like any request; once events flow, an error
  // ends the call and the caller resumes. An ERROR event (such as 410 Gone
  // for a too-old resourceVersion) is delivered to the handler and its
  // Status is also returned.
  Status watchResourceSlices(const ListOptions& options, const WatchHandler<ResourceSlice>& handler,
                             std::stop_token stop) override;
  // With metadata.generateName and no name, a repeated POST after a lost
  // answer could create a second slice, so such a create is retried only
  // when the server certainly did not act: 429 (refused before any work) or
  // a connection that could not be made. Other creates retry like any call.
  StatusOr<ResourceSlice> createResourceSlice(const ResourceSlice& slice) override;
  StatusOr<ResourceSlice> dryRunCreateResourceSlice(const ResourceSlice& slice) override;
  StatusOr<ResourceSlice> updateResourceSlice(const ResourceSlice& slice) override;
  Status deleteResourceSlice(const std::string& name, const Preconditions& preconditions) override;
  // Refuses to run without a label or field selector: that would delete
  // every ResourceSlice of the cluster, including other managers' slices.
  Status deleteResourceSlices(const ListOptions& options) override;

  StatusOr<Lease> getLease(const std::string& ns, const std::string& name) override;
  StatusOr<Lease> createLease(const Lease& lease) override;
  StatusOr<Lease> updateLease(const Lease& lease) override;
  StatusOr<Secret> getSecret(const std::string& ns, const std::string& name) override;
  StatusOr<Secret> createSecret(const Secret& secret) override;
  StatusOr<Secret> updateSecret(const Secret& secret) override;
  StatusOr<ConfigMap> getConfigMap(const std::string& ns, const std::string& name) override;
  StatusOr<ConfigMap> createConfigMap(const ConfigMap& config_map) override;
  StatusOr<ConfigMap> updateConfigMap(const ConfigMap& config_map) override;

  StatusOr<ServerVersion> getServerVersion() override;
  StatusOr<Node> getNode(const std::string& name) override;
  // Ask for PartialObjectMetadataList (list) and PartialObjectMetadata
  // (watch) in the Accept header.
  StatusOr<PartialObjectMetadataList> listNodeMetadata(const ListOptions& options) override;
  Status watchNodeMetadata(const ListOptions& options,
                           const WatchHandler<PartialObjectMetadata>& handler,
                           std::stop_token stop) override;

  // Paths: /api/v1[/namespaces/NS]/services and
  // /apis/discovery.k8s.io/v1[/namespaces/NS]/endpointslices.
  StatusOr<ServiceList> listServices(const ListOptions& options) override;
  Status watchServices(const ListOptions& options, const WatchHandler<Service>& handler,
                       std::stop_token stop) override;
  StatusOr<EndpointSliceList> listEndpointSlices(const ListOptions& options) override;
  Status watchEndpointSlices(const ListOptions& options, const WatchHandler<EndpointSlice>& handler,
                             std::stop_token stop) override;
  // /api/v1/namespaces/NS/pods.
  StatusOr<PodList> listPods(const ListOptions& options) override;
  Status watchPods(const ListOptions& options, const WatchHandler<Pod>& handler,
                   std::stop_token stop) override;

  StatusOr<TokenReview> createTokenReview(const TokenReview& review) override;
  StatusOr<SubjectAccessReview> createSubjectAccessReview(
      const SubjectAccessReview& review) override;

  StatusOr<Event> createEvent(const Event& event) override;
  StatusOr<Event> patchEventSeries(const std::string& ns, const std::string& name,
                                   const EventSeries& series) override;

  // Builds the query string ("?a=1&b=x%2Cy", or "" when empty) of a list,
  // watch or delete-collection call; exposed for tests.
  static std::string listQuery(const ListOptions& options, bool watch);
  // Percent-encodes everything but RFC 3986 unreserved characters.
  static std::string urlEncode(std::string_view value);

 private:
  // Which failures may be retried.
  enum class RetryPolicy {
    kAlways,
    // Only when the request cannot have had an effect (see createResourceSlice).
    kOnlyIfNotActedOn,
  };

  RestKubeApi(HttpTransport& transport, Clock& clock, RestKubeApiOptions options);

  // Sends `request` with rate limiting and retries; returns a 2xx answer or
  // the mapped error.
  StatusOr<HttpResponse> execute(const HttpRequest& request, RetryPolicy policy);
  // The wait before retry number `retry` (0-based) after `response` (null
  // for a transport error).
  Clock::Duration retryDelay(int retry, const HttpResponse* response);
  // Every attempt waits until a 429's hold is over (at most until `deadline`);
  // false when the client stopped meanwhile.
  bool waitForHold(Clock::TimePoint deadline);
  // A 429 asked to wait `delay`: every caller holds off that long.
  void holdAll(Clock::Duration delay, const HttpRequest& req);
  // Sleeps for `d` in short pieces; returns false as soon as `stop` (or
  // options_.stop) is requested.
  bool pause(Clock::Duration d, const std::stop_token& stop);
  void observe(const std::string& verb, int code, Clock::Duration duration);

  // Request shorthands; `body` is JSON text or empty; `accept` the media type
  // asked for.
  HttpRequest request(std::string method, std::string path, std::string body = {},
                      std::string_view accept = kJsonMediaType) const;
  StatusOr<Json> call(std::string method, std::string path, const Json* body,
                      RetryPolicy policy = RetryPolicy::kAlways,
                      std::string_view accept = kJsonMediaType);
  // Sends `req` (with retries by `policy`) and parses the answer.
  StatusOr<Json> send(const HttpRequest& req, RetryPolicy policy);

  // Sends `req` (with retries by `policy`) and decodes the answer, a
  // ResourceSlice, from its text (resourceSliceFromText: no DOM).
  StatusOr<ResourceSlice> sendForSlice(const HttpRequest& req, RetryPolicy policy,
                                       const std::string& context);

  // POST of a ResourceSlice, stored or (dry_run) only validated and answered.
  StatusOr<ResourceSlice> postResourceSlice(const ResourceSlice& slice, bool dry_run);

  // Get, create and update of one namespaced kind (NamespacedKind).
  template <typename T>
  StatusOr<T> getNamespaced(const NamespacedKind& kind, const std::string& ns,
                            const std::string& name, StatusOr<T> (*decode)(const Json&));
  template <typename T>
  StatusOr<T> writeNamespaced(const NamespacedKind& kind, const T& object, bool update,
                              StatusOr<T> (*decode)(const Json&));

  // List and watch of the collection at `path`, shared by every resource:
  // the list decodes each item with `decode`, the watch each event's text
  // with `decode_event` (kReasonNotJson: the stream is malformed); `what` names the resource in
  // errors ("ResourceSlices").
  template <typename T>
  StatusOr<ObjectList<T>> listObjects(std::string_view path, std::string_view what,
                                      const ListOptions& options, std::string_view accept,
                                      StatusOr<T> (*decode)(const Json&));
  template <typename T>
  Status watchObjects(
      std::string_view path, std::string_view what, const ListOptions& options,
      std::string_view accept,
      const std::function<StatusOr<WatchEvent<T>>(std::string_view text)>& decode_event,
      const WatchHandler<T>& handler, std::stop_token caller_stop);

  HttpTransport& transport_;
  Clock& clock_;
  const RestKubeApiOptions options_;
  TokenBucket bucket_;
  std::mutex rng_mu_;
  std::mt19937_64 rng_;
  log::Throttle gave_up_log_;
  // The API server's 429 slows every caller, not only the one it answered:
  // no attempt starts before hold_until_ (the 429's Retry-After, or the
  // backoff without one).
  std::mutex hold_mu_;
  Clock::TimePoint hold_until_{};  // guarded by hold_mu_
  log::Throttle hold_log_;
};

}  // namespace rsc::client
