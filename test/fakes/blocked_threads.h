// BlockedThreads: counts the threads of the code under test that are blocked
// in a fake until the test acts: asleep on a blocking FakeClock, or in a
// FakeKubeApi watch with no event left to deliver. A test waits for the count
// it expects (every background thread blocked) instead of polling: from then
// on nothing happens until the test writes, advances the clock or stops.
// Fakes report from under their own locks (lock order: the fake, then this).
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>

namespace rsc::testing {

class BlockedThreads {
 public:
  // Sets how many threads are blocked in `source` (a fake).
  void set(const void* source, size_t blocked);
  // The number of blocked threads, over every source.
  size_t count() const;
  // Blocks until count() == n. The timeout is a safety net for a broken
  // test, never the synchronisation. Returns false on timeout.
  bool waitFor(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

 private:
  size_t countLocked() const;

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<const void*, size_t> blocked_;
};

}  // namespace rsc::testing
