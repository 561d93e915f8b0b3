#include "client/informer.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "common/enum_names.h"
#include "common/log.h"
#include "common/thread_name.h"

namespace rsc::client {
namespace {

// A watch that ends at once without a single event, again and again, would
// otherwise turn into a busy loop of requests; such a watch counts as failed.
constexpr Clock::Duration kMinHealthyWatch = std::chrono::seconds(1);

}  // namespace

std::string_view watchRestartName(WatchRestart reason) {
  static constexpr auto kNames = enumNames<WatchRestart>({{WatchRestart::kClosed, "closed"},
                                                          {WatchRestart::kGone, "gone"},
                                                          {WatchRestart::kError, "error"}});
  return kNames(reason);
}

template <typename R>
Status Informer<R>::validate(const Options& options) {
  if (options.page_size < 0) {
    return invalidArgument("informer: page_size must not be negative");
  }
  if (options.min_watch_timeout <= std::chrono::seconds(0) ||
      options.max_watch_timeout < options.min_watch_timeout) {
    return invalidArgument("informer: need 0 < min_watch_timeout <= max_watch_timeout");
  }
  if (options.initial_backoff <= Clock::Duration::zero() ||
      options.max_backoff < options.initial_backoff) {
    return invalidArgument("informer: need 0 < initial_backoff <= max_backoff");
  }
  if (options.backoff_jitter < 0) {
    return invalidArgument("informer: backoff_jitter must not be negative");
  }
  return okStatus();
}

template <typename R>
StatusOr<std::unique_ptr<Informer<R>>> Informer<R>::create(KubeApi& api, Clock& clock,
                                                           Options options, Handlers handlers) {
  RETURN_IF_ERROR(validate(options));
  return std::make_unique<Informer>(api, clock, std::move(options), std::move(handlers));
}

template <typename R>
Informer<R>::Informer(KubeApi& api, Clock& clock, Options options, Handlers handlers)
    : api_(api),
      clock_(clock),
      options_(std::move(options)),
      handlers_(std::move(handlers)),
      store_(options_.index),
      random_(options_.seed ? *options_.seed : std::random_device{}()) {
  if (Status status = validate(options_); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.toString().c_str());
    std::abort();
  }
}

template <typename R>
Informer<R>::~Informer() {
  stop();
}

template <typename R>
void Informer<R>::start() {
  thread_ = std::jthread([this](const std::stop_token& stop) {
    setThreadName("i:" + std::string(R::kResource));
    run(stop);
  });
}

template <typename R>
void Informer<R>::stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

template <typename R>
bool Informer<R>::hasSynced() const {
  std::lock_guard lock(mu_);
  return synced_;
}

template <typename R>
bool Informer<R>::waitForSync(std::stop_token stop) const {
  std::unique_lock lock(mu_);
  return synced_cv_.wait(lock, std::move(stop), [this] { return synced_; });
}

template <typename R>
std::string Informer<R>::lastResourceVersion() const {
  std::lock_guard lock(mu_);
  return last_resource_version_;
}

template <typename R>
void Informer<R>::setLastResourceVersion(const std::string& resource_version) {
  std::lock_guard lock(mu_);
  last_resource_version_ = resource_version;
}

template <typename R>
Status Informer<R>::lastListError() const {
  std::lock_guard lock(mu_);
  return last_list_error_;
}

template <typename R>
void Informer<R>::notifyRestart(WatchRestart reason) const {
  if (options_.on_watch_restart) {
    options_.on_watch_restart(reason);
  }
}

template <typename R>
void Informer<R>::run(const std::stop_token& stop) {
  bool need_list = true;
  while (!stop.stop_requested()) {
    // List, the first time and after a 410.
    if (need_list) {
      const Status status = listAndReplace(stop);
      if (stop.stop_requested()) {
        return;
      }
      {
        std::lock_guard lock(mu_);
        last_list_error_ = status;
      }
      if (!status.ok()) {
        log::error("informer: list failed", status, {{"resource", R::kResource}});
        failed(stop, /*free_first=*/false);
        continue;
      }
      need_list = false;
    }

    // Watch from the last resourceVersion until the stream ends.
    const Clock::TimePoint started = clock_.now();
    const WatchResult result = watchOnce(stop);
    if (stop.stop_requested()) {
      return;
    }
    if (result.events > 0) {
      failures_ = 0;
    }

    // Decide how to go on.
    if (result.status.ok()) {
      notifyRestart(WatchRestart::kClosed);
      log::debug(2, "informer: watch ended",
                 {{"resource", R::kResource}, {"events", result.events}});
      if (result.events == 0 && clock_.now() - started < kMinHealthyWatch) {
        failed(stop, /*free_first=*/false);
      }
    } else if (result.status.code() == StatusCode::kGone) {
      notifyRestart(WatchRestart::kGone);
      log::info("informer: watch expired, relisting", {{"resource", R::kResource},
                                                       {"resourceVersion", lastResourceVersion()},
                                                       {"reason", result.status.message()}});
      need_list = true;
      if (result.events == 0) {
        failed(stop, /*free_first=*/true);
      }
    } else {
      notifyRestart(WatchRestart::kError);
      log::error("informer: watch failed", result.status,
                 {{"resource", R::kResource}, {"resourceVersion", lastResourceVersion()}});
      failed(stop, /*free_first=*/false);
    }
  }
}

template <typename R>
Status Informer<R>::listAndReplace(const std::stop_token& stop) {
  ListOptions options;
  options.namespace_ = options_.namespace_;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.limit = options_.page_size;
  std::vector<Object> items;
  std::string resource_version;
  bool restarted = false;
  while (true) {
    if (stop.stop_requested()) {
      return cancelled("list " + std::string(R::kName) + ": stopped");
    }
    StatusOr<ObjectList<Object>> page = R::list(api_, options);
    if (!page.ok()) {
      if (page.status().code() == StatusCode::kGone && !options.continue_token.empty() &&
          !restarted) {
        // The continue token expired (compaction): only a new list is
        // consistent, so start over once.
        log::info("informer: continue token expired, restarting the list",
                  {{"resource", R::kResource}, {"items", items.size()}});
        restarted = true;
        items.clear();
        resource_version.clear();
        options.continue_token.clear();
        continue;
      }
      return page.status().withContext("list " + std::string(R::kName));
    }
    // Every page is part of one list at the first page's version.
    if (resource_version.empty()) {
      resource_version = page->resource_version;
    }
    for (auto& item : page->items) {
      if (options_.transform) {
        options_.transform(item);
      }
      items.push_back(std::move(item));
    }
    if (page->continue_token.empty()) {
      break;
    }
    options.continue_token = page->continue_token;
  }

  const size_t count = items.size();
  const std::vector<typename Store<Object>::Change> changes =
      store_.replace(std::move(items), resource_version);
  setLastResourceVersion(resource_version);
  log::info("informer: listed", {{"resource", R::kResource},
                                 {"items", count},
                                 {"changes", changes.size()},
                                 {"resourceVersion", resource_version}});
  for (const auto& change : changes) {
    if (!change.old) {
      if (handlers_.on_add) {
        handlers_.on_add(*change.now);
      }
    } else if (!change.now) {
      if (handlers_.on_delete) {
        handlers_.on_delete(*change.old);
      }
    } else if (handlers_.on_update) {
      handlers_.on_update(*change.old, *change.now);
    }
  }
  // Synced only now, so that whoever waited for it saw the handlers' effects.
  {
    std::lock_guard lock(mu_);
    synced_ = true;
  }
  synced_cv_.notify_all();
  return okStatus();
}

template <typename R>
typename Informer<R>::WatchResult Informer<R>::watchOnce(const std::stop_token& stop) {
  ListOptions options;
  options.namespace_ = options_.namespace_;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.resource_version = lastResourceVersion();
  options.allow_watch_bookmarks = true;
  if constexpr (std::is_same_v<Object, ResourceSlice>) {
    // The answers to the controller's writes are in the store already: their
    // events need not be read past the metadata.
    options.held_slice = [this](const std::string& name) { return store_.get(name); };
  }
  std::uniform_int_distribution<int64_t> timeout(options_.min_watch_timeout.count(),
                                                 options_.max_watch_timeout.count());
  options.timeout_seconds = timeout(random_);

  WatchResult result;
  Status event_error;
  result.status = R::watch(
      api_, options,
      [&](const WatchEvent<Object>& event) {
        if (event.type == WatchEventType::kError) {
          event_error = event.error;
          return false;
        }
        ++result.events;
        handleEvent(event);
        return !stop.stop_requested();
      },
      stop);
  if (result.status.ok() && !event_error.ok()) {
    result.status = event_error;
  }
  return result;
}

template <typename R>
void Informer<R>::handleEvent(const WatchEvent<Object>& event) {
  // Objects are transformed before the store and the handlers see them. The
  // event's object is copied once, into the store (or for a delete, only when
  // there is a transform).
  const auto transformed_copy = [&] {
    Object copy = event.object;
    if (options_.transform) options_.transform(copy);
    return copy;
  };
  switch (event.type) {
    case WatchEventType::kAdded:
    case WatchEventType::kModified: {
      const typename Store<Object>::Change change = store_.applyUpsert(transformed_copy());
      const Object& object = *change.now;
      setLastResourceVersion(object.metadata.resource_version);
      if (!change.old) {
        if (handlers_.on_add) {
          handlers_.on_add(object);
        }
      } else if (change.old->metadata.resource_version != object.metadata.resource_version &&
                 handlers_.on_update) {
        handlers_.on_update(*change.old, object);
      }
      break;
    }
    case WatchEventType::kDeleted: {
      std::optional<Object> transformed;
      if (options_.transform) transformed = transformed_copy();
      const Object& object = transformed ? *transformed : event.object;
      store_.applyDelete(object);
      setLastResourceVersion(object.metadata.resource_version);
      if (handlers_.on_delete) {
        handlers_.on_delete(object);
      }
      break;
    }
    case WatchEventType::kBookmark:
      setLastResourceVersion(event.object.metadata.resource_version);
      break;
    case WatchEventType::kError:
      break;  // handled by the caller
  }
}

template <typename R>
void Informer<R>::failed(const std::stop_token& stop, bool free_first) {
  ++failures_;
  if (free_first && failures_ == 1) {
    return;
  }
  // initial * 2^(failures-1), capped, stretched by jitter, capped again.
  auto base = options_.initial_backoff;
  for (int i = 1; i < failures_ && base < options_.max_backoff; ++i) {
    base *= 2;
  }
  base = std::min(base, options_.max_backoff);
  double factor = 1.0;
  if (options_.backoff_jitter > 0) {
    factor = std::uniform_real_distribution<double>(1.0, 1.0 + options_.backoff_jitter)(random_);
  }
  auto delay =
      std::min(options_.max_backoff, std::chrono::duration_cast<Clock::Duration>(base * factor));
  log::debug(1, "informer: backing off",
             {{"resource", R::kResource},
              {"failures", failures_},
              {"delayMs", std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()}});
  clock_.sleepUntil(clock_.now() + delay, stop);
}

template class Informer<ResourceSlices>;
template class Informer<NodeMetadata>;
template class Informer<Services>;
template class Informer<EndpointSlices>;
template class Informer<Pods>;

}  // namespace rsc::client
