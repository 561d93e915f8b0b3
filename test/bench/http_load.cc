#include "test/bench/http_load.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <optional>
#include <thread>

#include "controller/http/asio.h"

namespace rsc::bench {

namespace asio = controller::asio;
namespace beast = controller::beast;
namespace http = beast::http;

namespace {

// Answers as large as a whole driver's status list (20,000 pools) must fit.
constexpr uint64_t kMaxAnswerBytes = 512ull * 1024 * 1024;

double millisSince(Clock::TimePoint start, Clock::TimePoint end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

}  // namespace

struct HttpConnection::Impl {
  std::string host;
  uint16_t port;
  asio::io_context io;
  asio::ip::tcp::socket socket{io};
  beast::flat_buffer buffer;
  bool connected = false;

  beast::error_code connect() {
    beast::error_code ec;
    socket.close(ec);
    buffer.clear();
    asio::ip::tcp::endpoint endpoint(asio::ip::make_address(host, ec), port);
    if (ec) {
      return ec;
    }
    socket = asio::ip::tcp::socket(io);
    socket.connect(endpoint, ec);
    if (ec) {
      return ec;
    }
    socket.set_option(asio::ip::tcp::no_delay(true), ec);
    connected = !ec;
    return ec;
  }

  // One exchange on the open connection.
  beast::error_code exchange(const http::request<http::string_body>& req, Answer* out) {
    beast::error_code ec;
    http::write(socket, req, ec);
    if (ec) {
      return ec;
    }
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxAnswerBytes);
    http::read(socket, buffer, parser, ec);
    if (ec) {
      return ec;
    }
    out->code = static_cast<int>(parser.get().result_int());
    out->body = std::move(parser.get().body());
    if (!parser.get().keep_alive()) {
      socket.close(ec);
      connected = false;
    }
    return {};
  }
};

HttpConnection::HttpConnection(std::string host, uint16_t port) : impl_(std::make_unique<Impl>()) {
  impl_->host = std::move(host);
  impl_->port = port;
}

HttpConnection::~HttpConnection() {
  beast::error_code ec;
  impl_->socket.close(ec);
}

StatusOr<Answer> HttpConnection::send(std::string_view method, std::string_view target,
                                      std::string_view body) {
  http::request<http::string_body> req;
  req.method_string(beast::string_view(method.data(), method.size()));
  req.target(beast::string_view(target.data(), target.size()));
  req.version(11);
  req.set(http::field::host, impl_->host + ":" + std::to_string(impl_->port));
  req.keep_alive(true);
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body().assign(body.data(), body.size());
  }
  req.prepare_payload();
  // A kept-alive connection may have been closed by the server since the
  // last request (idle timeout); one fresh connection is worth a retry.
  beast::error_code ec;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (!impl_->connected) {
      ec = impl_->connect();
      if (ec) {
        continue;
      }
    }
    Answer answer;
    ec = impl_->exchange(req, &answer);
    if (!ec) {
      return answer;
    }
    impl_->connected = false;
  }
  return unavailable(std::string(method) + " " + std::string(target) + " on " + impl_->host + ":" +
                     std::to_string(impl_->port) + ": " + ec.message());
}

int64_t LoadResult::total() const {
  int64_t n = 0;
  for (const auto& [code, count] : codes) {
    n += count;
  }
  return n;
}

LoadResult runOnce(const std::string& host, uint16_t port, const std::vector<LoadRequest>& requests,
                   int connections, Clock& clock) {
  LoadResult result;
  result.latency_ms.assign(requests.size(), 0);
  std::vector<int> codes(requests.size(), 0);
  std::atomic<size_t> next{0};
  std::mutex error_mu;
  const Clock::TimePoint start = clock.now();
  std::vector<std::thread> threads;
  for (int c = 0; c < std::max(1, connections); ++c) {
    threads.emplace_back([&] {
      HttpConnection conn(host, port);
      for (size_t i = next++; i < requests.size(); i = next++) {
        const Clock::TimePoint sent = clock.now();
        StatusOr<Answer> answer =
            conn.send(requests[i].method, requests[i].target, requests[i].body);
        result.latency_ms[i] = millisSince(sent, clock.now());
        if (answer.ok()) {
          codes[i] = answer->code;
        } else {
          std::lock_guard<std::mutex> lock(error_mu);
          if (result.first_error.empty()) {
            result.first_error = answer.status().toString();
          }
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  result.seconds = std::chrono::duration<double>(clock.now() - start).count();
  for (int code : codes) {
    ++result.codes[code];
  }
  return result;
}

LoadResult runFor(const std::string& host, uint16_t port, const LoadRequest& request,
                  int connections, Clock::Duration duration, Clock& clock) {
  LoadResult result;
  std::mutex mu;
  const Clock::TimePoint start = clock.now();
  const Clock::TimePoint until = start + duration;
  std::vector<std::thread> threads;
  for (int c = 0; c < std::max(1, connections); ++c) {
    threads.emplace_back([&] {
      HttpConnection conn(host, port);
      std::vector<double> latencies;
      std::map<int, int64_t> codes;
      std::string error;
      while (clock.now() < until) {
        const Clock::TimePoint sent = clock.now();
        StatusOr<Answer> answer = conn.send(request.method, request.target, request.body);
        latencies.push_back(millisSince(sent, clock.now()));
        ++codes[answer.ok() ? answer->code : 0];
        if (!answer.ok() && error.empty()) {
          error = answer.status().toString();
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      result.latency_ms.insert(result.latency_ms.end(), latencies.begin(), latencies.end());
      for (const auto& [code, n] : codes) {
        result.codes[code] += n;
      }
      if (result.first_error.empty()) {
        result.first_error = error;
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  result.seconds = std::chrono::duration<double>(clock.now() - start).count();
  return result;
}

double quantile(std::vector<double> values, double q) {
  if (values.empty()) {
    return 0;
  }
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  const size_t index = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(index, values.size() - 1)];
}

}  // namespace rsc::bench
