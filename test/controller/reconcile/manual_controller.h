// A Controller that a unit test drives by hand (manual_for_test): no worker
// threads, the test releases due keys and reconciles them on its own thread.
// Shared by the reconcile tests that start a controller on a FakeKubeApi.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stop_token>

#include "controller/reconcile/controller.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_kube_api.h"

namespace rsc::controller::reconcile {

// The options of a controller on `api` that the test drives.
inline ControllerOptions manualOptions(testing::FakeKubeApi& api, Clock& clock,
                                       DesiredStore& store) {
  ControllerOptions o;
  o.api = &api;
  o.clock = &clock;
  o.store = &store;
  o.manual_for_test = true;
  return o;
}

// Makes a controller with `options`, starts its informers and waits until
// both caches are filled. Null, with the test failed, when it cannot.
inline std::unique_ptr<Controller> startManualController(const ControllerOptions& options) {
  auto made = Controller::create(options);
  if (!made.ok()) {
    ADD_FAILURE() << made.status().toString();
    return nullptr;
  }
  std::unique_ptr<Controller> controller = std::move(*made);
  controller->informerForTest().start();
  controller->nodeInformerForTest().start();
  if (!controller->waitForCacheSync(std::stop_token())) {
    ADD_FAILURE() << "the caches did not fill";
    controller->stop();
    return nullptr;
  }
  return controller;
}

// Lets batched pushes through (the clock moves one second) and runs the
// queue dry. Returns how many keys were processed.
inline int drain(Controller& controller, testing::FakeClock& clock) {
  clock.advance(std::chrono::seconds(1));
  controller.queueForTest().releaseDueForTest();
  int n = 0;
  while (controller.processNextItemForTest()) ++n;
  return n;
}

}  // namespace rsc::controller::reconcile
