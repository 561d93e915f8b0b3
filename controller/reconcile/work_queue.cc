#include "controller/reconcile/work_queue.h"

namespace rsc::controller::reconcile::internal {

WorkQueueObserver& noOpWorkQueueObserver() {
  static WorkQueueObserver observer;
  return observer;
}

// Clock can sleep but cannot be woken early, and a getter waiting for a due key must
// wake early when a key with an earlier due time arrives or the queue shuts
// down, so it waits on a condition variable instead. wait_for measures the
// timeout on std::chrono::steady_clock, the one exception to "all time through
// Clock". The timeout is computed through Clock and the caller re-reads Clock
// after every wake, so with a FakeClock the wait only bounds how soon the
// clock is looked at again; it never decides whether a key is due.
void waitAtMost(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                Clock::Duration timeout) {
  if (timeout <= Clock::Duration::zero()) {
    return;
  }
  cv.wait_for(lock, timeout);
}

}  // namespace rsc::controller::reconcile::internal
