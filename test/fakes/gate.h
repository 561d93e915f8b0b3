// Gate: holds calls back inside a fake or a wrapper while a test keeps it
// closed, like a network partition or a stalled server, so that the test can
// change the world meanwhile; says when calls have reached it. Open until
// closed. Used by reactors of FakeKubeApi and by KubeApi wrappers in tests.
// Thread-safe: calls pass on the threads of the code under test, the test
// opens, closes and waits on its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stop_token>

namespace rsc::testing {

class Gate {
 public:
  void close();
  void open();

  // For the held call: counts it as arrived, then waits while the gate is
  // closed, until it opens or `stop` is requested.
  void pass(std::stop_token stop = {});
  // The same, but goes on after `timeout` too: a safety net for a test that
  // fails before it opens the gate, never the synchronisation.
  void pass(std::chrono::milliseconds timeout);

  // Wait until `n` calls in all have arrived, or until a call is held at the
  // closed gate. The timeout is a safety net; false on timeout.
  bool waitArrived(int n, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  bool waitHeld(std::chrono::milliseconds timeout = std::chrono::seconds(10));

 private:
  void passUntil(std::stop_token stop, std::optional<std::chrono::milliseconds> timeout);

  std::mutex mu_;
  std::condition_variable_any cv_;
  bool open_ = true;
  int arrived_ = 0;
  int held_ = 0;
};

}  // namespace rsc::testing
