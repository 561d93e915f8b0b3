// EventRecorder: records Kubernetes Events (events.k8s.io/v1) about objects the
// way client-go's events recorder does, for operators' `kubectl get events`.
// record() never blocks: it passes a spam filter (a token bucket per regarding
// object and reason) and joins a bounded queue; one sender thread creates the
// Event, or, when the same Event was sent within series_window, sets the
// stored Event's series (count, lastObservedTime) instead of creating another.
// Whatever is dropped (spam, full queue, shutdown) or fails is reported to the
// observer and logged rate-limited. Threading: record() from any thread; one
// sender thread; stop() (or the destructor) once, bounded by flush_timeout
// plus one API call.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "client/kube_api.h"
#include "client/token_bucket.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"

namespace rsc::client {

// What became of one record() call; the `result` label of the events metric.
enum class EventResult {
  kCreated,    // "created": a new Event
  kSeries,     // "series": a repeat, counted in the stored Event's series
  kSpam,       // "spam_filtered": the object and reason used up their tokens
  kQueueFull,  // "queue_full": the sender is behind by queue_size Events
  kShutdown,   // "shutdown": still queued when stop()'s flush timeout ran out
  kError,      // "error": the API server refused it or could not be reached
};
std::string_view eventResultName(EventResult result);

// The queue of client-go's broadcaster holds this many Events.
inline constexpr size_t kDefaultEventQueueSize = 1000;
// Events are advice for people: a steady one per second, in bursts of 25,
// leaves --kube-api-qps to the slice writes they share it with.
inline constexpr double kDefaultEventQps = 1.0;
inline constexpr int kDefaultEventBurst = 25;
// client-go's spam filter: 25 Events per object and reason at once, then one
// every five minutes.
inline constexpr int kDefaultEventSpamBurst = 25;
inline constexpr double kDefaultEventSpamQps = 1.0 / 300;
// client-go's recorder ends a series six minutes after its last repeat: a
// repeat after that starts a new Event.
inline constexpr Clock::Duration kDefaultEventSeriesWindow = std::chrono::minutes(6);
// Objects the spam filter and the series cache remember (client-go's LRU).
inline constexpr size_t kDefaultEventCacheSize = 4096;
// How long stop() keeps sending what is queued.
inline constexpr Clock::Duration kDefaultEventFlushTimeout = std::chrono::seconds(2);

struct EventRecorderOptions {
  // Required.
  KubeApi* api = nullptr;
  Clock* clock = nullptr;
  // reportingInstance: the replica's identity (at most 128 characters).
  std::string reporting_instance;
  // Optional.
  std::string reporting_controller = "resourceslice-controller";
  // Where Events about cluster-scoped objects (ResourceSlices, Nodes) go;
  // client-go puts them in "default" too.
  std::string cluster_namespace = "default";
  size_t queue_size = kDefaultEventQueueSize;
  // The sender's rate limit over all Events; qps <= 0 turns it off.
  double qps = kDefaultEventQps;
  int burst = kDefaultEventBurst;
  int spam_burst = kDefaultEventSpamBurst;
  double spam_qps = kDefaultEventSpamQps;
  Clock::Duration series_window = kDefaultEventSeriesWindow;
  size_t cache_size = kDefaultEventCacheSize;
  Clock::Duration flush_timeout = kDefaultEventFlushTimeout;
  // Told the fate of every record() call: from record()'s thread for drops
  // there, from the sender thread otherwise. Must be cheap and thread-safe.
  std::function<void(std::string_view reason, EventResult result)> observer;
};

class EventRecorder {
 public:
  static constexpr std::string_view kNormal = "Normal";
  static constexpr std::string_view kWarning = "Warning";

  // Fails with InvalidArgument naming the option that cannot work. Starts
  // the sender thread.
  static StatusOr<std::unique_ptr<EventRecorder>> create(EventRecorderOptions options);
  ~EventRecorder();
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Queues an Event about `regarding`; returns at once. `type` is kNormal or
  // kWarning; `reason` UpperCamelCase (at most 128 characters), `action`
  // what was done (UpperCamelCase), `note` a sentence for people (cut to
  // the API server's 1 kB). After stop(), drops it (kShutdown).
  void record(const ObjectReference& regarding, std::string_view type, std::string_view reason,
              std::string_view action, std::string_view note);

  // Begins stopping without waiting: record() drops from now on, and the
  // sender sends what is queued for at most flush_timeout, then drops it.
  void requestStop();
  // requestStop(), then joins the sender. Idempotent.
  void stop();

  // Tests: blocks until the queue is empty and the sender idle; false after
  // a safety timeout.
  bool waitIdleForTest(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  struct Pending {
    Event event;
    std::string key;  // regarding, reason, action, type: what a series repeats
  };
  // A sent Event and when it was last seen, for series.
  struct Sent {
    std::string namespace_;
    std::string name;
    int32_t count = 1;
    Clock::TimePoint last_seen;
  };
  // One spam filter bucket; lru points at its entry in spam_lru_.
  struct SpamEntry {
    std::unique_ptr<TokenBucket> bucket;
    std::list<std::string>::iterator lru;
  };

  explicit EventRecorder(EventRecorderOptions options);
  void run();
  void send(Pending pending);
  // Whether the spam filter lets an Event about `key` pass. Requires mu_.
  bool allowLocked(const std::string& key);
  void report(std::string_view reason, EventResult result, std::string_view why = {});

  const EventRecorderOptions options_;
  TokenBucket send_limit_;
  log::Throttle drop_log_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;                        // guarded by mu_
  bool stopping_ = false;                            // guarded by mu_
  bool sending_ = false;                             // guarded by mu_
  std::unordered_map<std::string, SpamEntry> spam_;  // guarded by mu_
  std::list<std::string> spam_lru_;                  // guarded by mu_, newest first
  std::map<std::string, Sent> sent_;                 // sender thread only
  uint64_t last_suffix_ = 0;                         // sender thread only
  std::thread sender_;
};

}  // namespace rsc::client
