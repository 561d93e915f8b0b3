// Service: the resourceslice-controller process, wired. create() builds every
// part from the flags (clients, metrics, the reconcile loop, pull mode, the
// inventory API, the servers, leadership) and adds the long-lived ones to a
// RunnableGroup in the order they start, so that they stop in the reverse
// one: stop accepting pushes, let in-flight writes finish, release the Lease,
// then the servers. main parses the flags and runs the group; --cleanup runs
// cleanup() instead. Threading: create() and cleanup() on main's thread; the
// parts run on their own (README "Threads").
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "controller/flags.h"
#include "controller/runnable_group.h"
#include "controller/shutdown_signals.h"

namespace rsc::controller {

// What main was built as: the version and commit the binary reports.
struct ServiceBuild {
  std::string version;
  std::string git_commit;
};

class Service {
 public:
  // Builds the parts; nothing is started, no port bound. An error: the flags
  // or the kubeconfig cannot be used (exit 2). With --cleanup only the API
  // clients are built.
  static StatusOr<std::unique_ptr<Service>> create(const ServiceFlags& flags,
                                                   const ServiceBuild& build,
                                                   ShutdownSignals& signals, RunnableGroup& group);
  ~Service();

  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // --cleanup: deletes every managed slice (under the controllers' Lease
  // with --leader-elect) and returns.
  Status cleanup();

 private:
  struct Parts;
  explicit Service(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace rsc::controller
