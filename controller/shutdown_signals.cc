#include "controller/shutdown_signals.h"

#include <pthread.h>

#include <cstdlib>

#include "common/log.h"
#include "common/status.h"
#include "common/thread_name.h"

namespace rsc::controller {

sigset_t stopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  return signals;
}

ShutdownSignals::ShutdownSignals(Clock& clock, std::chrono::milliseconds timeout,
                                 std::function<void(int)> exit)
    : clock_(clock),
      timeout_(timeout),
      exit_(exit ? std::move(exit) : [](int code) { std::_Exit(code); }),
      thread_([this] {
        setThreadName("signals");
        takeSignals();
      }) {}

ShutdownSignals::~ShutdownSignals() {
  finished_.request_stop();
  if (watchdog_.joinable()) watchdog_.join();
  // Not a kill: every thread blocks SIGTERM, and the signal thread's sigwait
  // takes it as the wake-up.
  // NOLINTNEXTLINE(bugprone-bad-signal-to-kill-thread)
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void ShutdownSignals::requestStop() {
  std::lock_guard lock(mu_);
  if (!stop_.request_stop()) return;
  cv_.notify_all();
  watchdog_ = std::thread([this] {
    setThreadName("shutdown-watch");
    watch();
  });
}

void ShutdownSignals::watch() {
  const std::stop_token finished = finished_.get_token();
  const Clock::TimePoint start = clock_.now();
  clock_.sleepUntil(start + timeout_ * 3 / 4, finished);
  if (finished.stop_requested()) return;
  log::info("Shutdown is taking long; abandoning API calls under way",
            {{"timeoutMs", static_cast<int64_t>(timeout_.count())}});
  abandon_.request_stop();
  clock_.sleepUntil(start + timeout_, finished);
  if (finished.stop_requested()) return;
  log::error("Shutdown did not finish in time; exiting at once",
             deadlineExceeded("flag --shutdown-timeout passed"),
             {{"timeoutMs", static_cast<int64_t>(timeout_.count())}});
  exit_(1);
}

void ShutdownSignals::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return stop_.stop_requested(); });
}

void ShutdownSignals::takeSignals() {
  const sigset_t signals = stopSignals();
  for (int received = 0;;) {
    int sig = 0;
    if (sigwait(&signals, &sig) != 0) continue;
    if (finished_.stop_requested()) return;
    const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    if (++received > 1) {
      log::error("Second signal during shutdown; exiting at once",
                 cancelled("stopped by a second signal"), {{"signal", name}});
      exit_(1);
      continue;
    }
    log::info("Shutting down", {{"signal", name}});
    requestStop();
  }
}

}  // namespace rsc::controller
