#include "client/event_recorder.h"

#include <cstdio>
#include <utility>

#include "common/enum_names.h"
#include "common/thread_name.h"

namespace rsc::client {
namespace {

// The API server's limits of an Event's fields (events.k8s.io/v1 validation).
constexpr size_t kMaxNoteBytes = 1024;
constexpr size_t kMaxNameLength = 128;  // reason, action, reportingInstance
constexpr size_t kMaxObjectName = 253;
// The ".%x" of a name: a dot and up to 16 hex digits of nanoseconds.
constexpr size_t kNameSuffix = 17;

// Cuts `s` to at most `n` bytes without splitting a UTF-8 character.
std::string cut(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n));
}

// What makes two Events the same for the spam filter: the object and reason.
std::string objectKey(const ObjectReference& r) {
  return r.api_version + '\n' + r.kind + '\n' + r.namespace_ + '\n' + r.name + '\n' + r.uid;
}

}  // namespace

constexpr auto kEventResultNames = enumNames<EventResult>({
    {EventResult::kCreated, "created"},
    {EventResult::kSeries, "series"},
    {EventResult::kSpam, "spam_filtered"},
    {EventResult::kQueueFull, "queue_full"},
    {EventResult::kShutdown, "shutdown"},
    {EventResult::kError, "error"},
});

std::string_view eventResultName(EventResult result) { return kEventResultNames(result); }

StatusOr<std::unique_ptr<EventRecorder>> EventRecorder::create(EventRecorderOptions options) {
  if (options.api == nullptr) return invalidArgument("event recorder: api is required");
  if (options.clock == nullptr) return invalidArgument("event recorder: clock is required");
  if (options.reporting_instance.empty() || options.reporting_instance.size() > kMaxNameLength) {
    return invalidArgument("event recorder: reporting instance must have 1 to 128 characters");
  }
  if (options.reporting_controller.empty()) {
    return invalidArgument("event recorder: reporting controller is required");
  }
  if (options.cluster_namespace.empty()) {
    return invalidArgument("event recorder: the namespace of cluster-scoped objects is required");
  }
  if (options.queue_size < 1) return invalidArgument("event recorder: queue size must be >= 1");
  if (options.qps > 0 && options.burst < 1) {
    return invalidArgument("event recorder: burst must be at least 1 when qps is set");
  }
  if (options.spam_burst < 1 || options.spam_qps <= 0) {
    return invalidArgument("event recorder: the spam filter needs a burst >= 1 and qps > 0");
  }
  if (options.series_window < Clock::Duration::zero() ||
      options.flush_timeout < Clock::Duration::zero()) {
    return invalidArgument("event recorder: series window and flush timeout must not be negative");
  }
  if (options.cache_size < 1) return invalidArgument("event recorder: cache size must be >= 1");
  std::unique_ptr<EventRecorder> recorder(new EventRecorder(std::move(options)));
  recorder->sender_ = std::thread([r = recorder.get()] {
    setThreadName("events");
    r->run();
  });
  return recorder;
}

EventRecorder::EventRecorder(EventRecorderOptions options)
    : options_(std::move(options)),
      send_limit_(options_.qps, options_.burst, *options_.clock),
      drop_log_(*options_.clock, std::chrono::seconds(30)) {}

EventRecorder::~EventRecorder() { stop(); }

void EventRecorder::report(std::string_view reason, EventResult result, std::string_view why) {
  if (options_.observer) options_.observer(reason, result);
  if (result == EventResult::kCreated || result == EventResult::kSeries) return;
  const std::string_view name = eventResultName(result);
  if (auto held = drop_log_.allow(name)) {
    log::warning("Kubernetes Event not recorded",
                 {{"reason", std::string(reason)},
                  {"result", std::string(name)},
                  {"error", why.empty() ? std::string("none") : std::string(why)},
                  {"heldBackLines", static_cast<int64_t>(*held)}});
  }
}

bool EventRecorder::allowLocked(const std::string& key) {
  auto it = spam_.find(key);
  if (it == spam_.end()) {
    // The least recently used object is forgotten: it starts again with a
    // full bucket, as in client-go's LRU.
    if (spam_.size() >= options_.cache_size) {
      spam_.erase(spam_lru_.back());
      spam_lru_.pop_back();
    }
    spam_lru_.push_front(key);
    SpamEntry entry{
        std::make_unique<TokenBucket>(options_.spam_qps, options_.spam_burst, *options_.clock),
        spam_lru_.begin()};
    it = spam_.emplace(key, std::move(entry)).first;
  } else {
    spam_lru_.splice(spam_lru_.begin(), spam_lru_, it->second.lru);
  }
  return it->second.bucket->tryAcquire();
}

void EventRecorder::record(const ObjectReference& regarding, std::string_view type,
                           std::string_view reason, std::string_view action,
                           std::string_view note) {
  Pending p;
  Event& e = p.event;
  e.regarding = regarding;
  e.type = std::string(type);
  e.reason = cut(reason, kMaxNameLength);
  e.action = cut(action, kMaxNameLength);
  e.note = cut(note, kMaxNoteBytes);
  e.reporting_controller = options_.reporting_controller;
  e.reporting_instance = options_.reporting_instance;
  e.metadata.namespace_ =
      regarding.namespace_.empty() ? options_.cluster_namespace : regarding.namespace_;
  const std::string object = objectKey(regarding);
  p.key = object + '\n' + e.reason + '\n' + e.action + '\n' + e.type;

  EventResult dropped;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      dropped = EventResult::kShutdown;
    } else if (!allowLocked(object + '\n' + e.reason)) {
      dropped = EventResult::kSpam;
    } else if (queue_.size() >= options_.queue_size) {
      dropped = EventResult::kQueueFull;
    } else {
      queue_.push_back(std::move(p));
      cv_.notify_all();
      return;
    }
  }
  report(reason, dropped);
}

void EventRecorder::run() {
  std::unique_lock lock(mu_);
  Clock::TimePoint flush_deadline = Clock::TimePoint::max();
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, with nothing left to send
    Pending next = std::move(queue_.front());
    queue_.pop_front();
    const bool stopping = stopping_;
    sending_ = true;
    lock.unlock();
    // While stopping, nothing waits: what finds no token or comes after the
    // flush timeout is dropped.
    const Clock::TimePoint now = options_.clock->now();
    if (stopping && flush_deadline == Clock::TimePoint::max()) {
      flush_deadline = now + options_.flush_timeout;
    }
    if (stopping && (now >= flush_deadline || !send_limit_.tryAcquire())) {
      report(next.event.reason, EventResult::kShutdown, "the recorder is stopping");
    } else {
      if (!stopping) send_limit_.acquire();
      send(std::move(next));
    }
    lock.lock();
    sending_ = false;
    cv_.notify_all();
  }
}

void EventRecorder::send(Pending pending) {
  Event& e = pending.event;
  const Clock::TimePoint now = options_.clock->now();
  const Clock::SystemTime wall = options_.clock->systemNow();

  // A repeat within the window: counted in the stored Event's series.
  if (auto it = sent_.find(pending.key); it != sent_.end()) {
    Sent& s = it->second;
    if (now - s.last_seen <= options_.series_window) {
      EventSeries series;
      series.count = s.count + 1;
      series.last_observed_time = formatMicroTime(wall);
      StatusOr<Event> patched = options_.api->patchEventSeries(s.namespace_, s.name, series);
      if (patched.ok()) {
        s.count = series.count;
        s.last_seen = now;
        report(e.reason, EventResult::kSeries);
        return;
      }
      if (patched.status().code() != StatusCode::kNotFound) {
        report(e.reason, EventResult::kError, patched.status().toString());
        return;
      }
      // The API server deleted the Event (its event TTL, one hour by
      // default): a new one.
    }
    sent_.erase(it);
  }

  // A new Event, named as client-go names them: the object's name and the
  // time in nanoseconds, unique per recorder even when the clock stands still.
  const auto nanos = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(wall.time_since_epoch()).count());
  last_suffix_ = std::max(nanos, last_suffix_ + 1);
  char suffix[kNameSuffix + 1];
  std::snprintf(suffix, sizeof(suffix), ".%llx", static_cast<unsigned long long>(last_suffix_));
  e.metadata.name =
      cut(e.regarding.name.empty() ? "event" : e.regarding.name, kMaxObjectName - kNameSuffix) +
      suffix;
  e.event_time = formatMicroTime(wall);
  StatusOr<Event> created = options_.api->createEvent(e);
  // A create retried after a lost answer finds its own Event.
  if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) {
    report(e.reason, EventResult::kError, created.status().toString());
    return;
  }
  if (sent_.size() >= options_.cache_size) {
    std::erase_if(sent_, [&](const auto& entry) {
      return now - entry.second.last_seen > options_.series_window;
    });
  }
  if (sent_.size() >= options_.cache_size) {
    auto oldest = sent_.begin();
    for (auto it = sent_.begin(); it != sent_.end(); ++it) {
      if (it->second.last_seen < oldest->second.last_seen) oldest = it;
    }
    sent_.erase(oldest);
  }
  sent_[pending.key] = Sent{e.metadata.namespace_, e.metadata.name, 1, now};
  report(e.reason, EventResult::kCreated);
}

void EventRecorder::requestStop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  cv_.notify_all();
}

void EventRecorder::stop() {
  requestStop();
  if (sender_.joinable()) sender_.join();
}

bool EventRecorder::waitIdleForTest(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return queue_.empty() && !sending_; });
}

}  // namespace rsc::client
