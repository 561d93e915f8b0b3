#include "controller/leader/leader_elector.h"

#include <cstdio>
#include <thread>
#include <utility>

#include "common/log.h"
#include "common/thread_name.h"

namespace rsc::controller::leader {
namespace {

// client-go's JitterFactor: waits are stretched by up to 20 %.
constexpr double kJitterFactor = 1.2;

bool sameRecord(const client::LeaseSpec& a, const client::LeaseSpec& b) {
  return a.holder_identity == b.holder_identity &&
         a.lease_duration_seconds == b.lease_duration_seconds && a.acquire_time == b.acquire_time &&
         a.renew_time == b.renew_time && a.lease_transitions == b.lease_transitions;
}

int32_t seconds(Clock::Duration d) {
  return static_cast<int32_t>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
}

}  // namespace

std::string makeLeaderIdentity(const std::string& name) {
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char suffix[24];
  std::snprintf(suffix, sizeof(suffix), "%016llx", static_cast<unsigned long long>(r));
  return name + "_" + suffix;
}

StatusOr<std::unique_ptr<LeaderElector>> LeaderElector::create(LeaderElectionOptions options) {
  if (options.api == nullptr || options.clock == nullptr) {
    return invalidArgument("leader election: api and clock are required");
  }
  if (options.lease_namespace.empty() || options.lease_name.empty()) {
    return invalidArgument("leader election: the lease namespace and name are required");
  }
  if (options.identity.empty()) return invalidArgument("leader election: identity is required");
  if (!(options.lease_duration > options.renew_deadline)) {
    return invalidArgument("leader election: the lease duration must exceed the renew deadline");
  }
  if (!(std::chrono::duration<double>(options.renew_deadline).count() >
        kJitterFactor * std::chrono::duration<double>(options.retry_period).count())) {
    return invalidArgument(
        "leader election: the renew deadline must exceed 1.2 times the retry period");
  }
  if (options.lease_duration < std::chrono::seconds(1)) {
    return invalidArgument("leader election: the lease duration must be at least 1s");
  }
  return std::unique_ptr<LeaderElector>(new LeaderElector(std::move(options)));
}

LeaderElector::LeaderElector(LeaderElectionOptions options)
    : options_(std::move(options)), random_(std::random_device()()) {}

std::string LeaderElector::leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

void LeaderElector::setLeader(const std::string& identity) {
  {
    std::lock_guard lock(mu_);
    if (leader_ == identity) return;
    leader_ = identity;
  }
  log::info("New leader observed", {{"lease", options_.lease_namespace + "/" + options_.lease_name},
                                    {"leader", identity}});
  if (options_.on_new_leader) options_.on_new_leader(identity);
}

std::string LeaderElector::leaseAnnotation(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = annotations_.find(key);
  return it == annotations_.end() ? "" : it->second;
}

void LeaderElector::observe(const client::Lease& lease) {
  if (!observed_ || !sameRecord(observed_->spec, lease.spec)) {
    observed_time_ = options_.clock->now();
  }
  observed_ = lease;
  {
    std::lock_guard lock(mu_);
    annotations_ = lease.metadata.annotations;
  }
  setLeader(lease.spec.holder_identity.value_or(""));
}

void LeaderElector::stampAnnotations(client::Lease& lease) const {
  for (const auto& [k, v] : options_.holder_annotations) lease.metadata.annotations[k] = v;
}

bool LeaderElector::tryAcquireOrRenew() {
  Clock& clock = *options_.clock;
  const std::string now_text = formatMicroTime(clock.systemNow());
  const int32_t duration = seconds(options_.lease_duration);

  // Fast path: we lead and our view of the lease is still valid; renew it
  // with an optimistic update of the record we hold.
  if (leading_ && observed_ && observed_time_ + options_.lease_duration > clock.now()) {
    client::Lease renewed = *observed_;
    renewed.spec.renew_time = now_text;
    stampAnnotations(renewed);
    renewed.spec.lease_duration_seconds = duration;
    StatusOr<client::Lease> stored = options_.api->updateLease(renewed);
    if (stored.ok()) {
      observed_ = *stored;
      observed_time_ = clock.now();
      return true;
    }
    // Fall through: re-read and decide as anyone else would.
  }

  StatusOr<client::Lease> current =
      options_.api->getLease(options_.lease_namespace, options_.lease_name);
  if (!current.ok()) {
    if (current.status().code() != StatusCode::kNotFound) {
      log::warning("Reading the leader lease failed", {{"error", current.status().toString()}});
      return false;
    }
    client::Lease lease;
    lease.metadata.namespace_ = options_.lease_namespace;
    lease.metadata.name = options_.lease_name;
    lease.spec.holder_identity = options_.identity;
    lease.spec.lease_duration_seconds = duration;
    lease.spec.acquire_time = now_text;
    lease.spec.renew_time = now_text;
    lease.spec.lease_transitions = 0;
    stampAnnotations(lease);
    StatusOr<client::Lease> created = options_.api->createLease(lease);
    if (!created.ok()) return false;  // someone else created it first
    observe(*created);
    observed_time_ = clock.now();
    return true;
  }

  observe(*current);
  const std::string holder = current->spec.holder_identity.value_or("");
  const Clock::Duration their_duration =
      std::chrono::seconds(current->spec.lease_duration_seconds.value_or(duration));
  const bool held_by_other = !holder.empty() && holder != options_.identity;
  if (held_by_other && observed_time_ + their_duration > clock.now()) return false;

  // Take (or keep) the lease.
  client::Lease next = *current;
  const bool ours = holder == options_.identity;
  next.spec.holder_identity = options_.identity;
  next.spec.lease_duration_seconds = duration;
  next.spec.renew_time = now_text;
  stampAnnotations(next);
  if (!ours) {
    next.spec.acquire_time = now_text;
    next.spec.lease_transitions = current->spec.lease_transitions.value_or(0) + 1;
  }
  StatusOr<client::Lease> stored = options_.api->updateLease(next);
  if (!stored.ok()) return false;  // 409: another replica was quicker
  observe(*stored);
  observed_time_ = clock.now();
  return true;
}

bool LeaderElector::tryHold() {
  const Clock::TimePoint sent = options_.clock->now();
  if (!tryAcquireOrRenew()) return false;
  setRenewedAt(sent);
  leading_ = true;
  return true;
}

Status LeaderElector::release() {
  if (!leading_.exchange(false) || !observed_) return okStatus();
  client::Lease released = *observed_;
  if (released.spec.holder_identity != options_.identity) return okStatus();
  const std::string now_text = formatMicroTime(options_.clock->systemNow());
  released.spec.holder_identity = "";
  released.spec.lease_duration_seconds = 1;
  released.spec.renew_time = now_text;
  released.spec.acquire_time = now_text;
  for (const auto& [k, v] : options_.holder_annotations) released.metadata.annotations.erase(k);
  StatusOr<client::Lease> stored = options_.api->updateLease(released);
  if (!stored.ok()) return stored.status().withContext("release the leader lease");
  observed_ = *stored;
  setLeader("");
  log::info("Released the leader lease", {{"identity", options_.identity}});
  return okStatus();
}

Clock::Duration LeaderElector::jittered(Clock::Duration d) {
  std::uniform_real_distribution<double> factor(1.0, kJitterFactor);
  return std::chrono::duration_cast<Clock::Duration>(d * factor(random_));
}

bool LeaderElector::sleep(Clock::Duration d, const std::stop_token& stop) {
  // Until a time on the clock, so that a process that was frozen meanwhile
  // checks its renew deadline as soon as it runs again; a stop request, or
  // pollNow() while campaigning, ends the wait at once.
  std::stop_source waker;
  std::stop_callback relay(stop, [&waker] { waker.request_stop(); });
  {
    std::lock_guard lock(mu_);
    if (std::exchange(poll_asked_, false)) return !stop.stop_requested();
    poll_waker_ = &waker;
  }
  options_.clock->sleepUntil(options_.clock->now() + d, waker.get_token());
  {
    std::lock_guard lock(mu_);
    poll_waker_ = nullptr;
    poll_asked_ = false;
  }
  return !stop.stop_requested();
}

void LeaderElector::pollNow(Clock::TimePoint deadline) {
  std::stop_source done;
  {
    std::lock_guard lock(mu_);
    if (!campaigning_) return;
    poll_waiters_.push_back({&done, polls_begun_ + 1});
    if (poll_waker_ != nullptr) {
      poll_waker_->request_stop();
    } else {
      poll_asked_ = true;  // it polls now: its next wait ends at once
    }
  }
  options_.clock->sleepUntil(deadline, done.get_token());
  std::lock_guard lock(mu_);
  std::erase_if(poll_waiters_, [&done](const PollWaiter& w) { return w.done == &done; });
}

void LeaderElector::pollDone(uint64_t poll) {
  std::lock_guard lock(mu_);
  std::erase_if(poll_waiters_, [poll](const PollWaiter& w) {
    if (w.poll > poll) return false;
    w.done->request_stop();
    return true;
  });
}

bool LeaderElector::holdsLease() const {
  if (!leading_.load()) return false;
  std::lock_guard lock(mu_);
  return leader_ == options_.identity &&
         options_.clock->now() < renewed_at_ + options_.renew_deadline;
}

void LeaderElector::setRenewedAt(Clock::TimePoint sent) {
  std::lock_guard lock(mu_);
  renewed_at_ = sent;
}

bool LeaderElector::renew(const std::stop_token& stop) {
  while (sleep(options_.retry_period, stop)) {
    Clock::TimePoint deadline;
    {
      std::lock_guard lock(mu_);
      deadline = renewed_at_ + options_.renew_deadline;
    }
    // A renewal counts only if it was sent, and answered, before the
    // deadline: past it holdsLease() is already false.
    const Clock::TimePoint sent = options_.clock->now();
    if (sent >= deadline) return false;
    const bool renewed = tryAcquireOrRenew();
    if (options_.clock->now() >= deadline) return false;
    if (renewed) setRenewedAt(sent);
  }
  return true;
}

void LeaderElector::run(std::stop_token stop) {
  // Campaign.
  log::info("Campaigning for the leader lease",
            {{"lease", options_.lease_namespace + "/" + options_.lease_name},
             {"identity", options_.identity}});
  {
    std::lock_guard lock(mu_);
    campaigning_ = true;
  }
  bool elected = false;
  while (!stop.stop_requested()) {
    uint64_t poll = 0;
    {
      std::lock_guard lock(mu_);
      poll = ++polls_begun_;
    }
    const Clock::TimePoint sent = options_.clock->now();
    elected = tryAcquireOrRenew();
    if (elected) {
      setRenewedAt(sent);
      leading_ = true;  // before the waiters look
    }
    pollDone(poll);
    if (elected || !sleep(jittered(options_.retry_period), stop)) break;
  }
  {
    std::lock_guard lock(mu_);
    campaigning_ = false;
    for (const PollWaiter& w : std::exchange(poll_waiters_, {})) w.done->request_stop();
  }
  // Stopped as it was elected: nothing was started; release() gives the
  // lease up.
  if (!elected || stop.stop_requested()) return;
  log::info("Became the leader", {{"identity", options_.identity}});

  // Lead on a thread of its own, so that renewals go on while it works.
  std::stop_source leadership;
  std::thread started;
  if (options_.on_started_leading) {
    started = std::thread([this, leading = leadership.get_token()] {
      setThreadName("leading");
      options_.on_started_leading(leading);
    });
  }

  if (!renew(stop)) {
    leading_ = false;
    log::error("Lost the leader lease", deadlineExceeded("no renewal within the renew deadline"),
               {{"identity", options_.identity}});
  }
  // Stop the guarded work before anything else, then wait for the thread
  // that started it.
  leadership.request_stop();
  if (options_.on_stopped_leading) options_.on_stopped_leading();
  if (started.joinable()) started.join();
}

}  // namespace rsc::controller::leader
