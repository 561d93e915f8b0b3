#include "controller/pull/poller.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "client/codec.h"
#include "client/names.h"
#include "common/strings.h"
#include "common/thread_name.h"

namespace rsc::controller::pull {

namespace {

// How often the same failure of a source is logged again while it lasts.
constexpr Clock::Duration kFailureLogInterval = std::chrono::minutes(5);

int64_t wholeSeconds(Clock::Duration d) {
  return std::chrono::duration_cast<std::chrono::seconds>(d).count();
}

}  // namespace

// One source: its spec, its fetcher, and what it last answered.
struct Poller::Source {
  Source(SourceSpec spec, std::shared_ptr<client::HttpTransport> transport, Clock& clock,
         FetcherOptions fetch_options)
      : spec(std::move(spec)),
        transport(std::move(transport)),
        fetcher(*this->transport, clock, std::move(fetch_options)),
        last_success(clock.now()),
        throttle(clock, kFailureLogInterval) {}

  const SourceSpec spec;
  // Its key in sources_: the spec's id, or, once a changed spec replaced it, a key of its own.
  std::string key;
  const std::shared_ptr<client::HttpTransport> transport;
  // Used by the one step that claimed the source (state kStepping): a worker or pollOnce().
  InventoryFetcher fetcher;
  // The rest is guarded by the Poller's mutex.
  uint64_t seq = 0;  // the order sources became known: the older serves a shared pool
  bool configured = false;
  // The ETag of the answer in `pools`; empty after a withdrawal, so that the next answer is
  // the whole inventory again.
  std::string etag;
  // The last good answer's pools; empty once withdrawn.
  std::map<std::string, reconcile::Pool> pools;
  // The last successful fetch (the start, before the first): the grace counts from here.
  Clock::TimePoint last_success;
  // Since when discovery no longer lists it: the grace counts from here.
  std::optional<Clock::TimePoint> gone_since;
  bool answered = false;  // the first answer is logged
  bool failing = false;
  bool expired = false;  // its pools were withdrawn after the grace
  bool retired = false;  // out of its driver and the schedule; destroyed once no step holds it
  std::string last_message;
  log::Throttle throttle;
  // Where the source is in the schedule: in no queue (not started, or retired), in the due
  // queue (waiting_), due and waiting for a worker (due_), or in a step.
  enum class State { kIdle, kWaiting, kDue, kStepping };
  State state = State::kIdle;
  Clock::TimePoint due;  // kWaiting, kDue: when its step was due

  bool healthy() const { return !failing && !gone_since; }
  // Whether this source's copy of a pool beats `other`'s.
  bool beats(const Source& other) const {
    if (healthy() != other.healthy()) return healthy();
    return seq < other.seq;
  }
};

std::vector<std::string> Poller::poolNames(const Source& source) {
  std::vector<std::string> names;
  names.reserve(source.pools.size());
  for (const auto& [name, pool] : source.pools) names.push_back(name);
  return names;
}

// A driver that is pulled: its sources and which of their pools are in the store.
struct Poller::Driver {
  std::string name;
  std::vector<Source*> sources;  // not retired
  // Pool name -> the sources whose last good answer has it.
  std::map<std::string, std::vector<Source*>> servers;
  // The pools the Poller has put in the store.
  std::set<std::string> applied;
  // The store held pools of this driver that no source brought (pushed) when it was last
  // checked: not pulled until they are gone.
  bool conflict = false;
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
  if (options.concurrency == 0) {
    return invalidArgument("flag --pull-concurrency: must be at least 1");
  }
  if (options.grace < options.interval) {
    return invalidArgument(
        "flag --pull-grace: must be at least --pull-interval (one failed fetch must not "
        "withdraw a driver's pools)");
  }
  if (!options.transport) {
    options.transport = [credentials = options.credentials, clock = options.clock](
                            const SourceSpec& spec, const SourceUrl& url) {
      return sourceTransport(url, spec, credentials, *clock);
    };
  }
  std::set<std::string, std::less<>> drivers;
  for (const SourceSpec& spec : options.sources) {
    const std::string where = "flag --inventory-source " + inQuotes(spec.driver);
    if (!drivers.insert(spec.driver).second) {
      return invalidArgument(where + ": the driver has a source already (one per driver)");
    }
  }
  std::unique_ptr<Poller> poller(new Poller(std::move(options)));
  std::lock_guard lock(poller->mu_);
  for (const SourceSpec& spec : poller->options_.sources) {
    StatusOr<std::unique_ptr<Source>> source = poller->makeSource(spec);
    if (!source.ok()) {
      return invalidArgument("flag --inventory-source " + inQuotes(spec.driver) + ": " +
                             source.status().message());
    }
    (*source)->configured = true;
    poller->addLocked(std::move(*source));
  }
  return poller;
}

Poller::Poller(PollerOptions options)
    : options_(std::move(options)),
      busy_log_(*options_.clock, kFailureLogInterval),
      ignored_log_(*options_.clock, kFailureLogInterval) {
  random_ = options_.random;
  if (!random_) {
    random_ = [engine = std::mt19937_64(std::random_device{}()),
               dist = std::uniform_real_distribution<double>(0, 1)]() mutable {
      return dist(engine);
    };
  }
}

Poller::~Poller() { stop(); }

StatusOr<std::unique_ptr<Poller::Source>> Poller::makeSource(const SourceSpec& spec) {
  if (const Status why = client::driverNameError(spec.driver); !why.ok()) {
    return invalidArgument("the driver name " + why.message());
  }
  ASSIGN_OR_RETURN(SourceUrl url, parseSourceUrl(spec.url));
  StatusOr<std::shared_ptr<client::HttpTransport>> transport = options_.transport(spec, url);
  if (!transport.ok()) return std::move(transport).status();
  if (*transport == nullptr) return invalidArgument("no transport");
  FetcherOptions fetch = options_.fetch;
  fetch.path = url.path_and_query;
  fetch.driver = spec.driver;
  fetch.caller = spec.caller;
  // A refusal names the endpoint: "the endpoint ns/svc/10.1.2.3:9000 is bound to node ...".
  fetch.caller.subject = "the endpoint " + spec.id;
  return std::make_unique<Source>(spec, std::move(*transport), *options_.clock, std::move(fetch));
}

void Poller::addLocked(std::unique_ptr<Source> owned) {
  Source& source = *owned;
  source.seq = next_seq_++;
  auto [it, created] = drivers_.try_emplace(source.spec.driver);
  if (created) {
    it->second = std::make_unique<Driver>();
    it->second->name = source.spec.driver;
    // Pools of the driver already in the store were pushed: pull only once they are gone.
    it->second->conflict = !options_.store->keys(source.spec.driver).empty();
  }
  Driver& driver = *it->second;
  driver.sources.push_back(&source);
  if (options_.observer.on_sources) {
    options_.observer.on_sources(driver.name, driver.sources.size());
  }
  source.key = source.spec.id;
  sources_[source.key] = std::move(owned);
  if (started_) startLocked(source);
}

void Poller::startLocked(Source& source) {
  ensureWorkersLocked();
  log::info("Pulling inventory", {{"driver", source.spec.driver},
                                  {"source", source.spec.id},
                                  {"url", source.spec.url},
                                  {"intervalSeconds", wholeSeconds(options_.interval)},
                                  {"graceSeconds", wholeSeconds(options_.grace)}});
  // Due at once; one in a step (pollOnce) is put back in the queue when the step ends.
  if (source.state == Source::State::kIdle) scheduleLocked(source, options_.clock->now());
}

void Poller::scheduleLocked(Source& source, Clock::TimePoint when) {
  if (source.state != Source::State::kIdle) return;
  source.state = Source::State::kWaiting;
  source.due = when;
  waiting_.insert(Due{when, source.seq, &source});
  // An earlier due time than the timer waits for wakes it (awake from now on, for
  // waitIdleForTest()).
  if (when < timer_until_) {
    wake_.request_stop();
    timer_asleep_ = false;
  }
}

void Poller::unscheduleLocked(Source& source) {
  if (source.state == Source::State::kWaiting) {
    waiting_.erase(Due{source.due, source.seq, &source});
  } else if (source.state == Source::State::kDue) {
    std::erase(due_, &source);
    reportWaitingLocked();
  } else {
    return;
  }
  source.state = Source::State::kIdle;
}

std::unique_ptr<Poller::Source> Poller::finishedLocked(Source& source, Clock::Duration wait) {
  source.state = Source::State::kIdle;
  --fetching_;
  changed_.notify_all();
  if (source.retired) {
    auto it = std::find_if(retired_.begin(), retired_.end(),
                           [&](const auto& retired) { return retired.get() == &source; });
    if (it == retired_.end()) return nullptr;
    std::unique_ptr<Source> gone = std::move(*it);
    retired_.erase(it);
    return gone;
  }
  // The interval counts from the end of a fetch, so a slow endpoint is not asked back to back.
  if (started_) scheduleLocked(source, options_.clock->now() + wait);
  return nullptr;
}

std::vector<std::unique_ptr<Poller::Source>> Poller::takeRetiredLocked() {
  std::vector<std::unique_ptr<Source>> gone;
  std::erase_if(retired_, [&](std::unique_ptr<Source>& source) {
    if (source->state == Source::State::kStepping) return false;
    gone.push_back(std::move(source));
    return true;
  });
  return gone;
}

void Poller::reportWaitingLocked() {
  if (options_.observer.on_waiting) options_.observer.on_waiting(due_.size());
}

void Poller::start() {
  std::lock_guard lock(mu_);
  if (started_) return;
  started_ = true;
  timer_until_ = Clock::TimePoint::max();
  for (auto& [id, source] : sources_) startLocked(*source);
}

void Poller::ensureWorkersLocked() {
  if (!workers_.empty()) return;
  for (size_t i = 0; i < options_.concurrency; ++i) {
    workers_.emplace_back([this](const std::stop_token& stop) {
      setThreadName("pull-fetch");
      workLoop(stop);
    });
  }
}

void Poller::stop() {
  std::vector<std::jthread> workers;
  {
    std::lock_guard lock(mu_);
    started_ = false;
    wake_.request_stop();
    changed_.notify_all();
    workers = std::exchange(workers_, {});
  }
  // Outside mu_: a stop runs the fetches' stop callbacks, which abandon the answers under way.
  for (std::jthread& t : workers) t.request_stop();
  for (std::jthread& t : workers) t.join();
  std::vector<std::unique_ptr<Source>> retired;
  {
    std::lock_guard lock(mu_);
    // Out of the schedule, all at once (unscheduleLocked() one by one would cost a scan of the
    // due list each).
    for (auto& [id, source] : sources_) {
      if (source->state != Source::State::kStepping) source->state = Source::State::kIdle;
    }
    waiting_.clear();
    due_.clear();
    reportWaitingLocked();
    timer_until_ = Clock::TimePoint::max();
    timer_asleep_ = false;
    retired = takeRetiredLocked();
  }
}

void Poller::timeLocked(std::unique_lock<std::mutex>& lock) {
  Clock& clock = *options_.clock;
  const Clock::TimePoint now = clock.now();
  const size_t before = due_.size();
  while (!waiting_.empty() && waiting_.begin()->when <= now) {
    Source& source = *waiting_.begin()->source;
    waiting_.erase(waiting_.begin());
    source.state = Source::State::kDue;
    due_.push_back(&source);
  }
  if (due_.size() != before) {
    // The timer goes back to work; another idle worker (or this one, after its fetch) takes
    // its place.
    reportWaitingLocked();
    const size_t free = options_.concurrency - std::min(options_.concurrency, fetching_);
    if (due_.size() > free) {
      if (auto held = busy_log_.allow("busy")) {
        log::warning(
            "Every pull worker is busy; due inventory sources wait for one (see "
            "resourceslice_controller_pull_fetch_delay_seconds; raise --pull-concurrency if "
            "they keep waiting)",
            {{"waiting", due_.size() - free},
             {"concurrency", options_.concurrency},
             {"linesHeldBack", *held}});
      }
    }
    return;
  }
  // With nothing queued, the timer still looks again within an interval.
  timer_until_ = waiting_.empty() ? now + options_.interval : waiting_.begin()->when;
  wake_ = std::stop_source();
  const std::stop_token wake = wake_.get_token();
  const Clock::TimePoint until = timer_until_;
  timer_asleep_ = true;
  changed_.notify_all();
  lock.unlock();
  clock.sleepUntil(until, wake);
  lock.lock();
  timer_asleep_ = false;
  timer_until_ = Clock::TimePoint::max();
}

void Poller::workLoop(const std::stop_token& stop) {
  Clock& clock = *options_.clock;
  std::unique_lock lock(mu_);
  while (started_ && !stop.stop_requested()) {
    if (due_.empty()) {
      if (timer_held_) {
        // Another worker waits for the next due time.
        changed_.wait(lock, stop, [&] { return !due_.empty() || !timer_held_ || !started_; });
        continue;
      }
      timer_held_ = true;
      timeLocked(lock);
      timer_held_ = false;
      changed_.notify_all();
      continue;
    }
    Source& source = *due_.front();
    due_.pop_front();
    source.state = Source::State::kStepping;
    ++fetching_;
    reportWaitingLocked();
    if (options_.observer.on_fetch_delay) {
      options_.observer.on_fetch_delay(clock.now() - source.due);
    }
    lock.unlock();
    const Clock::Duration wait = step(source, stop);
    lock.lock();
    if (std::unique_ptr<Source> gone = finishedLocked(source, wait)) {
      lock.unlock();
      gone.reset();
      lock.lock();
    }
  }
}

bool Poller::waitIdleForTest(size_t stepping, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout,
                           [&] { return due_.empty() && fetching_ == stepping && timer_asleep_; });
}

void Poller::setDiscovered(const std::vector<SourceSpec>& specs) {
  std::vector<std::unique_ptr<Source>> retired;
  {
    std::lock_guard lock(mu_);
    // Departures first, so that the sources they free count for the limit below.
    std::map<std::string, const SourceSpec*, std::less<>> listed;
    for (const SourceSpec& spec : specs) listed.emplace(spec.id, &spec);
    std::vector<Source*> departed;
    for (auto& [key, source] : sources_) {
      if (source->configured || source->gone_since) continue;
      auto it = listed.find(key);
      // The same endpoint with another spec (a changed annotation) departs too: a new source
      // takes over its pools as it answers.
      if (it == listed.end() || *it->second != source->spec) departed.push_back(source.get());
    }
    for (Source* source : departed) departLocked(*source);

    for (const SourceSpec& spec : specs) {
      auto it = sources_.find(spec.id);
      if (it != sources_.end() && it->second->gone_since && it->second->spec != spec) {
        // Departed for a changed spec: it stays, under a key of its own, for its grace.
        std::unique_ptr<Source> old = std::move(it->second);
        sources_.erase(it);
        old->key = spec.id + "#" + std::to_string(old->seq);
        const std::string key = old->key;
        sources_[key] = std::move(old);
        it = sources_.end();
      }
      if (it != sources_.end()) {
        Source& source = *it->second;
        if (source.gone_since) {
          // Back before its grace ran out: polled again, its pools kept.
          source.gone_since.reset();
          log::info("Inventory source is listed again", {{"source", spec.id}});
          settleLocked(*drivers_.at(spec.driver), poolNames(source));
          setStatusLocked(source, std::nullopt);
        }
        continue;
      }
      if (sources_.size() >= options_.max_sources) {
        ignoredLocked(IgnoredReason::kOverLimit, spec,
                      "--pull-max-sources (" + std::to_string(options_.max_sources) +
                          ") sources are pulled already");
        continue;
      }
      StatusOr<std::unique_ptr<Source>> source = makeSource(spec);
      if (!source.ok()) {
        ignoredLocked(IgnoredReason::kInvalid, spec, source.status().message());
        continue;
      }
      addLocked(std::move(*source));
    }
    retired = takeRetiredLocked();
  }
}

void Poller::ignoredLocked(IgnoredReason reason, const SourceSpec& spec, const std::string& why) {
  if (options_.observer.on_ignored) options_.observer.on_ignored(reason);
  const std::string_view name = ignoredReasonName(reason);
  if (auto held = ignored_log_.allow(name)) {
    log::warning("Inventory source ignored", {{"source", spec.id},
                                              {"url", spec.url},
                                              {"reason", name},
                                              {"error", why},
                                              {"linesHeldBack", *held}});
  }
}

void Poller::departLocked(Source& source) {
  source.gone_since = options_.clock->now();
  log::info(
      "Inventory source is no longer listed; its pools are withdrawn after --pull-grace "
      "unless it comes back",
      {{"driver", source.spec.driver},
       {"source", source.spec.id},
       {"pools", source.pools.size()},
       {"graceSeconds", wholeSeconds(options_.grace)}});
  if (source.pools.empty()) {
    retireLocked(source);
    return;
  }
  settleLocked(*drivers_.at(source.spec.driver), poolNames(source));
  setStatusLocked(source,
                  Status(StatusCode::kUnavailable,
                         "inventory source " + source.spec.url +
                             " is no longer listed by its Service's EndpointSlices; the pools are "
                             "withdrawn after --pull-grace unless it comes back",
                         {}, kReasonSourceFailed));
}

bool Poller::pulls(std::string_view driver) const {
  std::lock_guard lock(mu_);
  auto it = drivers_.find(driver);
  return it != drivers_.end() && !it->second->conflict;
}

std::vector<std::string> Poller::sourceIds() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  ids.reserve(sources_.size());
  for (const auto& [id, source] : sources_) ids.push_back(id);
  return ids;
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

Clock::Duration Poller::pollOnce(const std::string& id, std::stop_token stop) {
  std::unique_lock lock(mu_);
  Source* source = nullptr;
  while (true) {
    auto it = sources_.find(id);
    if (it == sources_.end()) return Clock::Duration::zero();
    source = it->second.get();
    // Never two steps of one source at once: wait for a worker's to end.
    if (source->state != Source::State::kStepping) break;
    changed_.wait(lock);
  }
  unscheduleLocked(*source);
  source->state = Source::State::kStepping;
  ++fetching_;
  lock.unlock();
  const Clock::Duration wait = step(*source, std::move(stop));
  lock.lock();
  std::unique_ptr<Source> gone = finishedLocked(*source, wait);
  lock.unlock();
  return wait;
}

Clock::Duration Poller::step(Source& source, std::stop_token stop) {
  Clock& clock = *options_.clock;
  std::string etag;
  {
    std::lock_guard lock(mu_);
    if (source.retired) return Clock::Duration::zero();
    if (source.gone_since) {
      // Departed: nothing to fetch; withdraw once the grace has passed.
      const Clock::TimePoint deadline = *source.gone_since + options_.grace;
      // Looked at again within an interval, in case discovery lists it again meanwhile.
      if (clock.now() < deadline) return std::min(deadline - clock.now(), options_.interval);
      expireLocked(source);
      retireLocked(source);
      return Clock::Duration::zero();
    }
    etag = source.etag;
  }

  // Fetch and decode; nothing is applied until the whole answer passed.
  const std::string& driver = source.spec.driver;
  const Clock::TimePoint started = clock.now();
  StatusOr<FetchResult> fetched = source.fetcher.fetch(etag, options_.store->serverRelease(), stop);
  const Clock::Duration took = clock.now() - started;
  if (stop.stop_requested()) return nextWait();

  std::lock_guard lock(mu_);
  if (source.retired || source.gone_since) return nextWait();
  Driver& state = *drivers_.at(driver);
  if (fetched.ok() && conflictLocked(state)) {
    fetched = Status(StatusCode::kAlreadyExists,
                     "driver " + inQuotes(driver) +
                         " has pools that were pushed to the inventory API, and a driver has one "
                         "source of truth: withdraw them (DELETE /v1/drivers/" +
                         driver + ") or stop serving the driver's inventory here",
                     {}, kReasonConflict);
  }
  const std::string result = !fetched.ok()        ? fetched.status().reason()
                             : fetched->unchanged ? "unchanged"
                                                  : "ok";
  if (options_.observer.on_fetch) options_.observer.on_fetch(driver, result, took);
  if (!fetched.ok()) {
    failedLocked(source, fetched.status());
    return nextWait();
  }
  answeredLocked(source, std::move(*fetched));
  return nextWait();
}

bool Poller::conflictLocked(Driver& driver) {
  if (!driver.conflict) return false;
  for (const reconcile::PoolKey& key : options_.store->keys(driver.name)) {
    if (!driver.applied.contains(key.pool)) return true;
  }
  driver.conflict = false;
  log::info("Driver's pushed pools are gone; its inventory is pulled from now on",
            {{"driver", driver.name}});
  return false;
}

void Poller::answeredLocked(Source& source, FetchResult fetched) {
  Driver& driver = *drivers_.at(source.spec.driver);
  reconcile::DesiredStore& store = *options_.store;
  Clock& clock = *options_.clock;
  const bool was_expired = source.expired;
  source.expired = false;
  // Healthy from now on, before anything is settled: the source may win back pools another
  // source held while it failed, in the one settlement below.
  const bool recovering = source.failing;
  source.failing = false;
  if (fetched.unchanged) {
    // A 304 renews what the ETag named (pools with a lease stay).
    for (const auto& [name, pool] : source.pools) {
      if (driver.applied.contains(name)) store.renew({driver.name, name});
    }
    if (recovering) settleLocked(driver, poolNames(source));
  } else {
    // What changes: the pools the source served before or serves now.
    std::vector<std::string> names;
    for (const auto& [name, pool] : source.pools) {
      if (!fetched.pools.contains(name)) {
        names.push_back(name);
        unserveLocked(driver, name, source);
      }
    }
    for (const auto& [name, pool] : fetched.pools) {
      names.push_back(name);
      if (!source.pools.contains(name)) driver.servers[name].push_back(&source);
    }
    const size_t count = fetched.pools.size();
    source.pools = std::move(fetched.pools);
    settleLocked(driver, names);
    if (!source.answered) {
      log::info("Inventory source answered",
                {{"driver", driver.name}, {"source", source.spec.id}, {"pools", count}});
    } else {
      log::debug(2, "Pulled inventory applied",
                 {{"driver", driver.name},
                  {"source", source.spec.id},
                  {"pools", count},
                  {"etag", fetched.etag}});
    }
  }
  if (was_expired) reportExpiredLocked(driver);
  source.answered = true;
  source.etag = std::move(fetched.etag);
  source.last_success = clock.now();
  if (options_.observer.on_success) options_.observer.on_success(driver.name, clock.systemNow());
  if (recovering) recoveredLocked(source);
}

void Poller::unserveLocked(Driver& driver, const std::string& name, const Source& source) {
  auto it = driver.servers.find(name);
  if (it == driver.servers.end()) return;
  std::erase(it->second, &source);
  if (it->second.empty()) driver.servers.erase(it);
}

void Poller::settleLocked(Driver& driver, const std::vector<std::string>& names) {
  reconcile::DesiredStore& store = *options_.store;
  for (const std::string& name : names) {
    const Source* best = nullptr;
    if (auto it = driver.servers.find(name); it != driver.servers.end()) {
      for (const Source* candidate : it->second) {
        if (best == nullptr || candidate->beats(*best)) best = candidate;
      }
    }
    const reconcile::PoolKey key{driver.name, name};
    if (best != nullptr) {
      // Equal content keeps its version and costs no reconcile.
      store.put(key, best->pools.at(name));
      driver.applied.insert(name);
    } else if (driver.applied.erase(name) > 0) {
      store.remove(key);
    }
  }
}

void Poller::setStatusLocked(Source& source, const std::optional<Status>& error) {
  reconcile::DesiredStore& store = *options_.store;
  const Driver& driver = *drivers_.at(source.spec.driver);
  for (const auto& [name, pool] : source.pools) {
    // A pool another, healthier source serves is not this source's to report on.
    const auto& servers = driver.servers.at(name);
    if (std::any_of(servers.begin(), servers.end(),
                    [&](const Source* other) { return other != &source && other->healthy(); })) {
      continue;
    }
    store.updateStatus({driver.name, name}, [&](reconcile::PoolStatus& s) {
      if (error) {
        s.last_error = *error;
      } else if (s.last_error.reason() == kReasonSourceFailed) {
        // The source's own errors go; a reconcile's error stays until the reconciler clears it.
        s.last_error = okStatus();
      }
    });
  }
}

void Poller::failedLocked(Source& source, const Status& error) {
  const std::string& driver = source.spec.driver;
  Clock& clock = *options_.clock;
  const Clock::Duration failing_for = clock.now() - source.last_success;
  const bool first = !source.failing;
  source.failing = true;
  if (first && !source.pools.empty()) {
    // Another source serving the same pools now wins them.
    settleLocked(*drivers_.at(driver), poolNames(source));
  }

  // The status of every pool the source published: what is wrong, and what happens next.
  const std::string message =
      "inventory source " + source.spec.url + " failed: " + error.message() +
      (source.expired ? "; the pools were withdrawn after --pull-grace"
                      : "; the pools are withdrawn if it keeps failing for --pull-grace");
  setStatusLocked(source, Status(error.code(), message, error.details(), kReasonSourceFailed));
  if (first || message != source.last_message) {
    log::warning("Inventory source failed", {{"driver", driver},
                                             {"source", source.spec.id},
                                             {"url", source.spec.url},
                                             {"reason", error.reason()},
                                             {"error", error.message()}});
  } else if (auto held = source.throttle.allow(driver)) {
    log::warning("Inventory source still failing", {{"driver", driver},
                                                    {"source", source.spec.id},
                                                    {"url", source.spec.url},
                                                    {"error", error.message()},
                                                    {"failingSeconds", wholeSeconds(failing_for)}});
  }
  source.last_message = message;

  // Past the grace: withdraw, like pools whose lease ran out.
  if (!source.expired && failing_for >= options_.grace) {
    const size_t withdrawn = source.pools.size();
    expireLocked(source);
    log::warning("Inventory source failed for longer than --pull-grace; its pools are withdrawn",
                 {{"driver", driver},
                  {"source", source.spec.id},
                  {"url", source.spec.url},
                  {"pools", withdrawn},
                  {"graceSeconds", wholeSeconds(options_.grace)}});
  }
}

void Poller::expireLocked(Source& source) {
  Driver& driver = *drivers_.at(source.spec.driver);
  source.expired = true;
  source.etag.clear();
  std::vector<std::string> names;
  for (const auto& [name, pool] : source.pools) {
    names.push_back(name);
    unserveLocked(driver, name, source);
  }
  source.pools.clear();
  settleLocked(driver, names);
  reportExpiredLocked(driver);
}

void Poller::reportExpiredLocked(const Driver& driver) {
  if (!options_.observer.on_expired) return;
  const size_t expired = std::count_if(driver.sources.begin(), driver.sources.end(),
                                       [](const Source* s) { return s->expired; });
  options_.observer.on_expired(driver.name, expired);
}

void Poller::recoveredLocked(Source& source) {
  source.last_message.clear();
  setStatusLocked(source, std::nullopt);
  log::info("Inventory source answers again",
            {{"driver", source.spec.driver}, {"source", source.spec.id}, {"url", source.spec.url}});
}

void Poller::retireLocked(Source& source) {
  auto it = drivers_.find(source.spec.driver);
  source.retired = true;
  if (it != drivers_.end()) {
    Driver& driver = *it->second;
    std::erase(driver.sources, &source);
    if (options_.observer.on_sources) {
      options_.observer.on_sources(driver.name, driver.sources.size());
    }
    reportExpiredLocked(driver);
    if (driver.sources.empty()) drivers_.erase(it);
  }
  unscheduleLocked(source);
  auto owned = sources_.find(source.key);
  if (owned != sources_.end() && owned->second.get() == &source) {
    retired_.push_back(std::move(owned->second));
    sources_.erase(owned);
  }
}

}  // namespace rsc::controller::pull
