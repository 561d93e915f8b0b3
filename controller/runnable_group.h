// RunnableGroup: the service's long-lived parts, started in the order they
// were added and stopped in the reverse order (controller-runtime's Manager,
// as one list). A part that cannot start, or that fails once running (a Lease
// lost, caches that never sync), stops the whole group; run() then returns
// the error with the part's name. main builds the parts and calls run() once.
// Threading: run() blocks its caller and calls every start() and stop() on
// it; fail() and the functions of failer() may be called from any thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace rsc::controller {

// One long-lived part of the service.
class Runnable {
 public:
  virtual ~Runnable() = default;
  // Starts the part and returns once it runs; what runs long goes on the
  // part's own threads. It may block (a first sync) but must return soon
  // after `stop` is requested. An error: the part could not start.
  virtual Status start(std::stop_token stop) = 0;
  // Ends what start() began; returns when the part's threads have ended.
  // Called once, and only after start() succeeded.
  virtual void stop() = 0;
};

// A Runnable made of two functions, either of which may be empty.
class FunctionRunnable final : public Runnable {
 public:
  using Start = std::function<Status(std::stop_token)>;
  using Stop = std::function<void()>;
  FunctionRunnable(Start start, Stop stop) : start_(std::move(start)), stop_(std::move(stop)) {}
  Status start(std::stop_token stop) override {
    return start_ ? start_(std::move(stop)) : Status();
  }
  void stop() override {
    if (stop_) stop_();
  }

 private:
  Start start_;
  Stop stop_;
};

class RunnableGroup {
 public:
  // `stop` ends run() (a signal); `request_stop` is called on the first
  // failure so that the process-wide stop begins (ShutdownSignals' watchdog
  // bounds it by --shutdown-timeout), and must request `stop`.
  RunnableGroup(std::stop_token stop, std::function<void()> request_stop);

  RunnableGroup(const RunnableGroup&) = delete;
  RunnableGroup& operator=(const RunnableGroup&) = delete;

  // Adds a part after those it depends on. Not once run() began.
  void add(std::string name, std::unique_ptr<Runnable> part);
  void add(std::string name, FunctionRunnable::Start start, FunctionRunnable::Stop stop = nullptr);

  // Stops the group because `part` failed; the first failure is the one
  // run() returns.
  void fail(std::string_view part, Status error);
  // fail() for one part, to hand to that part.
  std::function<void(Status)> failer(std::string part);

  // Starts the parts in order until one fails or a stop is requested, waits
  // for the stop, then stops the started parts in the reverse order. Returns
  // OK after a stop, else the first failure with the part's name as context.
  // A part whose start() is cut short by the stop is not a failure.
  Status run();

  // The part that failed first, once one has.
  std::optional<std::string> failedPart() const;

 private:
  struct Entry {
    std::string name;
    std::unique_ptr<Runnable> part;
  };

  std::stop_token stop_;
  std::function<void()> request_stop_;
  std::vector<Entry> parts_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> failed_part_;  // guarded by mu_
  Status failure_;                          // guarded by mu_
};

}  // namespace rsc::controller
