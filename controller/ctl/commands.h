// The commands of resourceslicectl: each turns a parsed Invocation into
// requests to the controller's inventory API (through an HttpTransport) or to
// the API server (through a KubeApi) and prints what it got. main builds the
// real transports; the unit tests give fakes. One command per call, on the
// caller's thread.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "client/http_transport.h"
#include "client/kube_api.h"
#include "common/clock.h"
#include "controller/ctl/args.h"
#include "controller/ctl/render.h"

namespace rsc::ctl {

// Exit statuses, as kubectl's: diff says 1 for "there are changes", so its
// errors are 2.
inline constexpr int kExitOk = 0;
inline constexpr int kExitChanges = 1;
inline constexpr int kExitError = 1;
inline constexpr int kExitDiffError = 2;

// `wait` polls the pool's status this often: a push is usually published
// within a second, and a status GET is cheap for the controller.
inline constexpr std::chrono::milliseconds kWaitPollInterval = std::chrono::seconds(1);

// One request that `push` and `diff` send for one file.
struct PushRequest {
  std::string file;
  std::string driver;
  std::string pool;  // empty: the file is a whole driver
  std::string body;

  // "/v1/drivers/DRIVER" or "/v1/drivers/DRIVER/pools/POOL", escaped.
  std::string path() const;
  // "gpu.example.com/node-a" or "gpu.example.com".
  std::string target() const;
};

// What a file name says: DRIVER-POOL.pool.json, DRIVER.driver.json, or with
// `driver_flag` POOL.pool.json; another name is read by the body's shape
// ({"pools": ...} is a driver). Errors name the file.
StatusOr<PushRequest> pushRequestFor(const std::string& file_name, std::string body,
                                     const std::string& driver_flag);

// The requests for a file, or for the *.json files of a folder in name order.
StatusOr<std::vector<PushRequest>> readPushRequests(const std::string& file_or_dir,
                                                    const std::string& driver_flag);

// A path segment with everything but unreserved characters %-escaped.
std::string escapePathSegment(const std::string& s);

struct CtlEnv {
  // The controller's inventory API; null for commands that need none.
  client::HttpTransport* inventory = nullptr;
  // The API server; null unless the command is `slices`.
  client::KubeApi* kube = nullptr;
  Clock* clock = nullptr;
  std::ostream* out = nullptr;
};

// Runs a command other than completion and help. Returns the exit status,
// or an error (for main to print) whose message says which request failed and
// the API's message and field details.
StatusOr<int> runCommand(const Invocation& inv, const CtlEnv& env);

}  // namespace rsc::ctl
