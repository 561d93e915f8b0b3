// ShutdownSignals: how the service stops. SIGTERM and SIGINT are taken on a
// thread of its own from the first instant, so that a stop is requested
// however long start-up blocks (an API server that cannot be reached). The
// first signal requests the stop; a second signal, or a shutdown that outlasts
// the timeout (--shutdown-timeout), ends the process at once with code 1.
// Three quarters into the timeout the API clients are told to give up
// (abandonToken), so that a call stuck on a slow or silent API server ends and
// the rest of the shutdown (releasing the Lease) still fits.
// The process must block stopSignals() in every thread before any thread
// starts (main() does, first). Threading: the signal thread and, once a stop
// is requested, a watchdog thread that waits on the Clock; every public
// method is thread-safe.
#pragma once

#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <stop_token>
#include <thread>

#include "common/clock.h"

namespace rsc::controller {

// The signals that stop the service: SIGTERM and SIGINT.
sigset_t stopSignals();

class ShutdownSignals {
 public:
  // `exit` ends the process (std::_Exit by default; tests record the call).
  ShutdownSignals(Clock& clock, std::chrono::milliseconds timeout,
                  std::function<void(int)> exit = nullptr);
  // Called when shutdown has finished: ends the watchdog, and wakes the
  // signal thread with a signal aimed at it alone.
  ~ShutdownSignals();

  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  // Requested on the first signal, or by requestStop().
  std::stop_token token() const { return stop_.get_token(); }
  // Requested three quarters into the shutdown timeout: API calls still under
  // way are abandoned.
  std::stop_token abandonToken() const { return abandon_.get_token(); }

  // Stops the service as a signal would (e.g. after the Lease was lost), and
  // starts the shutdown watchdog.
  void requestStop();
  // Blocks until a stop is requested.
  void wait();

 private:
  void takeSignals();
  void watch();

  Clock& clock_;
  const std::chrono::milliseconds timeout_;
  const std::function<void(int)> exit_;
  std::stop_source stop_;
  std::stop_source abandon_;
  std::stop_source finished_;  // shutdown is over: the watchdog ends
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread watchdog_;  // started under mu_
  std::thread thread_;    // last: starts after the members it uses
};

}  // namespace rsc::controller
