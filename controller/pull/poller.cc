#include "controller/pull/poller.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <utility>

#include "client/codec.h"
#include "common/log.h"
#include "controller/inventory/names.h"

namespace rsc::controller::pull {

namespace {

// The longest a sleeping thread goes without looking at its stop token: stop() must not wait
// out a whole interval.
constexpr Clock::Duration kStopCheckStep = std::chrono::seconds(1);
// How often the same failure of a source is logged again while it lasts.
constexpr Clock::Duration kFailureLogInterval = std::chrono::minutes(5);

}  // namespace

// What one source's thread knows between fetches.
struct Poller::SourceState {
  SourceState(const PullSource& source, Clock& clock, const FetcherOptions& fetch_options)
      : source(source),
        fetcher(*source.transport, clock,
                [&] {
                  FetcherOptions o = fetch_options;
                  o.path = source.path;
                  return o;
                }()),
        last_success(clock.now()),
        throttle(clock, kFailureLogInterval) {}

  const PullSource& source;
  InventoryFetcher fetcher;
  // The ETag of the inventory in the store; empty after a withdrawal, so that the next answer
  // is the whole inventory again.
  std::string etag;
  // The last successful fetch (the start, before the first): the grace counts from here.
  Clock::TimePoint last_success;
  // Answered at least once (the first answer is logged).
  bool answered = false;
  // Failing now, and whether the pools are withdrawn.
  bool failing = false;
  bool expired = false;
  std::string last_message;
  log::Throttle throttle;
};

StatusOr<std::unique_ptr<Poller>> Poller::create(PollerOptions options) {
  if (options.store == nullptr) return invalidArgument("pull: store is required");
  if (options.clock == nullptr) return invalidArgument("pull: clock is required");
  if (options.interval <= Clock::Duration::zero()) {
    return invalidArgument("flag --pull-interval: must be positive");
  }
  if (options.fetch.timeout <= Clock::Duration::zero()) {
    return invalidArgument("flag --pull-timeout: must be positive");
  }
  if (options.grace == Clock::Duration::zero()) {
    options.grace = kDefaultGraceIntervals * options.interval;
  }
  if (options.grace < options.interval) {
    return invalidArgument(
        "flag --pull-grace: must be at least --pull-interval (one failed fetch must not "
        "withdraw a driver's pools)");
  }
  std::set<std::string, std::less<>> drivers;
  for (const PullSource& source : options.sources) {
    const std::string where = "flag --inventory-source " + client::inQuotes(source.driver);
    if (auto why = inventory::driverNameError(source.driver)) {
      return invalidArgument(where + ": the driver name " + *why);
    }
    if (!drivers.insert(source.driver).second) {
      return invalidArgument(where + ": the driver has a source already (one per driver)");
    }
    if (source.transport == nullptr) return invalidArgument(where + ": no transport");
  }
  return std::unique_ptr<Poller>(new Poller(std::move(options)));
}

Poller::Poller(PollerOptions options) : options_(std::move(options)) {
  for (const PullSource& source : options_.sources) {
    states_.push_back(std::make_unique<SourceState>(source, *options_.clock, options_.fetch));
    drivers_.insert(source.driver);
  }
  random_ = options_.random;
  if (!random_) {
    random_ = [engine = std::mt19937_64(std::random_device{}()),
               dist = std::uniform_real_distribution<double>(0, 1)]() mutable {
      return dist(engine);
    };
  }
}

Poller::~Poller() { stop(); }

void Poller::start() {
  for (size_t i = 0; i < states_.size(); ++i) {
    log::info("Pulling inventory",
              {{"driver", states_[i]->source.driver},
               {"url", states_[i]->source.url},
               {"intervalSeconds",
                std::chrono::duration_cast<std::chrono::seconds>(options_.interval).count()},
               {"graceSeconds",
                std::chrono::duration_cast<std::chrono::seconds>(options_.grace).count()}});
    threads_.emplace_back([this, i](const std::stop_token& stop) { run(i, stop); });
  }
}

void Poller::stop() {
  for (std::jthread& t : threads_) t.request_stop();
  for (std::jthread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

bool Poller::pulls(std::string_view driver) const { return drivers_.contains(driver); }

void Poller::run(size_t index, const std::stop_token& stop) {
  Clock& clock = *options_.clock;
  while (!stop.stop_requested()) {
    // The interval counts from the end of a fetch, so a slow endpoint is not asked back to back.
    const Clock::Duration wait = pollOnce(index, stop);
    const Clock::TimePoint next = clock.now() + wait;
    for (Clock::TimePoint now = clock.now(); now < next && !stop.stop_requested();
         now = clock.now()) {
      clock.sleepFor(std::min(next - now, kStopCheckStep));
    }
  }
}

Clock::Duration Poller::nextWait() {
  double r = 0;
  {
    std::lock_guard lock(random_mu_);
    r = std::clamp(random_(), 0.0, 1.0);
  }
  const auto extra =
      std::chrono::duration_cast<Clock::Duration>(options_.interval * (kPullJitter * r));
  return options_.interval + extra;
}

Clock::Duration Poller::pollOnce(size_t index, std::stop_token stop) {
  SourceState& state = *states_.at(index);
  const std::string& driver = state.source.driver;
  reconcile::DesiredStore& store = *options_.store;
  Clock& clock = *options_.clock;

  // Fetch and decode; nothing is applied until the whole answer passed.
  const Clock::TimePoint started = clock.now();
  StatusOr<FetchResult> fetched = state.fetcher.fetch(state.etag, store.serverRelease(), stop);
  const Clock::Duration took = clock.now() - started;
  if (stop.stop_requested()) return nextWait();
  const std::string result = !fetched.ok()        ? fetched.status().reason()
                             : fetched->unchanged ? "unchanged"
                                                  : "ok";
  if (options_.observer.on_fetch) options_.observer.on_fetch(driver, result, took);
  if (!fetched.ok()) {
    failed(state, fetched.status());
    return nextWait();
  }

  // Apply: a 304 renews what the ETag named (pools with a lease stay); a 200 replaces the
  // driver's inventory as PUT /v1/drivers/{driver} does.
  if (fetched->unchanged) {
    for (const reconcile::PoolKey& key : store.keys(driver)) store.renew(key);
  } else {
    const size_t count = fetched->pools.size();
    store.replaceDriver(driver, std::move(fetched->pools));
    if (!state.answered) {
      log::info("Inventory source answered", {{"driver", driver}, {"pools", count}});
    } else {
      log::debug(2, "Pulled inventory applied",
                 {{"driver", driver}, {"pools", count}, {"etag", fetched->etag}});
    }
  }
  state.answered = true;
  state.etag = std::move(fetched->etag);
  state.last_success = clock.now();
  if (options_.observer.on_success) options_.observer.on_success(driver, clock.systemNow());
  recovered(state);
  return nextWait();
}

void Poller::failed(SourceState& state, const Status& error) {
  const std::string& driver = state.source.driver;
  reconcile::DesiredStore& store = *options_.store;
  Clock& clock = *options_.clock;
  const Clock::Duration failing_for = clock.now() - state.last_success;
  const bool first = !state.failing;
  state.failing = true;

  // The status of every pool the source published: what is wrong, and what happens next.
  const std::string message =
      "inventory source " + state.source.url + " failed: " + error.message() +
      (state.expired ? "; the pools were withdrawn after --pull-grace"
                     : "; the pools are withdrawn if it keeps failing for --pull-grace");
  for (const reconcile::PoolKey& key : store.keys(driver)) {
    store.updateStatus(key, [&](reconcile::PoolStatus& s) {
      s.last_error = Status(error.code(), message, error.details(), kReasonSourceFailed);
    });
  }
  if (first || message != state.last_message) {
    log::warning("Inventory source failed", {{"driver", driver},
                                             {"url", state.source.url},
                                             {"reason", error.reason()},
                                             {"error", error.message()}});
  } else if (auto held = state.throttle.allow(driver)) {
    log::warning("Inventory source still failing",
                 {{"driver", driver},
                  {"url", state.source.url},
                  {"error", error.message()},
                  {"failingSeconds",
                   std::chrono::duration_cast<std::chrono::seconds>(failing_for).count()}});
  }
  state.last_message = message;

  // Past the grace: withdraw, like pools whose lease ran out.
  if (!state.expired && failing_for >= options_.grace) {
    state.expired = true;
    state.etag.clear();
    const size_t withdrawn = store.keys(driver).size();
    store.replaceDriver(driver, {});
    if (options_.observer.on_expired) options_.observer.on_expired(driver, true);
    log::warning("Inventory source failed for longer than --pull-grace; its pools are withdrawn",
                 {{"driver", driver},
                  {"url", state.source.url},
                  {"pools", withdrawn},
                  {"graceSeconds",
                   std::chrono::duration_cast<std::chrono::seconds>(options_.grace).count()}});
  }
}

void Poller::recovered(SourceState& state) {
  if (!state.failing) return;
  const std::string& driver = state.source.driver;
  reconcile::DesiredStore& store = *options_.store;
  state.failing = false;
  state.last_message.clear();
  // The source's own errors go; a reconcile's error stays until the reconciler clears it.
  for (const reconcile::PoolKey& key : store.keys(driver)) {
    store.updateStatus(key, [](reconcile::PoolStatus& s) {
      if (s.last_error.reason() == kReasonSourceFailed) s.last_error = okStatus();
    });
  }
  if (state.expired) {
    state.expired = false;
    if (options_.observer.on_expired) options_.observer.on_expired(driver, false);
  }
  log::info("Inventory source answers again", {{"driver", driver}, {"url", state.source.url}});
}

}  // namespace rsc::controller::pull
