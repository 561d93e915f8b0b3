// Poller: pull mode's schedule (issue 18). Each inventory source (--inventory-source) is
// fetched on its own thread every --pull-interval, jittered; a 200 answer replaces the driver's
// whole inventory in the DesiredStore exactly as PUT /v1/drivers/{driver} does, so planning,
// minimal writes, statuses and leases downstream are shared with push mode; a 304 only renews
// the driver's pools. A failing source marks its pools' status (lastError), and once it has
// failed for longer than --pull-grace its pools are withdrawn, like pools whose lease ran out.
//
// Leadership: every replica polls, and its own store holds the pulled state; only the leader
// reconciles it (the Controller starts workers on leading and enqueues every known pool). So a
// new leader has the desired state at once, where pushed state must wait for drivers to
// re-push. Followers forward pushes to the leader; nothing pulled is forwarded.
//
// Threading: one thread per source (start/stop); pollOnce() is also the synchronous step for
// tests. The store is thread-safe; per-source state belongs to its thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "client/http_transport.h"
#include "common/clock.h"
#include "common/status.h"
#include "controller/pull/fetcher.h"
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

// One inventory source: the driver it speaks for and how to reach it.
struct PullSource {
  std::string driver;
  // As configured, for logs and statuses.
  std::string url;
  // Path and query to GET (parseSourceUrl).
  std::string path;
  // Talks to the URL's server; shared so that tests can keep their fake.
  std::shared_ptr<client::HttpTransport> transport;
};

// What the Poller reports, for metrics. Each may be unset.
struct PollerObserver {
  // One fetch ended: result is "ok" (200), "unchanged" (304) or the failure reason.
  std::function<void(const std::string& driver, std::string_view result, Clock::Duration took)>
      on_fetch;
  std::function<void(const std::string& driver, Clock::SystemTime when)> on_success;
  // The source's pools were withdrawn after the grace (true), or it answered again (false).
  std::function<void(const std::string& driver, bool expired)> on_expired;
};

struct PollerOptions {
  reconcile::DesiredStore* store = nullptr;  // required
  Clock* clock = nullptr;                    // required
  std::vector<PullSource> sources;
  Clock::Duration interval = kDefaultPullInterval;
  // 0: kDefaultGraceIntervals x interval.
  Clock::Duration grace = Clock::Duration::zero();
  // Timeout and body limits of each fetch; `path` comes from each source.
  FetcherOptions fetch;
  // Returns a number in [0, 1) for the jitter. Unset: a random generator.
  std::function<double()> random;
  PollerObserver observer;
};

class Poller {
 public:
  // Fails with InvalidArgument naming the source or option that cannot work: a missing store
  // or clock, a driver name that is not valid, a driver with two sources, a non-positive
  // interval or timeout, a grace shorter than the interval.
  static StatusOr<std::unique_ptr<Poller>> create(PollerOptions options);
  ~Poller();

  Poller(const Poller&) = delete;
  Poller& operator=(const Poller&) = delete;

  // Starts one thread per source; each fetches at once, then every interval.
  void start();
  // Stops the threads (an answer under way is abandoned) and joins them.
  void stop();

  // True when `driver`'s inventory is pulled: the push API refuses writes for it.
  bool pulls(std::string_view driver) const;

  // Fetches source `index` once and applies the outcome; returns how long to wait before the
  // next fetch. For the threads and for tests.
  Clock::Duration pollOnce(size_t index, std::stop_token stop = {});

 private:
  struct SourceState;

  explicit Poller(PollerOptions options);
  void run(size_t index, const std::stop_token& stop);
  Clock::Duration nextWait();
  // A fetch failed: the pools' status, the log, and the withdrawal after the grace.
  void failed(SourceState& state, const Status& error);
  // A fetch succeeded: the failure, if any, is over.
  void recovered(SourceState& state);

  const PollerOptions options_;
  std::vector<std::unique_ptr<SourceState>> states_;
  std::set<std::string, std::less<>> drivers_;
  std::mutex random_mu_;
  std::function<double()> random_;  // guarded by random_mu_
  std::vector<std::jthread> threads_;
};

}  // namespace rsc::controller::pull
