// InventoryEndpoint: the InventoryHandler behind an HttpServer. It runs the handler on a lane
// of a WorkerPool (authentication and forwarding may block), so the I/O thread never blocks,
// except for what the handler answers without blocking (cached credentials, a no-op push),
// which is answered on the I/O thread; and it holds ?wait= pushes until the DesiredStore
// reports them published or the deadline passes (a delayed task on the Clock), without a thread
// per held request. The service wires store.setStatusListener() to poolStatusChanged() and
// gives httpHandler() to the server. Thread-safe.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "common/clock.h"
#include "common/worker_pool.h"
#include "controller/http/http_server.h"
#include "controller/inventory/handler.h"

namespace rsc::controller::inventory {

class InventoryEndpoint {
 public:
  // TokenReview calls and forwarding to the leader are the slow requests;
  // four at once keep a few of them from delaying everyone else.
  static constexpr size_t kDefaultWorkers = 4;

  // `handler` and `clock` must outlive this object, `pool` its stop(). At most
  // `workers` of its tasks run at once on `pool`; without a pool it makes
  // one of its own with that many threads ("inventory-work").
  InventoryEndpoint(InventoryHandler& handler, Clock& clock, size_t workers = kDefaultWorkers,
                    WorkerPool* pool = nullptr);
  // Calls stop().
  ~InventoryEndpoint();
  InventoryEndpoint(const InventoryEndpoint&) = delete;
  InventoryEndpoint& operator=(const InventoryEndpoint&) = delete;

  // The handler to give HttpServer.
  http::HttpServer::Handler httpHandler();
  // The admission step to give HttpServer (HttpServerOptions::admit): runs
  // InventoryHandler::admit on the worker threads (admitNow on the I/O
  // thread when the credentials are cached), so that authentication happens
  // before the server reads a body, without blocking the I/O thread.
  std::function<void(const http::HttpRequest&, std::function<void(http::Admission)>)>
  admitHandler();

  // Tells held pushes of `key` to look again. Cheap; any thread, also the
  // store's listener thread.
  void poolStatusChanged(const reconcile::PoolKey& key);

  // Answers every held push with its current state, answers new requests
  // 503 and waits for its tasks on the pool. Call before HttpServer::stop(), so that the
  // server's grace period is not spent on waits. Idempotent.
  void stop();

  // The number of held pushes; for tests.
  size_t pendingCount() const;
  // Blocks until no request or status change is queued or being handled and
  // `held` pushes are held; false after a safety timeout. For tests.
  bool waitIdleForTest(size_t held) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace rsc::controller::inventory
