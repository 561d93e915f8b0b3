// resourceslice-controller: flags, signals and the parts' group. What the
// parts are and how they are wired is controller/service.h; this file parses
// the flags, takes the stop signals from the first instant, and runs the
// group: parts start in order and stop in the reverse order on SIGTERM, within
// --shutdown-timeout. Exit codes: 0 after a stop, 1 when a part fails (named
// in the log), 2 for flags or a configuration that cannot be used.
#include <malloc.h>
#include <pthread.h>

#include <csignal>
#include <cstdlib>
#include <iostream>

#include "common/clock.h"
#include "common/log.h"
#include "controller/flags.h"
#include "controller/runnable_group.h"
#include "controller/service.h"
#include "controller/shutdown_signals.h"

#ifndef RSC_VERSION
#define RSC_VERSION "unknown"
#endif
#ifndef RSC_GIT_COMMIT
#define RSC_GIT_COMMIT "unknown"
#endif

namespace rsc {
namespace {

int usageError(const std::string& message) {
  std::cerr << "resourceslice-controller: " << message << "\n";
  return 2;
}

int run(const controller::ServiceFlags& flags) {
  // Before anything that may block: SIGTERM is honoured from here on.
  controller::ShutdownSignals signals(RealClock::instance(), flags.shutdown_timeout);
  controller::RunnableGroup group(signals.token(), [&signals] { signals.requestStop(); });
  auto service = controller::Service::create(flags, {RSC_VERSION, RSC_GIT_COMMIT}, signals, group);
  if (!service.ok()) return usageError(service.status().message());

  if (flags.cleanup) {
    if (Status s = (*service)->cleanup(); !s.ok()) {
      log::error("Cleanup failed", s);
      return 1;
    }
    log::info("Cleanup: every managed ResourceSlice is deleted");
    return 0;
  }

  // Until SIGTERM or SIGINT, or a part's failure.
  const Status ran = group.run();
  if (!ran.ok()) {
    log::error("Stopped after a failure", ran, {{"part", group.failedPart().value_or("")}});
    return 1;
  }
  log::info("Stopped");
  return 0;
}

}  // namespace
}  // namespace rsc

int main(int argc, char** argv) {
  // Two malloc arenas, before any thread starts: with one per thread, what large decodes freed
  // stays resident in per-thread heaps that malloc_trim gives back poorly (8 pulled 762 KB
  // bodies of empty devices: 104 MiB kept 20 s later, 21 MiB with two). MALLOC_ARENA_MAX wins.
  if (std::getenv("MALLOC_ARENA_MAX") == nullptr) mallopt(M_ARENA_MAX, 2);
  const std::vector<std::string> args(argv + 1, argv + argc);
  rsc::StatusOr<rsc::controller::ServiceFlags> flags = rsc::controller::parseFlags(args);
  if (!flags.ok()) return rsc::usageError(flags.status().message());
  if (flags->help) {
    std::cout << rsc::controller::flagsUsage();
    return 0;
  }
  if (flags->version) {
    std::cout << "resourceslice-controller " << RSC_VERSION << " (" << RSC_GIT_COMMIT << ")\n";
    return 0;
  }
  rsc::log::configure(flags->log_format, flags->verbosity);

  // Signals are taken by ShutdownSignals' thread in run(); every thread
  // started from here inherits the mask, so none of them is interrupted.
  const sigset_t signals = rsc::controller::stopSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A peer closing a socket must not kill the process.
  signal(SIGPIPE, SIG_IGN);

  return rsc::run(*flags);
}
