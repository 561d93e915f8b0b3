// Process: runs a program (the controller binary) as a child process for an
// integration test, with its output in a log file, and stops it with a signal.
// The destructor kills a child that is still running, so a failing test leaves
// nothing behind. Not thread-safe: one test thread owns a Process.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace rsc::testing {

class Process {
 public:
  // Starts `argv[0]` with `argv`, stdout and stderr appended to `log`, and
  // the extra environment variables `env` ("NAME=value").
  Process(std::vector<std::string> argv, std::filesystem::path log,
          std::vector<std::string> env = {});
  ~Process();

  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  // True until the child has exited (reaps it if it has).
  bool running();
  // Sends `signal` (e.g. SIGTERM, SIGKILL).
  void signal(int signal);
  // Waits up to `timeout` for the child to exit; returns its exit code
  // (128 + signal number if killed by a signal), or nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // The log written so far.
  std::string log() const;
  const std::filesystem::path& logPath() const { return log_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::filesystem::path log_;
};

// Returns a TCP port on 127.0.0.1 that was free a moment ago.
int freePort();

}  // namespace rsc::testing
