#include "controller/pull/poller.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "client/codec.h"
#include "common/strings.h"
#include "controller/inventory/names.h"

namespace rsc::controller::pull {

namespace {

// The longest a sleeping thread goes without looking at its stop token: stop() must not wait
// out a whole interval.
constexpr Clock::Duration kStopCheckStep = std::chrono::seconds(1);
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
  // Used by one fetch at a time: the source's thread (or a test's pollOnce).
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
  bool retired = false;  // out of its driver; the thread ends
  std::string last_message;
  log::Throttle throttle;
  std::jthread thread;

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
    : options_(std::move(options)), ignored_log_(*options_.clock, kFailureLogInterval) {
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
  if (auto why = inventory::driverNameError(spec.driver)) {
    return invalidArgument("the driver name " + *why);
  }
  ASSIGN_OR_RETURN(SourceUrl url, parseSourceUrl(spec.url));
  StatusOr<std::shared_ptr<client::HttpTransport>> transport = options_.transport(spec, url);
  if (!transport.ok()) return std::move(transport).status();
  if (*transport == nullptr) return invalidArgument("no transport");
  FetcherOptions fetch = options_.fetch;
  fetch.path = url.path_and_query;
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
  log::info("Pulling inventory", {{"driver", source.spec.driver},
                                  {"source", source.spec.id},
                                  {"url", source.spec.url},
                                  {"intervalSeconds", wholeSeconds(options_.interval)},
                                  {"graceSeconds", wholeSeconds(options_.grace)}});
  source.thread = std::jthread([this, &source](const std::stop_token& stop) { run(source, stop); });
}

void Poller::start() {
  std::lock_guard lock(mu_);
  if (started_) return;
  started_ = true;
  for (auto& [id, source] : sources_) startLocked(*source);
}

void Poller::stop() {
  std::vector<std::jthread> threads;
  std::vector<std::unique_ptr<Source>> retired;
  {
    std::lock_guard lock(mu_);
    started_ = false;
    for (auto& [id, source] : sources_) {
      if (source->thread.joinable()) threads.push_back(std::move(source->thread));
    }
    retired = std::exchange(retired_, {});
  }
  for (std::jthread& t : threads) t.request_stop();
  for (std::jthread& t : threads) t.join();
  retired.clear();  // joins their threads
}

void Poller::setDiscovered(const std::vector<SourceSpec>& specs) {
  std::vector<std::unique_ptr<Source>> retired;
  {
    std::lock_guard lock(mu_);
    retired = std::exchange(retired_, {});
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
        ignoredLocked("OverLimit", spec,
                      "--pull-max-sources (" + std::to_string(options_.max_sources) +
                          ") sources are pulled already");
        continue;
      }
      StatusOr<std::unique_ptr<Source>> source = makeSource(spec);
      if (!source.ok()) {
        ignoredLocked("Invalid", spec, source.status().message());
        continue;
      }
      addLocked(std::move(*source));
    }
  }
  retired.clear();  // joins the threads of sources retired before this call
}

void Poller::ignoredLocked(std::string_view reason, const SourceSpec& spec,
                           const std::string& why) {
  if (options_.observer.on_ignored) options_.observer.on_ignored(reason);
  if (auto held = ignored_log_.allow(reason)) {
    log::warning("Inventory source ignored", {{"source", spec.id},
                                              {"url", spec.url},
                                              {"reason", reason},
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

void Poller::run(Source& source, const std::stop_token& stop) {
  Clock& clock = *options_.clock;
  while (!stop.stop_requested()) {
    // The interval counts from the end of a fetch, so a slow endpoint is not asked back to back.
    const Clock::Duration wait = step(source, stop);
    {
      std::lock_guard lock(mu_);
      if (source.retired) return;
    }
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

Clock::Duration Poller::pollOnce(const std::string& id, std::stop_token stop) {
  Source* source = nullptr;
  {
    std::lock_guard lock(mu_);
    auto it = sources_.find(id);
    if (it == sources_.end()) return Clock::Duration::zero();
    source = it->second.get();
  }
  return step(*source, std::move(stop));
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
  auto owned = sources_.find(source.key);
  if (owned != sources_.end() && owned->second.get() == &source) {
    retired_.push_back(std::move(owned->second));
    sources_.erase(owned);
  }
}

}  // namespace rsc::controller::pull
