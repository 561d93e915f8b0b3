#include "controller/inventory/endpoint.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <optional>
#include <vector>

#include "common/log.h"
#include "common/thread_name.h"
#include "controller/http/asio.h"

namespace rsc::controller::inventory {

using http::Admission;
using http::HttpRequest;
using http::HttpResponse;
using http::HttpServer;

struct InventoryEndpoint::Impl {
  Impl(InventoryHandler& h, Clock& c, size_t workers)
      : handler(h), clock(c), pool(std::max<size_t>(workers, 1)), strand(asio::make_strand(pool)) {
    nameEveryThread(std::max<size_t>(workers, 1), "inventory-work",
                    [this](auto task) { asio::post(pool, std::move(task)); });
  }

  // A push held until published or its deadline.
  struct Held {
    PendingWait wait;
    HttpServer::Responder respond;
    std::shared_ptr<asio::steady_timer> timer;
  };

  void run(const HttpRequest& request, const HttpServer::Responder& respond);
  // The handler's answers that need no blocking call, given on the calling
  // (I/O) thread; nullopt, for the workers to try, also when it throws.
  std::optional<HandlerResult> handleNow(const HttpRequest& request);
  std::optional<Admission> admitNow(const HttpRequest& head);
  bool isStopping() const {
    std::lock_guard lock(mu);
    return stopping;
  }
  // Sends a handler's answer, or holds it when it waits for publication.
  void answer(HandlerResult result, const HttpRequest& request,
              const HttpServer::Responder& respond);
  void hold(PendingWait wait, HttpServer::Responder respond);
  // Answers held push `id` if it is still held (exactly one caller wins).
  void complete(uint64_t id);
  void recheck(const reconcile::PoolKey& key);
  void stop();
  // Runs `task` on the worker pool, counted in `tasks`.
  template <typename F>
  void post(F task);

  InventoryHandler& handler;
  Clock& clock;
  asio::thread_pool pool;
  // Every timer operation runs on this strand: timers are not thread-safe.
  asio::strand<asio::thread_pool::executor_type> strand;

  mutable std::mutex mu;
  bool stopping = false;          // guarded by mu
  uint64_t next_id = 1;           // guarded by mu
  std::map<uint64_t, Held> held;  // guarded by mu
  size_t tasks = 0;               // posted and not yet finished; guarded by mu
  // Notified when tasks or held change, for waitIdleForTest().
  std::condition_variable changed;
};

template <typename F>
void InventoryEndpoint::Impl::post(F task) {
  ++tasks;  // the callers hold mu
  asio::post(pool, [this, task = std::move(task)]() mutable {
    task();
    std::lock_guard lock(mu);
    --tasks;
    changed.notify_all();
  });
}

void InventoryEndpoint::Impl::run(const HttpRequest& request,
                                  const HttpServer::Responder& respond) {
  HandlerResult result;
  try {
    result = handler.handle(request);
  } catch (const std::exception& e) {
    // The handler reports errors as responses; this is a bug, answer 500.
    log::error("Inventory handler threw", internalError(e.what()),
               {{"method", request.method}, {"target", request.target}});
    respond(errorResponse(internalError("internal error")));
    return;
  }
  answer(std::move(result), request, respond);
}

std::optional<HandlerResult> InventoryEndpoint::Impl::handleNow(const HttpRequest& request) {
  try {
    return handler.handleNow(request);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<Admission> InventoryEndpoint::Impl::admitNow(const HttpRequest& head) {
  try {
    return handler.admitNow(head);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

void InventoryEndpoint::Impl::answer(HandlerResult result, const HttpRequest& request,
                                     const HttpServer::Responder& respond) {
  log::debug(3, "Inventory request",
             {{"method", request.method},
              {"target", request.target},
              {"code", result.response.status},
              {"remote", request.remote_address}});
  if (!result.wait) {
    respond(std::move(result.response));
    return;
  }
  hold(std::move(*result.wait), respond);
}

void InventoryEndpoint::Impl::hold(PendingWait wait, HttpServer::Responder respond) {
  auto timer = std::make_shared<asio::steady_timer>(strand);
  const Clock::Duration remaining = std::max(wait.deadline - clock.now(), Clock::Duration::zero());
  uint64_t id = 0;
  {
    std::unique_lock lock(mu);
    if (stopping) {
      lock.unlock();
      respond(handler.render(wait));
      return;
    }
    id = next_id++;
    held.emplace(id, Held{std::move(wait), std::move(respond), timer});
    changed.notify_all();
  }
  asio::post(strand, [this, timer, id, remaining] {
    // Answered already (published at once, or stopped): a timer started now
    // would only keep the pool busy.
    {
      std::lock_guard lock(mu);
      if (!held.contains(id)) return;
    }
    timer->expires_after(remaining);
    timer->async_wait([this, id](const boost::system::error_code& ec) {
      if (!ec) complete(id);
    });
  });
  // The pool may have been published between handle() and now, before this
  // push was registered for status changes.
  PendingWait copy;
  {
    std::lock_guard lock(mu);
    auto it = held.find(id);
    if (it == held.end()) return;
    copy = it->second.wait;
  }
  if (handler.done(copy)) complete(id);
}

void InventoryEndpoint::Impl::complete(uint64_t id) {
  Held taken;
  {
    std::lock_guard lock(mu);
    auto it = held.find(id);
    if (it == held.end()) return;
    taken = std::move(it->second);
    held.erase(it);
    changed.notify_all();
  }
  asio::post(strand, [timer = taken.timer] { timer->cancel(); });
  taken.respond(handler.render(taken.wait));
}

void InventoryEndpoint::Impl::recheck(const reconcile::PoolKey& key) {
  std::vector<std::pair<uint64_t, PendingWait>> candidates;
  {
    std::lock_guard lock(mu);
    for (const auto& [id, h] : held) {
      if (h.wait.driver != key.driver) continue;
      const bool published = std::any_of(h.wait.published.begin(), h.wait.published.end(),
                                         [&](const auto& p) { return p.first == key.pool; });
      const bool withdrawn = std::find(h.wait.withdrawn.begin(), h.wait.withdrawn.end(),
                                       key.pool) != h.wait.withdrawn.end();
      if (published || withdrawn) candidates.emplace_back(id, h.wait);
    }
  }
  for (const auto& [id, wait] : candidates) {
    if (handler.done(wait)) complete(id);
  }
}

void InventoryEndpoint::Impl::stop() {
  std::map<uint64_t, Held> taken;
  {
    std::lock_guard lock(mu);
    if (stopping) return;
    stopping = true;
    taken.swap(held);
  }
  for (auto& [id, h] : taken) {
    asio::post(strand, [timer = h.timer] { timer->cancel(); });
    h.respond(handler.render(h.wait));
  }
  pool.join();
}

InventoryEndpoint::InventoryEndpoint(InventoryHandler& handler, Clock& clock, size_t workers)
    : impl_(std::make_shared<Impl>(handler, clock, workers)) {}

InventoryEndpoint::~InventoryEndpoint() { stop(); }

HttpServer::Handler InventoryEndpoint::httpHandler() {
  return [impl = impl_](HttpRequest request, HttpServer::Responder respond) {
    // A no-op push is answered here, on the I/O thread: two hand-offs
    // between threads would cost it more than its work. Anything the handler
    // cannot answer without blocking goes to the workers.
    if (!impl->isStopping()) {
      if (std::optional<HandlerResult> now = impl->handleNow(request)) {
        impl->answer(std::move(*now), request, respond);
        return;
      }
    }
    {
      std::lock_guard lock(impl->mu);
      if (!impl->stopping) {
        impl->post([raw = impl.get(), request = std::move(request),
                    respond = std::move(respond)]() mutable { raw->run(request, respond); });
        return;
      }
    }
    HttpResponse response = errorResponse(unavailable("the inventory API is shutting down"));
    respond(std::move(response));
  };
}

std::function<void(const HttpRequest&, std::function<void(Admission)>)>
InventoryEndpoint::admitHandler() {
  return [impl = impl_](const HttpRequest& head, std::function<void(Admission)> decide) {
    // Cached credentials are checked here, on the I/O thread.
    if (!impl->isStopping()) {
      if (std::optional<Admission> now = impl->admitNow(head)) {
        decide(std::move(*now));
        return;
      }
    }
    {
      std::lock_guard lock(impl->mu);
      if (!impl->stopping) {
        impl->post([raw = impl.get(), head, decide = std::move(decide)] {
          Admission admission;
          try {
            admission = raw->handler.admit(head);
          } catch (const std::exception& e) {
            log::error("Inventory admission threw", internalError(e.what()),
                       {{"method", head.method}, {"target", head.target}});
            admission.refusal = errorResponse(internalError("internal error"));
          }
          if (admission.refusal) {
            log::debug(3, "Inventory request refused before its body",
                       {{"method", head.method},
                        {"target", head.target},
                        {"code", admission.refusal->status},
                        {"remote", head.remote_address}});
          }
          decide(std::move(admission));
        });
        return;
      }
    }
    Admission refused;
    refused.refusal = errorResponse(unavailable("the inventory API is shutting down"));
    decide(std::move(refused));
  };
}

void InventoryEndpoint::poolStatusChanged(const reconcile::PoolKey& key) {
  std::lock_guard lock(impl_->mu);
  if (impl_->stopping || impl_->held.empty()) return;
  impl_->post([raw = impl_.get(), key] { raw->recheck(key); });
}

void InventoryEndpoint::stop() { impl_->stop(); }

bool InventoryEndpoint::waitIdleForTest(size_t held) const {
  std::unique_lock lock(impl_->mu);
  return impl_->changed.wait_for(lock, std::chrono::seconds(10),
                                 [&] { return impl_->tasks == 0 && impl_->held.size() == held; });
}

size_t InventoryEndpoint::pendingCount() const {
  std::lock_guard lock(impl_->mu);
  return impl_->held.size();
}

}  // namespace rsc::controller::inventory
