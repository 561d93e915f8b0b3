#include "controller/runnable_group.h"

#include <ranges>
#include <span>

#include "common/log.h"

namespace rsc::controller {

RunnableGroup::RunnableGroup(std::stop_token stop, std::function<void()> request_stop)
    : stop_(std::move(stop)), request_stop_(std::move(request_stop)) {}

void RunnableGroup::add(std::string name, std::unique_ptr<Runnable> part) {
  parts_.push_back(Entry{std::move(name), std::move(part)});
}

void RunnableGroup::add(std::string name, FunctionRunnable::Start start,
                        FunctionRunnable::Stop stop) {
  add(std::move(name), std::make_unique<FunctionRunnable>(std::move(start), std::move(stop)));
}

void RunnableGroup::fail(std::string_view part, Status error) {
  {
    std::lock_guard lock(mu_);
    if (failed_part_) return;
    log::error("A part of the service failed; stopping", error, {{"part", std::string(part)}});
    failed_part_ = std::string(part);
    failure_ = std::move(error).withContext(part);
  }
  request_stop_();
}

std::function<void(Status)> RunnableGroup::failer(std::string part) {
  return [this, part = std::move(part)](Status error) { fail(part, std::move(error)); };
}

std::optional<std::string> RunnableGroup::failedPart() const {
  std::lock_guard lock(mu_);
  return failed_part_;
}

Status RunnableGroup::run() {
  // Start in order, until a part fails or a stop is requested.
  size_t started = 0;
  for (Entry& entry : parts_) {
    if (stop_.stop_requested()) break;
    log::debug(1, "Starting", {{"part", entry.name}});
    Status s = entry.part->start(stop_);
    if (!s.ok()) {
      if (!stop_.stop_requested()) fail(entry.name, std::move(s));
      break;
    }
    ++started;
  }

  // Wait for the stop: a signal, or a part's failure.
  {
    // Before the lock: a stop already requested runs the callback at once.
    std::stop_callback wake(stop_, [this] {
      std::lock_guard lock(mu_);
      cv_.notify_all();
    });
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return stop_.stop_requested(); });
  }

  // Stop what started, the last first.
  for (Entry& entry : std::views::reverse(std::span(parts_).first(started))) {
    log::debug(1, "Stopping", {{"part", entry.name}});
    entry.part->stop();
  }
  std::lock_guard lock(mu_);
  return failure_;
}

}  // namespace rsc::controller
