#include "test/fakes/gate.h"

#include <utility>

namespace rsc::testing {

void Gate::close() {
  std::lock_guard lock(mu_);
  open_ = false;
}

void Gate::open() {
  std::lock_guard lock(mu_);
  open_ = true;
  cv_.notify_all();
}

void Gate::pass(std::stop_token stop) { passUntil(std::move(stop), std::nullopt); }

void Gate::pass(std::chrono::milliseconds timeout) { passUntil({}, timeout); }

void Gate::passUntil(std::stop_token stop, std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock lock(mu_);
  ++arrived_;
  cv_.notify_all();
  if (open_) {
    return;
  }
  ++held_;
  cv_.notify_all();
  const auto is_open = [this] { return open_; };
  if (timeout) {
    cv_.wait_for(lock, stop, *timeout, is_open);
  } else {
    cv_.wait(lock, stop, is_open);
  }
  --held_;
}

bool Gate::waitArrived(int n, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return arrived_ >= n; });
}

bool Gate::waitHeld(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return held_ > 0 && !open_; });
}

}  // namespace rsc::testing
