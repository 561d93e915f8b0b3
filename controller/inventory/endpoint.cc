#include "controller/inventory/endpoint.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <optional>
#include <vector>

#include "common/log.h"

namespace rsc::controller::inventory {

using http::Admission;
using http::HttpRequest;
using http::HttpResponse;
using http::HttpServer;

struct InventoryEndpoint::Impl {
  Impl(InventoryHandler& h, Clock& c, size_t workers, WorkerPool* shared)
      : handler(h),
        clock(c),
        own_pool(shared == nullptr ? std::make_unique<WorkerPool>(c, "inventory-work", workers)
                                   : nullptr),
        lane((shared != nullptr ? *shared : *own_pool).lane(workers)) {}

  // A push held until published or its deadline.
  struct Held {
    PendingWait wait;
    HttpServer::Responder respond;
    uint64_t deadline_task = 0;  // the delayed task that answers it at its deadline
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
  // Without a shared pool (tests), one of its own; before the lane.
  std::unique_ptr<WorkerPool> own_pool;
  // Null after stop(); guarded by mu from then.
  std::unique_ptr<WorkerPool::Lane> lane;

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
  const bool posted = lane->post([this, task = std::move(task)]() mutable {
    task();
    std::lock_guard lock(mu);
    --tasks;
    changed.notify_all();
  });
  // Refused only once the pool stopped, after stop(): the callers checked.
  if (!posted) --tasks;
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
  const Clock::TimePoint deadline = wait.deadline;
  uint64_t id = 0;
  {
    std::unique_lock lock(mu);
    if (stopping) {
      lock.unlock();
      respond(handler.render(wait));
      return;
    }
    id = next_id++;
    // Under mu: complete() and stop() see the task's id with the push.
    const uint64_t task = lane->postAt(deadline, [this, id] { complete(id); });
    held.emplace(id, Held{std::move(wait), std::move(respond), task});
    changed.notify_all();
  }
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
    // Under mu, as stop() lets the lane go under mu. From the deadline task
    // itself, a no-op.
    lane->cancel(taken.deadline_task);
  }
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
  for (auto& [id, h] : taken) h.respond(handler.render(h.wait));
  // Drops the deadline tasks and waits for the others.
  lane->drain();
  // The handlers the server holds may keep this object past the pool's end
  // (the service destroys the pool before the group that holds the server).
  std::lock_guard lock(mu);
  lane.reset();
}

InventoryEndpoint::InventoryEndpoint(InventoryHandler& handler, Clock& clock, size_t workers,
                                     WorkerPool* pool)
    : impl_(std::make_shared<Impl>(handler, clock, workers, pool)) {}

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
