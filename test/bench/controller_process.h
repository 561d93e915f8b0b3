// The controller binary under benchmark, run as a child process against the
// test cluster (as in production: its own process, its own client), and the
// minimal Beast handler the push API is compared with, run the same way (the
// benchmark binary itself in --serve-minimal mode). Gives their addresses,
// the controller's metrics and the memory of either process from /proc.
// Threading: owned and used by the benchmark's main thread.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "test/integration/process.h"

namespace rsc::bench {

// VmHWM (peak) and VmRSS (now) of a process, in bytes; 0 when unreadable.
struct Memory {
  int64_t peak = 0;
  int64_t rss = 0;
};
Memory processMemory(pid_t pid);

// The user+system CPU seconds a process has used so far.
double processCpuSeconds(pid_t pid);

struct ControllerSettings {
  std::filesystem::path binary;
  std::filesystem::path kubeconfig;
  double qps = 500;
  int burst = 1000;
  // --workers; 0: not passed, the controller's own default.
  int workers = 0;
  std::vector<std::string> extra_args;
};

class ControllerProcess {
 public:
  // Starts the controller (--auth=none, loopback ports) and waits up to a
  // minute for /readyz.
  static StatusOr<std::unique_ptr<ControllerProcess>> start(const ControllerSettings& settings,
                                                            const std::filesystem::path& log,
                                                            Clock& clock);
  // SIGTERM, then SIGKILL after 30 s.
  ~ControllerProcess();

  pid_t pid() const { return process_->pid(); }
  uint16_t inventoryPort() const { return inventory_port_; }
  const std::filesystem::path& logPath() const { return process_->logPath(); }
  bool running() { return process_->running(); }

  // The text of /metrics.
  StatusOr<std::string> metrics();

 private:
  explicit ControllerProcess(std::unique_ptr<testing::Process> process)
      : process_(std::move(process)) {}

  std::unique_ptr<testing::Process> process_;
  uint16_t inventory_port_ = 0;
  uint16_t metrics_port_ = 0;
  uint16_t health_port_ = 0;
};

// The minimal handler: an HttpServer (the controller's own server class)
// whose handler answers 200 at once, in a child process.
class MinimalServerProcess {
 public:
  static StatusOr<std::unique_ptr<MinimalServerProcess>> start(const std::filesystem::path& self,
                                                               const std::filesystem::path& dir,
                                                               Clock& clock);
  pid_t pid() const { return process_->pid(); }
  uint16_t port() const { return port_; }

 private:
  std::unique_ptr<testing::Process> process_;
  uint16_t port_ = 0;
};

// The body of --serve-minimal: serves until SIGTERM; writes the port to
// `port_file` once listening. Returns the exit code.
int serveMinimal(const std::filesystem::path& port_file);

}  // namespace rsc::bench
