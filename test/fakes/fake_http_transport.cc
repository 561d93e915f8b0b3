#include "test/fakes/fake_http_transport.h"

#include <utility>

namespace rsc::testing {

void FakeHttpTransport::reply(int code, std::string body) {
  client::HttpResponse r;
  r.code = code;
  r.body = std::move(body);
  std::lock_guard lock(mu_);
  script_.emplace_back(std::move(r));
}

void FakeHttpTransport::fail(Status status) {
  std::lock_guard lock(mu_);
  script_.emplace_back(std::move(status));
}

std::vector<std::string> FakeHttpTransport::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

StatusOr<client::HttpResponse> FakeHttpTransport::send(const client::HttpRequest& request) {
  std::string line = request.method + " " + request.path_and_query +
                     (request.body.empty() ? "" : " " + request.body);
  {
    std::lock_guard lock(mu_);
    requests_.push_back(line);
    if (!answer) {
      if (script_.empty()) return internalError("unscripted request " + line);
      auto next = std::move(script_.front());
      script_.pop_front();
      return next;
    }
  }
  return answer(request);
}

StatusOr<client::HttpResponse> FakeHttpTransport::stream(
    const client::HttpRequest& request, const std::function<void(const client::HttpResponse&)>&,
    const std::function<bool(std::string_view)>&, std::stop_token) {
  return send(request);
}

}  // namespace rsc::testing
