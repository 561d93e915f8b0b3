// Names the calling thread, as `top -H`, /proc/PID/task/*/comm, gdb and the
// thread table of the README show it: every long-lived thread of the service
// names itself first thing, so that a count of threads says whose they are.
#pragma once

#include <cstddef>
#include <latch>
#include <memory>
#include <string_view>

namespace rsc {

// The kernel keeps 15 bytes of a name; a longer one is cut there.
inline constexpr size_t kMaxThreadName = 15;

void setThreadName(std::string_view name);

// Names each of the `threads` threads of a pool whose threads are not ours to
// start (an asio::thread_pool): `post(task)` queues a task on the pool; one
// task per thread names it and waits until all have, so that no thread takes
// two. Call right after the pool is made, before other work is posted.
template <typename Post>
void nameEveryThread(size_t threads, std::string_view name, Post post) {
  // Shared: a task may still be inside arrive_and_wait() after the count
  // reached zero and this function returned.
  auto named = std::make_shared<std::latch>(static_cast<std::ptrdiff_t>(threads));
  for (size_t i = 0; i < threads; ++i) {
    post([named, name] {
      setThreadName(name);
      named->arrive_and_wait();
    });
  }
  named->wait();
}

}  // namespace rsc
