// FakeHttpTransport: an HttpTransport for unit tests of code that sends HTTP
// requests (resourceslicectl's commands, the leader's write fence). Records
// each request as "METHOD path_and_query[ body]" and answers it from a script
// of answers, or through `answer` when a test sets it; stream() answers as
// send(). Nothing is sent anywhere. Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "client/http_transport.h"

namespace rsc::testing {

class FakeHttpTransport final : public client::HttpTransport {
 public:
  explicit FakeHttpTransport(std::string host) : host_(std::move(host)) {}

  // Scripts the answer to the next request that finds no earlier one.
  void reply(int code, std::string body);
  void fail(Status status);
  // Answers every request instead of the script (when set).
  std::function<StatusOr<client::HttpResponse>(const client::HttpRequest&)> answer;

  // What was sent, in order.
  std::vector<std::string> requests() const;

  // client::HttpTransport. A request the script has no answer for fails
  // with an internal error naming it.
  StatusOr<client::HttpResponse> send(const client::HttpRequest& request) override;
  StatusOr<client::HttpResponse> stream(const client::HttpRequest& request,
                                        const std::function<void(const client::HttpResponse&)>&,
                                        const std::function<bool(std::string_view)>&,
                                        std::stop_token) override;
  std::string host() const override { return host_; }

 private:
  const std::string host_;
  mutable std::mutex mu_;
  std::vector<std::string> requests_;
  std::deque<StatusOr<client::HttpResponse>> script_;
};

}  // namespace rsc::testing
