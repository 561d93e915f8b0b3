// The delays that the default per-key backoff gives a key that keeps failing,
// written out (5 ms, doubling, capped at 1000 s): the rate limiter's test and
// the work queue's test both check them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "common/clock.h"

namespace rsc::controller::reconcile {

// Checks the first 20 delays of one key.
inline void expectDefaultBackoff(const std::vector<Clock::Duration>& delays) {
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  ASSERT_GE(delays.size(), 20U);
  EXPECT_EQ(delays[0], milliseconds(5));
  EXPECT_EQ(delays[1], milliseconds(10));
  EXPECT_EQ(delays[2], milliseconds(20));
  EXPECT_EQ(delays[3], milliseconds(40));
  EXPECT_EQ(delays[17], milliseconds(655360));
  EXPECT_EQ(delays[18], seconds(1000));
  EXPECT_EQ(delays[19], seconds(1000));
}

}  // namespace rsc::controller::reconcile
