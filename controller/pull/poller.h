// Poller: pull mode's schedule (issue 18). Each inventory source (--inventory-source, or an
// endpoint that discovery found) is fetched every --pull-interval, jittered, by a fixed pool of
// --pull-concurrency workers (issue 31: a thread per source let anyone who may create
// EndpointSlices make the controller start threads until its pids limit killed it).
// A 200 answer is what PUT /v1/drivers/{driver} would bring from that source (its pools in the
// DesiredStore, pools it left out withdrawn), so planning, minimal writes, statuses and leases
// downstream are shared with push mode; a 304 only renews its pools. A failing source marks its
// pools' status (lastError), and once it has failed (or been gone from discovery) for longer
// than --pull-grace its pools are withdrawn, like pools whose lease ran out.
//
// Leadership: every replica polls, and its own store holds the pulled state; only the leader
// reconciles it (the Controller starts workers on leading and enqueues every known pool). So a
// new leader has the desired state at once, where pushed state must wait for drivers to
// re-push. Followers forward pushes to the leader; nothing pulled is forwarded.
//
// Threading: start() starts --pull-concurrency worker threads, whatever the number of sources;
// a source costs an entry in the due queue. One idle worker at a time is the timer: it waits
// (through Clock::sleepUntil, woken early when an earlier due time arrives) for the earliest
// due time, then moves the due sources, in due order, to the due list and goes back to work; a
// worker fetches one source, applies the outcome and puts it back in the due queue at the end
// of the fetch plus the interval. When more sources are due than workers are free, they wait
// in due order (counted: on_fetch_delay from each source's due time; on_waiting counts those
// moved to the due list, which happens when a worker is free to time). A source is in one
// place at a time (waiting, due, or being fetched), so it is never fetched twice at once,
// pollOnce() included. stop() wakes the timer, abandons the fetches under way (through their
// stop_token) and joins every worker. pollOnce() is also the synchronous step for tests. One
// mutex guards the sources, the drivers, the schedule and every change the Poller makes to the
// store; a fetch runs outside it, on the source's own fetcher.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "client/http_transport.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/status.h"
#include "controller/pull/fetcher.h"
#include "controller/pull/source.h"
#include "controller/reconcile/desired_store.h"

namespace rsc::controller::pull {

// The default of --pull-interval: a driver's inventory changes when hardware does; 30 s keeps
// a change within half a minute at one small GET per source.
inline constexpr Clock::Duration kDefaultPullInterval = std::chrono::seconds(30);
// The default of --pull-grace, in intervals: one lost answer or a restarting endpoint pod must
// not withdraw a driver's devices; three intervals in a row is an endpoint that is gone.
inline constexpr int kDefaultGraceIntervals = 3;
// Each wait is the interval plus up to this fraction of it, so that replicas and sources that
// started together do not fetch in lockstep (client-go's JitterUntil).
inline constexpr double kPullJitter = 0.1;
// Status::reason() of the lastError a failing source puts on its pools.
inline constexpr char kReasonSourceFailed[] = "InventorySourceFailed";

// The default of --pull-max-sources: discovery follows Services that anyone allowed to create
// them may label; past this many sources, new ones are ignored (logged and counted) rather than
// each costing memory, a connection and a share of the --pull-concurrency workers (never a
// thread of its own).
inline constexpr size_t kDefaultMaxSources = 10000;
// The default of --pull-concurrency: a fetch is one small GET, mostly waiting on the network,
// so a few workers keep up with thousands of sources that answer (4 workers at 10 ms a fetch
// are 400 fetches a second; 10,000 sources every 30 s need 333). Sources that hang until
// --pull-timeout hold a worker each for that long, so more workers serve more slow sources,
// at a thread each; the fetch delay metric tells when they do not keep up.
inline constexpr size_t kDefaultPullConcurrency = 4;
// Status::reason() of a source refused because its driver pushes (one source of truth).
inline constexpr char kReasonConflict[] = "Conflict";

// What the Poller reports, for metrics. Each may be unset. Called with the Poller's lock held:
// they must return quickly and not call back into the Poller.
struct PollerObserver {
  // One fetch ended: result is "ok" (200), "unchanged" (304) or the failure reason.
  std::function<void(const std::string& driver, std::string_view result, Clock::Duration took)>
      on_fetch;
  std::function<void(const std::string& driver, Clock::SystemTime when)> on_success;
  // The number of sources `driver` is pulled from changed (0: it is not pulled any more).
  std::function<void(const std::string& driver, size_t sources)> on_sources;
  // The number of `driver`'s sources whose pools were withdrawn after the grace changed.
  std::function<void(const std::string& driver, size_t expired)> on_expired;
  // A discovered source was ignored: over --pull-max-sources, or its URL or transport failed.
  std::function<void(IgnoredReason reason)> on_ignored;
  // A worker started a source's step `late` after it was due (the workers were busy).
  std::function<void(Clock::Duration late)> on_fetch_delay;
  // The number of sources that are due and wait for a free worker changed.
  std::function<void(size_t waiting)> on_waiting;
};

// Builds the transport of a source.
using TransportFactory = std::function<StatusOr<std::shared_ptr<client::HttpTransport>>(
    const SourceSpec& spec, const SourceUrl& url)>;

struct PollerOptions {
  reconcile::DesiredStore* store = nullptr;  // required
  Clock* clock = nullptr;                    // required
  // The sources the operator configured (--inventory-source): polled for the process's life.
  std::vector<SourceSpec> sources;
  Clock::Duration interval = kDefaultPullInterval;
  // 0: kDefaultGraceIntervals x interval.
  Clock::Duration grace = Clock::Duration::zero();
  // Timeout and body limits of each fetch, and --allow-unbound-node-pools; the path and the
  // caller come from each source.
  FetcherOptions fetch;
  // How HTTPS endpoints are checked and the controller authenticates to them.
  SourceCredentials credentials;
  // At most this many sources at once (--pull-max-sources); configured ones always count.
  size_t max_sources = kDefaultMaxSources;
  // How many fetches run at once (--pull-concurrency): the number of worker threads.
  size_t concurrency = kDefaultPullConcurrency;
  // Unset: sourceTransport() with `credentials`.
  TransportFactory transport;
  // Returns a number in [0, 1) for the jitter. Unset: a random generator.
  std::function<double()> random;
  PollerObserver observer;
};

// Several sources may serve one driver (a DaemonSet: one endpoint per node). The driver's
// desired pools are the union of its sources' last good answers; a pool two sources serve is
// taken from a healthy one before a failing or departed one, and then from the source known
// longest, so that a rolling update of the endpoints changes nothing. Only the pools an answer
// changes are put or removed, so a fetch costs in proportion to its own answer.
//
// One source of truth per driver: a push for a pulled driver is refused (pulls()), and a driver
// that has pushed pools when a source for it appears is not pulled (each fetch fails with
// kReasonConflict) until they are gone.
class Poller {
 public:
  // Fails with InvalidArgument naming the source or option that cannot work: a missing store
  // or clock, a driver name that is not valid, a driver with two configured sources, a URL or
  // transport that cannot work, a non-positive interval or timeout, a grace shorter than the
  // interval, no workers.
  static StatusOr<std::unique_ptr<Poller>> create(PollerOptions options);
  ~Poller();

  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Starts the workers; each source is fetched at once (in the order the sources became
  // known, as workers free up), then every interval after its fetch ended.
  void start();
  // Stops the workers (answers under way are abandoned) and joins them.
  void stop();

  // Discovery's complete list of sources, replacing the previous one (configured sources stay).
  // A new source is polled at once (when started); a source no longer listed is not fetched
  // again, and its pools are withdrawn once --pull-grace has passed since it went, unless it
  // comes back or another source serves them. A spec that cannot work is logged and ignored.
  void setDiscovered(const std::vector<SourceSpec>& sources);

  // True when `driver`'s inventory is pulled: the push API refuses writes for it.
  bool pulls(std::string_view driver) const;

  // One step of source `id`: fetches it once and applies the outcome, or, for a source no
  // longer listed, withdraws its pools once the grace since it went has passed. Returns how
  // long to wait before the next step. For tests; an unknown id: zero. Waits while a worker
  // fetches the same source; when started, the source's next step is due after the wait.
  Clock::Duration pollOnce(const std::string& id, std::stop_token stop = {});

  // For tests: waits until no source is due, `stepping` steps are under way (a fetch the test
  // holds) and the timer waits for the next due time. The timeout is a safety net, never the
  // synchronisation; false on timeout.
  bool waitIdleForTest(size_t stepping = 0,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

  // The ids of the sources known now, departed ones included until their pools are withdrawn.
  std::vector<std::string> sourceIds() const;

 private:
  struct Source;
  struct Driver;

  explicit Poller(PollerOptions options);
  // Builds the state of `spec`, or fails naming what cannot work.
  StatusOr<std::unique_ptr<Source>> makeSource(const SourceSpec& spec);
  // Adds `source` to its driver and, when started, makes it due now.
  void addLocked(std::unique_ptr<Source> source);
  void startLocked(Source& source);
  // Starts the workers with the first source: a controller that pulls nothing
  // runs none.
  void ensureWorkersLocked();
  // The schedule; all with mu_ held. A source not in it is put in the due queue at `when`.
  void scheduleLocked(Source& source, Clock::TimePoint when);
  // Takes `source` out of the due queue or the due list (not out of a fetch).
  void unscheduleLocked(Source& source);
  // The step of `source` that the caller claimed ended after `wait`: it is due again, or,
  // retired, handed back to be destroyed outside mu_.
  std::unique_ptr<Source> finishedLocked(Source& source, Clock::Duration wait);
  // Retired sources no step holds, to be destroyed outside mu_.
  std::vector<std::unique_ptr<Source>> takeRetiredLocked();
  void reportWaitingLocked();
  // A worker's loop: fetches the due sources, and, when none is due and no other worker does,
  // waits for the next due time.
  void workLoop(const std::stop_token& stop);
  // The timer's turn, by the worker that holds it: moves the sources due now to the due list,
  // or, when none is, waits (unlocking `lock`) until the earliest due time or a wake.
  void timeLocked(std::unique_lock<std::mutex>& lock);
  // One step of a source the caller claimed; the source outlives the call (a retired source
  // is kept until the step that holds it ends).
  Clock::Duration step(Source& source, std::stop_token stop);
  Clock::Duration nextWait();

  // Applying outcomes; all with mu_ held.
  void answeredLocked(Source& source, FetchResult fetched);
  // A fetch failed: the pools' status, the log, and the withdrawal after the grace.
  void failedLocked(Source& source, const Status& error);
  // A failing source answered (and its pools are settled): its status and the log.
  void recoveredLocked(Source& source);
  // `source` no longer serves pool `name` of `driver`.
  static void unserveLocked(Driver& driver, const std::string& name, const Source& source);
  // The source's pools are withdrawn (past the grace).
  void expireLocked(Source& source);
  // Puts or removes each of `driver`'s pools in `names` as its best source now has it.
  void settleLocked(Driver& driver, const std::vector<std::string>& names);
  // The conflict with pushed pools, checked again; true while it lasts.
  bool conflictLocked(Driver& driver);
  // Sets the status of each pool that `source` is the best source of.
  void setStatusLocked(Source& source, const std::optional<Status>& error);
  void reportExpiredLocked(const Driver& driver);
  // Takes a departed source whose pools are gone out of its driver.
  void retireLocked(Source& source);
  // Discovery no longer lists the source: its grace starts.
  void departLocked(Source& source);
  // Counts and logs (rate-limited) a discovered spec that is not pulled.
  void ignoredLocked(IgnoredReason reason, const SourceSpec& spec, const std::string& why);
  static std::vector<std::string> poolNames(const Source& source);

  // An entry of the due queue: the source's next step is due `when`; ties in the order the
  // sources became known.
  struct Due {
    Clock::TimePoint when;
    uint64_t seq = 0;
    Source* source = nullptr;
    bool operator<(const Due& other) const {
      return when != other.when ? when < other.when : seq < other.seq;
    }
  };

  const PollerOptions options_;
  mutable std::mutex mu_;
  bool started_ = false;   // guarded by mu_
  uint64_t next_seq_ = 0;  // guarded by mu_
  // Every source by id; guarded by mu_ (a Source's fetcher belongs to the step that claimed it).
  std::map<std::string, std::unique_ptr<Source>, std::less<>> sources_;
  // Retired sources; destroyed outside mu_ once no step holds them.
  std::vector<std::unique_ptr<Source>> retired_;
  // The schedule; guarded by mu_. Sources not due yet, earliest first.
  std::set<Due> waiting_;
  // Sources due, waiting for a worker, in due order.
  std::deque<Source*> due_;
  size_t fetching_ = 0;  // steps under way
  // The timer is a role, not a thread: the worker that holds it waits for the earliest due
  // time (timer_asleep_) until `timer_until_`, or until `wake_` is stopped (a new one for each
  // wait).
  bool timer_held_ = false;
  std::stop_source wake_;
  Clock::TimePoint timer_until_ = Clock::TimePoint::max();
  bool timer_asleep_ = false;
  // Workers wait for due_ or the timer; pollOnce() for a worker's step to end; tests for
  // idleness.
  mutable std::condition_variable_any changed_;
  std::vector<std::jthread> workers_;
  log::Throttle busy_log_;
  std::map<std::string, std::unique_ptr<Driver>, std::less<>> drivers_;  // guarded by mu_
  std::mutex random_mu_;
  std::function<double()> random_;  // guarded by random_mu_
  log::Throttle ignored_log_;
};

}  // namespace rsc::controller::pull
