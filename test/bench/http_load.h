// The benchmark's own HTTP client for loopback servers (the controller's
// inventory API and /metrics, and the minimal handler), and load runners that
// send requests from several keep-alive connections at once and time each
// answer. A blocking Beast client: far cheaper per request than cpprestsdk,
// so the client's CPU stays small next to the server it measures on a shared
// two-core machine.
// Threading: an HttpConnection belongs to one thread; the runners start their
// own threads (one per connection) and return when they are joined.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace rsc::bench {

struct Answer {
  int code = 0;
  std::string body;
};

class HttpConnection {
 public:
  // Connects lazily, on the first send().
  HttpConnection(std::string host, uint16_t port);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  // Sends one request (a JSON body when `body` is not empty) and reads the
  // whole answer. A kept-alive connection the server closed meanwhile is
  // reopened once. Transport errors are kUnavailable.
  StatusOr<Answer> send(std::string_view method, std::string_view target,
                        std::string_view body = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One request of a load. `body` must outlive the run.
struct LoadRequest {
  std::string method;
  std::string target;
  std::string_view body;
};

struct LoadResult {
  // From the first send to the last answer.
  double seconds = 0;
  // Per request, in the order of the request list (runOnce) or of
  // completion (runFor).
  std::vector<double> latency_ms;
  // Answers by HTTP code; 0 counts transport errors.
  std::map<int, int64_t> codes;
  // The first transport error, for the report.
  std::string first_error;

  int64_t count(int code) const {
    auto it = codes.find(code);
    return it == codes.end() ? 0 : it->second;
  }
  int64_t total() const;
};

// Sends each request once over `connections` connections (each takes the
// next unsent request) and returns when all are answered.
LoadResult runOnce(const std::string& host, uint16_t port, const std::vector<LoadRequest>& requests,
                   int connections, Clock& clock);

// Sends `request` again and again from `connections` connections until
// `duration` has passed (requests in flight then are finished and counted).
LoadResult runFor(const std::string& host, uint16_t port, const LoadRequest& request,
                  int connections, Clock::Duration duration, Clock& clock);

// The q-quantile (0..1) of `values` by nearest rank; 0 when empty.
double quantile(std::vector<double> values, double q);

}  // namespace rsc::bench
