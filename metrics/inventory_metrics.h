// InventoryMetrics: what the inventory HTTP API reports, one counter of pushes
// by driver and HTTP status code. Built once by main and passed by reference to
// the request handler. Thread-safe: every connection's handler calls it.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/registry.h>

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

namespace rsc::metrics {

class InventoryMetrics {
 public:
  // The driver name in a push comes from the URL, before authentication, so a
  // client could invent any number of them. Past this many distinct drivers,
  // new ones are counted under kOverflowDriver. A cluster runs a handful of
  // DRA drivers; 64 leaves room while bounding the series to 64 x the codes.
  static constexpr std::size_t kDefaultMaxDrivers = 64;
  // Not a valid DNS subdomain, so no real driver has this name.
  static constexpr std::string_view kOverflowDriver = "_other";

  // Registers the family in `registry`, which must outlive this object.
  explicit InventoryMetrics(prometheus::Registry& registry,
                            std::size_t max_drivers = kDefaultMaxDrivers);
  InventoryMetrics(const InventoryMetrics&) = delete;
  InventoryMetrics& operator=(const InventoryMetrics&) = delete;

  // Counts one push request of `driver` answered with `http_code`. On a
  // driver's first push the codes the API answers with (DESIGN.md section 4)
  // are created at 0, so error-ratio alerts have a denominator from the start.
  void push(std::string_view driver, int http_code);

 private:
  prometheus::Counter& counterLocked(const std::string& driver, int http_code);

  prometheus::Family<prometheus::Counter>& pushes_;
  const std::size_t max_drivers_;

  std::mutex mu_;
  // Counters by driver and code. Counters are never removed, so a pointer
  // stays valid after the lock is released.
  std::map<std::string, std::map<int, prometheus::Counter*>, std::less<>>
      drivers_;  // guarded by mu_
};

}  // namespace rsc::metrics
