// DecodeBudget: the one budget of memory that bodies being decoded at once may take, pushes and
// pulls alike (--max-inflight-decoded-bytes, DESIGN.md section 11). The inventory handler and
// pull mode's fetcher reserve a body's decoded cost (measureJsonBody) before building anything
// and release it once the JSON tree and what was decoded from it are gone; a reservation that
// does not fit waits a bounded time for others to finish, else the caller refuses the work.
// Releasing a large reservation hands the freed heap back to the OS (malloc_trim), at most once
// per trim interval while others are held, and when the last one is released. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"
#include "controller/pool/pool_json.h"

namespace rsc::controller::pool {

// The default of --max-inflight-decoded-bytes. The chart limits the container to 512 MiB; with
// the other limits at their defaults the rest is the process at rest and its caches (~20-60 MiB),
// in-flight bodies (--inventory-max-inflight-body-bytes, 32 MiB), pulled bodies being read (a few
// times --max-request-bytes) and the heap's fragmentation after large decodes (up to half again
// what was decoded). 256 MiB leaves that room and still decodes two of the largest bodies
// --max-decoded-bytes admits at once.
inline constexpr size_t kDefaultMaxInflightDecodedBytes = 256 * 1024 * 1024;
// How long a push or a fetch waits for room before it is refused: decoding the largest body takes
// a fraction of a second, so a short burst gets through one after the other, while a client that
// keeps the budget full is answered within a second.
inline constexpr Clock::Duration kDefaultDecodeWait = std::chrono::seconds(1);
// A released reservation this large trims the heap: smaller decodes leave little to give back,
// and each trim walks every arena (about a millisecond per 100 MiB of heap).
inline constexpr size_t kDefaultTrimAboveBytes = 4 * 1024 * 1024;
inline constexpr Clock::Duration kDefaultTrimInterval = std::chrono::seconds(1);

struct DecodeBudgetOptions {
  // What the reservations held at once may add up to (--max-inflight-decoded-bytes).
  size_t max_bytes = kDefaultMaxInflightDecodedBytes;
  Clock* clock = nullptr;  // required: paces the trims and bounds the waits
  // Releasing a reservation of at least this many bytes returns freed heap to the OS: at once
  // when it was the last one held, else at most once per trim_interval (the last release of a
  // burst trims what the others left). 0: never.
  size_t trim_above_bytes = kDefaultTrimAboveBytes;
  Clock::Duration trim_interval = kDefaultTrimInterval;
};

class DecodeBudget {
 public:
  // Bytes of the budget held until destroyed (or moved from).
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept;
    Reservation& operator=(Reservation&& other) noexcept;
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    ~Reservation();
    size_t bytes() const { return bytes_; }

   private:
    friend class DecodeBudget;
    Reservation(DecodeBudget* budget, size_t bytes) : budget_(budget), bytes_(bytes) {}
    DecodeBudget* budget_ = nullptr;
    size_t bytes_ = 0;
  };

  explicit DecodeBudget(DecodeBudgetOptions options);
  DecodeBudget(const DecodeBudget&) = delete;
  DecodeBudget& operator=(const DecodeBudget&) = delete;

  // Reserves `bytes`, waiting up to `wait` for others to release room; nullopt when there is
  // none by then (or `bytes` exceeds the whole budget).
  std::optional<Reservation> reserve(size_t bytes, Clock::Duration wait);

  size_t maxBytes() const { return options_.max_bytes; }
  // Bytes reserved now.
  size_t reserved() const;
  // How many times released memory was handed back to the OS.
  size_t trims() const;

 private:
  void release(size_t bytes);

  const DecodeBudgetOptions options_;
  mutable std::mutex mu_;
  std::condition_variable released_;
  size_t reserved_ = 0;                      // guarded by mu_
  std::optional<Clock::TimePoint> trimmed_;  // guarded by mu_
  bool trim_due_ = false;                    // guarded by mu_: a large release not yet trimmed
  size_t trims_ = 0;                         // guarded by mu_
};

// The reason of the Status when a body finds no room in the budget in time (also the `result`
// of a pull fetch refused so).
inline constexpr char kReasonBusy[] = "Busy";

// A body parsed under the budget. The reservation is released after the JSON is destroyed (members
// go in reverse order); a caller that keeps what it decoded keeps this object alive until then.
struct BudgetedJson {
  DecodeBudget::Reservation reservation;
  Json json;
};

// parseJsonBody, with the body's decoded cost reserved in `budget` (when not null) between the
// first pass and building the tree. Fails as parseJsonBody does, or with Unavailable (reason
// kReasonBusy) when the budget has no room within `wait`.
StatusOr<BudgetedJson> parseJsonBodyWithin(DecodeBudget* budget, std::string_view body,
                                           size_t max_decoded_bytes, Clock::Duration wait);

}  // namespace rsc::controller::pool
