// ScriptedTransport: a client::HttpTransport for pull mode's unit tests that answers each
// stream() with the next scripted answer (a transport error, or a head and body chunks) and
// records every request. A hook runs between chunks (to move a FakeClock, say). Only stream()
// is implemented: the fetcher uses nothing else. Thread-safe.
#pragma once

#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "client/http_transport.h"

namespace rsc::controller::pull {

class ScriptedTransport final : public client::HttpTransport {
 public:
  struct Answer {
    Status error;  // not OK: the exchange fails with it
    int code = 200;
    std::map<std::string, std::string> headers;
    std::vector<std::string> chunks;
    std::function<void()> between_chunks;
  };

  // Queues an answer.
  void add(Answer answer) {
    std::lock_guard lock(mu_);
    answers_.push_back(std::move(answer));
  }
  void addBody(int code, std::string body, std::map<std::string, std::string> headers = {}) {
    Answer a;
    a.code = code;
    a.headers = std::move(headers);
    a.chunks.push_back(std::move(body));
    add(std::move(a));
  }
  void addError(Status error) {
    Answer a;
    a.error = std::move(error);
    add(std::move(a));
  }

  std::vector<client::HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  // How many chunks the reader took before it stopped or the body ended.
  size_t chunksRead() const {
    std::lock_guard lock(mu_);
    return chunks_read_;
  }

  StatusOr<client::HttpResponse> send(const client::HttpRequest&) override {
    return internalError("ScriptedTransport: send() is not scripted");
  }

  StatusOr<client::HttpResponse> stream(
      const client::HttpRequest& request,
      const std::function<void(const client::HttpResponse&)>& on_head,
      const std::function<bool(std::string_view)>& on_chunk, std::stop_token) override {
    Answer answer;
    {
      std::lock_guard lock(mu_);
      requests_.push_back(request);
      if (answers_.empty()) return unavailable("ScriptedTransport: no answer scripted");
      answer = std::move(answers_.front());
      answers_.pop_front();
    }
    if (!answer.error.ok()) return answer.error;
    client::HttpResponse head;
    head.code = answer.code;
    head.headers = answer.headers;
    if (on_head) on_head(head);
    if (head.code < 200 || head.code >= 300) {
      for (const std::string& c : answer.chunks) head.body += c;
      if (request.max_error_body_bytes > 0 && head.body.size() > request.max_error_body_bytes) {
        head.body.resize(request.max_error_body_bytes);
      }
      return head;
    }
    for (size_t i = 0; i < answer.chunks.size(); ++i) {
      if (i > 0 && answer.between_chunks) answer.between_chunks();
      {
        std::lock_guard lock(mu_);
        ++chunks_read_;
      }
      if (!on_chunk(answer.chunks[i])) break;
    }
    return head;
  }

  std::string host() const override { return "driver.test:8080"; }

 private:
  mutable std::mutex mu_;
  std::deque<Answer> answers_;
  std::vector<client::HttpRequest> requests_;
  size_t chunks_read_ = 0;
};

}  // namespace rsc::controller::pull
