#include "client/rest_kube_api.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "client/api_error.h"
#include "client/codec_sax.h"
#include "client/watch_decoder.h"
#include "common/log.h"
#include "common/strings.h"

namespace rsc::client {
namespace {

// One page of a ResourceSlice list, as the SAX driver reads it: the items
// and the list's metadata; kind and apiVersion are ignored, as the DOM
// reading ignores them.
struct SliceListMeta {
  std::string continue_token;
  std::optional<int64_t> remaining_item_count;
  std::string resource_version;
};
struct SliceListPage {
  std::vector<ResourceSlice> items;
  SliceListMeta metadata;
};

}  // namespace

namespace codec {

template <>
struct Table<SliceListMeta> : TableOf<SliceListMeta> {
  static constexpr auto kFields = std::tuple{
      field("continue", &SliceListMeta::continue_token, Str{}),
      field("remainingItemCount", &SliceListMeta::remaining_item_count, Opt<Int64>{}),
      field("resourceVersion", &SliceListMeta::resource_version, Str{}),
  };
};

template <>
struct Table<SliceListPage> : TableOf<SliceListPage> {
  static constexpr auto kFields = std::tuple{
      field("items", &SliceListPage::items, ListOf<Obj<ResourceSlice>>{}),
      field("metadata", &SliceListPage::metadata, Obj<SliceListMeta>{}),
  };
};

}  // namespace codec

namespace {

constexpr std::string_view kResourceSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";
constexpr std::string_view kNodesPath = "/api/v1/nodes";
// What to ask for in the Accept header to get objects' metadata alone: lists
// answer a PartialObjectMetadataList, watches send PartialObjectMetadata
// objects (as client-go's metadata client asks).
constexpr std::string_view kMetadataListMediaType =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
constexpr std::string_view kMetadataMediaType =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
constexpr std::string_view kTokenReviewsPath = "/apis/authentication.k8s.io/v1/tokenreviews";
constexpr std::string_view kSubjectAccessReviewsPath =
    "/apis/authorization.k8s.io/v1/subjectaccessreviews";

// A watch's idle timeout exceeds its server-side timeoutSeconds by this, so
// that a quiet watch is ended by the server, cleanly, not by our timer.
constexpr auto kWatchTimeoutMargin = std::chrono::seconds(30);
// Jitter adds up to this fraction of the backoff.
constexpr double kJitterFraction = 0.2;

std::string eventsPath(const std::string& ns) {
  return "/apis/events.k8s.io/v1/namespaces/" + RestKubeApi::urlEncode(ns) + "/events";
}

std::string itemPath(std::string_view collection, const std::string& name) {
  return std::string(collection) + "/" + RestKubeApi::urlEncode(name);
}

bool isSuccess(int code) { return code >= 200 && code < 300; }

// JSON text of a body; invalid UTF-8 in a string is replaced, not thrown.
std::string dumpJson(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// Fills apiVersion and kind when the encoder left them out.
Json withTypeMeta(Json j, const char* api_version, const char* kind) {
  if (!j.contains("apiVersion")) {
    j["apiVersion"] = api_version;
  }
  if (!j.contains("kind")) {
    j["kind"] = kind;
  }
  return j;
}

// The object `decode` makes of a call's answer; a failed call and an answer
// that does not decode both gain `context`. An answer the client cannot
// decode is the server's or our model's fault, never the caller's input:
// kInternal, whatever code the decoder chose.
template <typename T>
StatusOr<T> decodedAnswer(const StatusOr<Json>& answer, StatusOr<T> (*decode)(const Json&),
                          const std::string& context) {
  if (!answer.ok()) {
    return answer.status().withContext(context);
  }
  StatusOr<T> object = decode(*answer);
  if (!object.ok()) {
    return internalError("cannot decode the answer: " + object.status().message())
        .withContext(context);
  }
  return object;
}

// An answer's body as a DOM (an empty body is an empty object).
StatusOr<Json> parsedAnswer(const std::string& body) {
  if (body.empty()) {
    return Json::object();
  }
  Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    return internalError("the API server's answer is not JSON");
  }
  return parsed;
}

// A list page from its DOM, each item decoded by `decode`.
template <typename T>
StatusOr<ObjectList<T>> listFromAnswer(const StatusOr<Json>& j, const std::string& context,
                                       StatusOr<T> (*decode)(const Json&)) {
  if (!j.ok()) {
    return j.status().withContext(context);
  }

  ObjectList<T> list;
  if (auto meta = j->find("metadata"); meta != j->end() && meta->is_object()) {
    list.resource_version = meta->value("resourceVersion", "");
    list.continue_token = meta->value("continue", "");
    if (auto count = meta->find("remainingItemCount");
        count != meta->end() && count->is_number_integer()) {
      list.remaining_item_count = count->get<int64_t>();
    }
  }
  auto items = j->find("items");
  if (items != j->end() && !items->is_null()) {
    if (!items->is_array()) {
      return internalError(context + ": items is not a list");
    }
    list.items.reserve(items->size());
    for (size_t i = 0; i < items->size(); ++i) {
      auto item = decode((*items)[i]);
      if (!item.ok()) {
        return internalError(context + ": cannot decode items[" + std::to_string(i) +
                             "]: " + item.status().message());
      }
      list.items.push_back(std::move(*item));
    }
  }
  return list;
}

// A watch event's text decoded through its DOM, for the kinds without a SAX
// decoding.
template <typename T, StatusOr<WatchEvent<T>> (*FromJson)(const Json&)>
StatusOr<WatchEvent<T>> viaDom(std::string_view text) {
  return watchEventFromText<T>(text, FromJson);
}

Status requireSet(const std::string& value, const std::string& context, const char* field) {
  if (value.empty()) {
    return invalidArgument(context + ": " + field + " is empty");
  }
  return okStatus();
}

// Retry-After in seconds; the HTTP-date form is not used by the API server.
std::optional<int64_t> parseRetryAfter(const std::string& value) {
  const std::optional<int64_t> seconds = parseWhole<int64_t>(trimBlanks(value));
  if (!seconds || *seconds < 0) return std::nullopt;
  return seconds;
}

// A Status with " (after N attempts)" and `why` added, keeping code, reason
// and causes.
Status afterAttempts(const Status& error, int attempts, std::string_view why = {}) {
  if (attempts <= 1 && why.empty()) {
    return error;
  }
  std::string note = " (after " + std::to_string(attempts) + " attempt";
  note += attempts == 1 ? "" : "s";
  if (!why.empty()) {
    note += "; ";
    note += why;
  }
  note += ")";
  return {error.code(), error.message() + note, error.details(), error.reason()};
}

int64_t millis(Clock::Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

StatusOr<std::unique_ptr<RestKubeApi>> RestKubeApi::create(HttpTransport& transport, Clock& clock,
                                                           RestKubeApiOptions options) {
  if (options.max_retries < 0) {
    return invalidArgument("max_retries must not be negative");
  }
  if (options.backoff_base <= Clock::Duration::zero()) {
    return invalidArgument("backoff_base must be positive");
  }
  if (options.backoff_cap < options.backoff_base) {
    return invalidArgument("backoff_cap must not be below backoff_base");
  }
  if (options.max_retry_after < Clock::Duration::zero()) {
    return invalidArgument("max_retry_after must not be negative");
  }
  if (options.qps > 0 && options.burst < 1) {
    return invalidArgument("burst must be at least 1 when qps is set");
  }
  if (options.request_timeout <= std::chrono::milliseconds::zero() ||
      options.watch_idle_timeout <= std::chrono::milliseconds::zero() ||
      options.call_timeout <= Clock::Duration::zero()) {
    return invalidArgument("timeouts must be positive");
  }
  return std::unique_ptr<RestKubeApi>(new RestKubeApi(transport, clock, std::move(options)));
}

RestKubeApi::RestKubeApi(HttpTransport& transport, Clock& clock, RestKubeApiOptions options)
    : transport_(transport),
      clock_(clock),
      options_(std::move(options)),
      bucket_(options_.qps, options_.burst, clock),
      rng_(std::random_device{}()),
      gave_up_log_(clock),
      hold_log_(clock) {}

// ---------------------------------------------------------------------------
// Requests, retries and backoff.

std::string RestKubeApi::urlEncode(std::string_view value) {
  static constexpr std::string_view kHex = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                            (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

std::string RestKubeApi::listQuery(const ListOptions& options, bool watch) {
  std::vector<std::pair<std::string, std::string>> params;
  if (watch) {
    params.emplace_back("watch", "1");
  }
  if (!options.label_selector.empty()) {
    params.emplace_back("labelSelector", options.label_selector);
  }
  if (!options.field_selector.empty()) {
    params.emplace_back("fieldSelector", options.field_selector);
  }
  if (options.resource_version && !options.resource_version->empty()) {
    params.emplace_back("resourceVersion", *options.resource_version);
  }
  if (!options.resource_version_match.empty()) {
    params.emplace_back("resourceVersionMatch", options.resource_version_match);
  }
  if (watch) {
    if (options.allow_watch_bookmarks) {
      params.emplace_back("allowWatchBookmarks", "true");
    }
    if (options.timeout_seconds) {
      params.emplace_back("timeoutSeconds", std::to_string(*options.timeout_seconds));
    }
  } else {
    if (options.limit > 0) {
      params.emplace_back("limit", std::to_string(options.limit));
    }
    if (!options.continue_token.empty()) {
      params.emplace_back("continue", options.continue_token);
    }
  }
  std::string query;
  for (const auto& [key, value] : params) {
    query += query.empty() ? "?" : "&";
    query += key + "=" + urlEncode(value);
  }
  return query;
}

HttpRequest RestKubeApi::request(std::string method, std::string path, std::string body,
                                 std::string_view accept) const {
  HttpRequest req;
  req.method = std::move(method);
  req.path_and_query = std::move(path);
  req.headers.emplace_back("Accept", std::string(accept));
  if (!body.empty()) {
    req.headers.emplace_back("Content-Type", "application/json");
  }
  req.body = std::move(body);
  req.timeout = options_.request_timeout;
  req.stop = options_.stop;
  return req;
}

void RestKubeApi::observe(const std::string& verb, int code, Clock::Duration duration) {
  if (options_.request_observer) {
    options_.request_observer(RequestResult{verb, transport_.host(), code, duration});
  }
}

Clock::Duration RestKubeApi::retryDelay(int retry, const HttpResponse* response) {
  if (response != nullptr) {
    if (auto seconds = parseRetryAfter(response->header("retry-after"))) {
      return std::min<Clock::Duration>(std::chrono::seconds(*seconds), options_.max_retry_after);
    }
  }
  Clock::Duration delay = options_.backoff_base;
  for (int i = 0; i < retry && delay < options_.backoff_cap; ++i) {
    delay *= 2;
  }
  delay = std::min(delay, options_.backoff_cap);
  double fraction;
  {
    std::lock_guard lock(rng_mu_);
    fraction = std::uniform_real_distribution<double>(0, kJitterFraction)(rng_);
  }
  return delay + std::chrono::duration_cast<Clock::Duration>(delay * fraction);
}

bool RestKubeApi::pause(Clock::Duration d, const std::stop_token& stop) {
  if (!stop.stop_possible() && !options_.stop.stop_possible()) {
    clock_.sleepFor(d);
    return true;
  }
  // One wait that either stop ends at once.
  std::stop_source either;
  std::stop_callback on_call(stop, [&] { either.request_stop(); });
  std::stop_callback on_client(options_.stop, [&] { either.request_stop(); });
  clock_.sleepUntil(clock_.now() + d, either.get_token());
  return !stop.stop_requested() && !options_.stop.stop_requested();
}

bool RestKubeApi::waitForHold(Clock::TimePoint deadline) {
  Clock::TimePoint until;
  {
    std::lock_guard lock(hold_mu_);
    until = std::min(hold_until_, deadline);
  }
  const Clock::TimePoint now = clock_.now();
  return until <= now || pause(until - now, {});
}

void RestKubeApi::holdAll(Clock::Duration delay, const HttpRequest& req) {
  const Clock::TimePoint until = clock_.now() + delay;
  {
    std::lock_guard lock(hold_mu_);
    if (until <= hold_until_) return;
    hold_until_ = until;
  }
  if (auto held = hold_log_.allow("429")) {
    log::warning("The API server asked to slow down (429): every request waits",
                 {{"verb", req.method},
                  {"path", req.path_and_query},
                  {"waitMs", millis(delay)},
                  {"heldBackLines", static_cast<int64_t>(*held)}});
  }
}

StatusOr<HttpResponse> RestKubeApi::execute(const HttpRequest& req, RetryPolicy policy) {
  const Clock::TimePoint deadline = clock_.now() + options_.call_timeout;
  for (int attempt = 0;; ++attempt) {
    if (options_.stop.stop_requested()) {
      return cancelled(req.method + " " + req.path_and_query + ": the client is stopping");
    }
    if (!waitForHold(deadline)) {
      return cancelled(req.method + " " + req.path_and_query +
                       ": the client stopped while the API server asked to slow down");
    }
    bucket_.acquire();
    const Clock::TimePoint start = clock_.now();
    StatusOr<HttpResponse> result = transport_.send(req);
    const Clock::Duration elapsed = clock_.now() - start;

    Status error;
    bool retryable = false;
    const HttpResponse* response = nullptr;
    if (!result.ok()) {
      observe(req.method, RequestResult::kNoResponse, elapsed);
      error = result.status();
      if (error.code() == StatusCode::kCancelled) {
        return error;
      }
      retryable = isRetryable(error) &&
                  (policy == RetryPolicy::kAlways || error.reason() == kReasonRequestNotSent);
    } else {
      observe(req.method, result->code, elapsed);
      if (isSuccess(result->code)) {
        return result;
      }
      response = &*result;
      error = statusFromHttpResponse(response->code, response->body);
      // A 429 is refused before any work is done, so even a request that
      // must not run twice may be repeated.
      retryable = response->code == 429 || (policy == RetryPolicy::kAlways && isRetryable(error));
    }
    const Clock::Duration delay = retryDelay(attempt, response);
    if (response != nullptr && response->code == 429) holdAll(delay, req);
    if (!retryable || attempt >= options_.max_retries) {
      return afterAttempts(error, attempt + 1);
    }

    if (clock_.now() + delay > deadline) {
      // Giving up here rather than at the deadline itself: a retry that
      // could not finish in time only holds the caller longer.
      Status gave_up = afterAttempts(error, attempt + 1, "no retry fits in the call timeout");
      if (auto held = gave_up_log_.allow(req.method)) {
        log::warning("API call gave up at its call timeout",
                     {{"verb", req.method},
                      {"path", req.path_and_query},
                      {"error", gave_up.toString()},
                      {"callTimeoutMs", millis(options_.call_timeout)},
                      {"retryDelayMs", millis(delay)},
                      {"heldBackLines", static_cast<int64_t>(*held)}});
      }
      return gave_up;
    }
    log::debug(2, "retrying API request",
               {{"verb", req.method},
                {"path", req.path_and_query},
                {"error", error.toString()},
                {"delay_ms", millis(delay)}});
    if (!pause(delay, {})) {
      return cancelled(req.method + " " + req.path_and_query +
                       ": the client stopped while waiting to retry after: " + error.toString());
    }
  }
}

StatusOr<Json> RestKubeApi::call(std::string method, std::string path, const Json* body,
                                 RetryPolicy policy, std::string_view accept) {
  return send(request(std::move(method), std::move(path), body ? dumpJson(*body) : "", accept),
              policy);
}

StatusOr<Json> RestKubeApi::send(const HttpRequest& req, RetryPolicy policy) {
  ASSIGN_OR_RETURN(const HttpResponse response, execute(req, policy));
  return parsedAnswer(response.body);
}

// ---------------------------------------------------------------------------
// ResourceSlices.

StatusOr<ResourceSlice> RestKubeApi::getResourceSlice(const std::string& name) {
  const std::string context = "get ResourceSlice " + name;
  RETURN_IF_ERROR(requireSet(name, context, "name"));
  return sendForSlice(request("GET", itemPath(kResourceSlicesPath, name)), RetryPolicy::kAlways,
                      context);
}

StatusOr<ResourceSlice> RestKubeApi::sendForSlice(const HttpRequest& req, RetryPolicy policy,
                                                  const std::string& context) {
  StatusOr<HttpResponse> response = execute(req, policy);
  if (!response.ok()) {
    return response.status().withContext(context);
  }
  if (StatusOr<ResourceSlice> slice = resourceSliceFromText(response->body); slice.ok()) {
    return slice;
  }
  // Refused: the DOM reading says why, in the words callers know.
  return decodedAnswer(parsedAnswer(response->body), &resourceSliceFromJson, context);
}

template <typename T>
StatusOr<ObjectList<T>> RestKubeApi::listObjects(std::string_view path, std::string_view what,
                                                 const ListOptions& options,
                                                 std::string_view accept,
                                                 StatusOr<T> (*decode)(const Json&)) {
  return listFromAnswer<T>(call("GET", std::string(path) + listQuery(options, /*watch=*/false),
                                nullptr, RetryPolicy::kAlways, accept),
                           "list " + std::string(what), decode);
}

StatusOr<ResourceSliceList> RestKubeApi::listResourceSlices(const ListOptions& options) {
  // A page is read without a DOM (a page of 500 slices of 128 devices is
  // about 26 MB of JSON and would be ten times that as a DOM). A page the
  // SAX driver refuses is read again through the DOM, whose errors callers
  // know.
  const std::string context = "list ResourceSlices";
  StatusOr<HttpResponse> response =
      execute(request("GET", std::string(kResourceSlicesPath) + listQuery(options, false)),
              RetryPolicy::kAlways);
  if (!response.ok()) {
    return response.status().withContext(context);
  }
  StatusOr<SliceListPage> page = codec::decodeText<SliceListPage>(response->body, "");
  if (page.ok()) {
    ResourceSliceList list;
    list.items = std::move(page->items);
    list.resource_version = std::move(page->metadata.resource_version);
    list.continue_token = std::move(page->metadata.continue_token);
    list.remaining_item_count = page->metadata.remaining_item_count;
    return list;
  }
  return listFromAnswer<ResourceSlice>(parsedAnswer(response->body), context,
                                       resourceSliceFromJson);
}

template <typename T>
Status RestKubeApi::watchObjects(
    std::string_view path, std::string_view what, const ListOptions& options,
    std::string_view accept,
    const std::function<StatusOr<WatchEvent<T>>(std::string_view)>& decode_event,
    const WatchHandler<T>& handler, std::stop_token caller_stop) {
  const std::string context = "watch " + std::string(what);
  // Ends on the caller's stop or the client's.
  std::stop_source stopper;
  std::stop_callback on_caller_stop(caller_stop, [&stopper] { stopper.request_stop(); });
  std::stop_callback on_client_stop(options_.stop, [&stopper] { stopper.request_stop(); });
  const std::stop_token stop = stopper.get_token();
  HttpRequest req =
      request("GET", std::string(path) + listQuery(options, /*watch=*/true), {}, accept);
  req.timeout = options_.watch_idle_timeout;
  if (options.timeout_seconds) {
    req.timeout = std::max(
        req.timeout, std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::seconds(*options.timeout_seconds) + kWatchTimeoutMargin));
  }

  for (int attempt = 0;; ++attempt) {
    if (stop.stop_requested()) {
      return cancelled(context + ": stopped");
    }
    bucket_.acquire();
    const Clock::TimePoint start = clock_.now();

    // Per attempt: what the stream delivered and why it ended.
    bool head_seen = false;
    WatchDecoder decoder;
    Status stream_error;
    std::optional<Status> error_event;
    bool handler_done = false;
    auto on_head = [&](const HttpResponse& head) {
      head_seen = true;
      observe(req.method, head.code, clock_.now() - start);
    };
    auto on_event = [&](std::string_view text) {
      using Verdict = WatchDecoder::Verdict;
      auto event = decode_event(text);
      if (!event.ok()) {
        if (event.status().reason() == kReasonNotJson) {
          return Verdict::kMalformed;
        }
        stream_error = internalError("cannot decode a watch event: " + event.status().message());
        return Verdict::kStop;
      }
      const bool more = handler(*event);
      if (event->type == WatchEventType::kError) {
        error_event = event->error;
        return Verdict::kStop;
      }
      if (!more) {
        handler_done = true;
        return Verdict::kStop;
      }
      return Verdict::kMore;
    };
    auto on_chunk = [&](std::string_view chunk) {
      Status fed = decoder.feedText(chunk, on_event);
      if (!fed.ok() && stream_error.ok()) {
        stream_error = fed;
      }
      return stream_error.ok() && !error_event && !handler_done;
    };
    StatusOr<HttpResponse> result = transport_.stream(req, on_head, on_chunk, stop);
    if (!head_seen) {
      observe(req.method, RequestResult::kNoResponse, clock_.now() - start);
    }

    // The stream could not be opened: retry like any request.
    const HttpResponse* response = nullptr;
    Status open_error;
    if (!result.ok()) {
      if (result.status().code() == StatusCode::kCancelled) {
        return result.status().withContext(context);
      }
      if (head_seen) {
        return result.status().withContext(context);
      }
      open_error = result.status();
    } else if (!isSuccess(result->code)) {
      response = &*result;
      open_error = statusFromHttpResponse(response->code, response->body);
    }
    if (!open_error.ok()) {
      if (!isRetryable(open_error) || attempt >= options_.max_retries) {
        return afterAttempts(open_error, attempt + 1).withContext(context);
      }
      // A stop request is not held up by a long Retry-After.
      pause(retryDelay(attempt, response), stop);
      continue;
    }

    // The stream ran and ended.
    if (!stream_error.ok()) {
      return stream_error.withContext(context);
    }
    if (error_event) {
      return error_event->withContext(context);
    }
    if (handler_done) {
      return okStatus();
    }
    if (Status finished = decoder.finish(); !finished.ok()) {
      return unavailable("the stream ended inside an event: " + finished.message())
          .withContext(context);
    }
    return okStatus();
  }
}

Status RestKubeApi::watchResourceSlices(const ListOptions& options,
                                        const WatchHandler<ResourceSlice>& handler,
                                        std::stop_token stop) {
  return watchObjects<ResourceSlice>(
      kResourceSlicesPath, "ResourceSlices", options, kJsonMediaType,
      [&held = options.held_slice](std::string_view text) {
        return resourceSliceWatchEventFromText(text, held);
      },
      handler, std::move(stop));
}

StatusOr<ResourceSlice> RestKubeApi::createResourceSlice(const ResourceSlice& slice) {
  return postResourceSlice(slice, /*dry_run=*/false);
}

StatusOr<ResourceSlice> RestKubeApi::dryRunCreateResourceSlice(const ResourceSlice& slice) {
  return postResourceSlice(slice, /*dry_run=*/true);
}

StatusOr<ResourceSlice> RestKubeApi::postResourceSlice(const ResourceSlice& slice, bool dry_run) {
  const bool generated = slice.metadata.name.empty();
  const std::string context = std::string(dry_run ? "dry-run " : "") + "create ResourceSlice " +
                              (generated ? slice.metadata.generate_name : slice.metadata.name);
  if (generated && slice.metadata.generate_name.empty()) {
    return invalidArgument(context + ": neither name nor generateName is set");
  }
  // A dry run stores nothing, so repeating it after a lost answer is safe.
  return sendForSlice(
      request("POST", std::string(kResourceSlicesPath) + (dry_run ? "?dryRun=All" : ""),
              toJsonText(slice)),
      generated && !dry_run ? RetryPolicy::kOnlyIfNotActedOn : RetryPolicy::kAlways, context);
}

StatusOr<ResourceSlice> RestKubeApi::updateResourceSlice(const ResourceSlice& slice) {
  const std::string context = "update ResourceSlice " + slice.metadata.name;
  RETURN_IF_ERROR(requireSet(slice.metadata.name, context, "name"));
  if (slice.metadata.resource_version.empty()) {
    // Without it the server overwrites unconditionally, hiding races.
    return invalidArgument(context + ": metadata.resourceVersion is required");
  }
  return sendForSlice(
      request("PUT", itemPath(kResourceSlicesPath, slice.metadata.name), toJsonText(slice)),
      RetryPolicy::kAlways, context);
}

Status RestKubeApi::deleteResourceSlice(const std::string& name,
                                        const Preconditions& preconditions) {
  const std::string context = "delete ResourceSlice " + name;
  // An empty name would address the whole collection.
  RETURN_IF_ERROR(requireSet(name, context, "name"));
  Json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (preconditions.uid) {
    body["preconditions"]["uid"] = *preconditions.uid;
  }
  if (preconditions.resource_version) {
    body["preconditions"]["resourceVersion"] = *preconditions.resource_version;
  }
  return call("DELETE", itemPath(kResourceSlicesPath, name), &body).status().withContext(context);
}

Status RestKubeApi::deleteResourceSlices(const ListOptions& options) {
  const std::string context = "delete ResourceSlices";
  if (options.label_selector.empty() && options.field_selector.empty()) {
    return invalidArgument(context + ": refusing to delete every ResourceSlice of the cluster; " +
                           "give a label or field selector");
  }
  ListOptions selectors;
  selectors.label_selector = options.label_selector;
  selectors.field_selector = options.field_selector;
  const std::string path = std::string(kResourceSlicesPath) + listQuery(selectors, /*watch=*/false);
  return call("DELETE", path, nullptr).status().withContext(context);
}

// ---------------------------------------------------------------------------
// Leases, Nodes, reviews and Events.

namespace {

constexpr NamespacedKind kLeaseKind{"Lease", "coordination.k8s.io/v1", "leases"};
constexpr NamespacedKind kSecretKind{"Secret", "v1", "secrets"};
constexpr NamespacedKind kConfigMapKind{"ConfigMap", "v1", "configmaps"};

std::string collectionPath(const NamespacedKind& kind, const std::string& ns) {
  const std::string prefix =
      kind.group_version == "v1" ? "/api/v1" : "/apis/" + std::string(kind.group_version);
  return prefix + "/namespaces/" + RestKubeApi::urlEncode(ns) + "/" + std::string(kind.resource);
}

}  // namespace

template <typename T>
StatusOr<T> RestKubeApi::getNamespaced(const NamespacedKind& kind, const std::string& ns,
                                       const std::string& name,
                                       StatusOr<T> (*decode)(const Json&)) {
  const std::string context = "get " + std::string(kind.kind) + " " + ns + "/" + name;
  RETURN_IF_ERROR(requireSet(ns, context, "namespace"));
  RETURN_IF_ERROR(requireSet(name, context, "name"));
  return decodedAnswer(call("GET", itemPath(collectionPath(kind, ns), name), nullptr), decode,
                       context);
}

template <typename T>
StatusOr<T> RestKubeApi::writeNamespaced(const NamespacedKind& kind, const T& object, bool update,
                                         StatusOr<T> (*decode)(const Json&)) {
  const ObjectMeta& meta = object.metadata;
  const std::string context = std::string(update ? "update " : "create ") + std::string(kind.kind) +
                              " " + meta.namespace_ + "/" + meta.name;
  RETURN_IF_ERROR(requireSet(meta.namespace_, context, "namespace"));
  RETURN_IF_ERROR(requireSet(meta.name, context, "name"));
  if (update && meta.resource_version.empty()) {
    // Leader election and the certificate Secret depend on the conflict a
    // stale write gets.
    return invalidArgument(context + ": metadata.resourceVersion is required");
  }
  const std::string api_version(kind.group_version);
  const std::string kind_name(kind.kind);
  const Json body = withTypeMeta(toJson(object), api_version.c_str(), kind_name.c_str());
  const std::string collection = collectionPath(kind, meta.namespace_);
  return decodedAnswer(update ? call("PUT", itemPath(collection, meta.name), &body)
                              : call("POST", collection, &body),
                       decode, context);
}

StatusOr<Lease> RestKubeApi::getLease(const std::string& ns, const std::string& name) {
  return getNamespaced(kLeaseKind, ns, name, &leaseFromJson);
}

StatusOr<Lease> RestKubeApi::createLease(const Lease& lease) {
  return writeNamespaced(kLeaseKind, lease, false, &leaseFromJson);
}

StatusOr<Lease> RestKubeApi::updateLease(const Lease& lease) {
  return writeNamespaced(kLeaseKind, lease, true, &leaseFromJson);
}

StatusOr<Secret> RestKubeApi::getSecret(const std::string& ns, const std::string& name) {
  return getNamespaced(kSecretKind, ns, name, &secretFromJson);
}

StatusOr<Secret> RestKubeApi::createSecret(const Secret& secret) {
  return writeNamespaced(kSecretKind, secret, false, &secretFromJson);
}

StatusOr<Secret> RestKubeApi::updateSecret(const Secret& secret) {
  return writeNamespaced(kSecretKind, secret, true, &secretFromJson);
}

StatusOr<ConfigMap> RestKubeApi::getConfigMap(const std::string& ns, const std::string& name) {
  return getNamespaced(kConfigMapKind, ns, name, &configMapFromJson);
}

StatusOr<ConfigMap> RestKubeApi::createConfigMap(const ConfigMap& config_map) {
  return writeNamespaced(kConfigMapKind, config_map, false, &configMapFromJson);
}

StatusOr<ConfigMap> RestKubeApi::updateConfigMap(const ConfigMap& config_map) {
  return writeNamespaced(kConfigMapKind, config_map, true, &configMapFromJson);
}

StatusOr<ServerVersion> RestKubeApi::getServerVersion() {
  const std::string context = "get the server version";
  return decodedAnswer(call("GET", "/version", nullptr), &serverVersionFromJson, context);
}

StatusOr<Node> RestKubeApi::getNode(const std::string& name) {
  const std::string context = "get Node " + name;
  RETURN_IF_ERROR(requireSet(name, context, "name"));
  return decodedAnswer(call("GET", itemPath(kNodesPath, name), nullptr), &nodeFromJson, context);
}

StatusOr<PartialObjectMetadataList> RestKubeApi::listNodeMetadata(const ListOptions& options) {
  return listObjects<PartialObjectMetadata>(kNodesPath, "Node metadata", options,
                                            kMetadataListMediaType, partialObjectMetadataFromJson);
}

Status RestKubeApi::watchNodeMetadata(const ListOptions& options,
                                      const WatchHandler<PartialObjectMetadata>& handler,
                                      std::stop_token stop) {
  return watchObjects<PartialObjectMetadata>(
      kNodesPath, "Node metadata", options, kMetadataMediaType,
      &viaDom<PartialObjectMetadata, partialObjectMetadataWatchEventFromJson>, handler,
      std::move(stop));
}

namespace {

constexpr NamespacedKind kServiceKind{"Service", "v1", "services"};
constexpr NamespacedKind kEndpointSliceKind{"EndpointSlice", "discovery.k8s.io/v1",
                                            "endpointslices"};
constexpr NamespacedKind kPodKind{"Pod", "v1", "pods"};

// The collection to list or watch: of one namespace, or of every namespace
// when `ns` is empty.
std::string listPath(const NamespacedKind& kind, const std::string& ns) {
  if (!ns.empty()) {
    return collectionPath(kind, ns);
  }
  const std::string prefix =
      kind.group_version == "v1" ? "/api/v1" : "/apis/" + std::string(kind.group_version);
  return prefix + "/" + std::string(kind.resource);
}

}  // namespace

StatusOr<ServiceList> RestKubeApi::listServices(const ListOptions& options) {
  return listObjects<Service>(listPath(kServiceKind, options.namespace_), "Services", options,
                              kJsonMediaType, serviceFromJson);
}

Status RestKubeApi::watchServices(const ListOptions& options, const WatchHandler<Service>& handler,
                                  std::stop_token stop) {
  return watchObjects<Service>(listPath(kServiceKind, options.namespace_), "Services", options,
                               kJsonMediaType, &viaDom<Service, serviceWatchEventFromJson>, handler,
                               std::move(stop));
}

StatusOr<EndpointSliceList> RestKubeApi::listEndpointSlices(const ListOptions& options) {
  return listObjects<EndpointSlice>(listPath(kEndpointSliceKind, options.namespace_),
                                    "EndpointSlices", options, kJsonMediaType,
                                    endpointSliceFromJson);
}

Status RestKubeApi::watchEndpointSlices(const ListOptions& options,
                                        const WatchHandler<EndpointSlice>& handler,
                                        std::stop_token stop) {
  return watchObjects<EndpointSlice>(
      listPath(kEndpointSliceKind, options.namespace_), "EndpointSlices", options, kJsonMediaType,
      &viaDom<EndpointSlice, endpointSliceWatchEventFromJson>, handler, std::move(stop));
}

StatusOr<PodList> RestKubeApi::listPods(const ListOptions& options) {
  return listObjects<Pod>(listPath(kPodKind, options.namespace_), "Pods", options, kJsonMediaType,
                          podFromJson);
}

Status RestKubeApi::watchPods(const ListOptions& options, const WatchHandler<Pod>& handler,
                              std::stop_token stop) {
  return watchObjects<Pod>(listPath(kPodKind, options.namespace_), "Pods", options, kJsonMediaType,
                           &viaDom<Pod, podWatchEventFromJson>, handler, std::move(stop));
}

StatusOr<TokenReview> RestKubeApi::createTokenReview(const TokenReview& review) {
  const std::string context = "create TokenReview";
  const Json body = withTypeMeta(toJson(review), "authentication.k8s.io/v1", "TokenReview");
  return decodedAnswer(call("POST", std::string(kTokenReviewsPath), &body), &tokenReviewFromJson,
                       context);
}

StatusOr<SubjectAccessReview> RestKubeApi::createSubjectAccessReview(
    const SubjectAccessReview& review) {
  const std::string context = "create SubjectAccessReview";
  const Json body = withTypeMeta(toJson(review), "authorization.k8s.io/v1", "SubjectAccessReview");
  return decodedAnswer(call("POST", std::string(kSubjectAccessReviewsPath), &body),
                       &subjectAccessReviewFromJson, context);
}

StatusOr<Event> RestKubeApi::createEvent(const Event& event) {
  // Events about cluster-scoped objects (ResourceSlices, Nodes) go to the
  // default namespace, as client-go's recorder does.
  std::string ns = event.metadata.namespace_;
  if (ns.empty()) {
    ns = event.regarding.namespace_;
  }
  if (ns.empty()) {
    ns = "default";
  }
  const bool generated = event.metadata.name.empty();
  const std::string context =
      "create Event " + ns + "/" + (generated ? event.metadata.generate_name : event.metadata.name);
  Json body = withTypeMeta(toJson(event), "events.k8s.io/v1", "Event");
  body["metadata"]["namespace"] = ns;
  return decodedAnswer(call("POST", eventsPath(ns), &body,
                            generated ? RetryPolicy::kOnlyIfNotActedOn : RetryPolicy::kAlways),
                       &eventFromJson, context);
}

StatusOr<Event> RestKubeApi::patchEventSeries(const std::string& ns, const std::string& name,
                                              const EventSeries& series) {
  const std::string context = "patch Event " + ns + "/" + name;
  RETURN_IF_ERROR(requireSet(ns, context, "namespace"));
  RETURN_IF_ERROR(requireSet(name, context, "name"));
  const Json patch = {{"series", toJson(series)}};
  HttpRequest req = request("PATCH", itemPath(eventsPath(ns), name), dumpJson(patch));
  for (auto& [header, value] : req.headers) {
    if (header == "Content-Type") {
      value = "application/merge-patch+json";
    }
  }
  // Setting the same series twice is harmless: retried like any call.
  return decodedAnswer(send(req, RetryPolicy::kAlways), &eventFromJson, context);
}

}  // namespace rsc::client
