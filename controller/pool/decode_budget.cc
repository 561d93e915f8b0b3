#include "controller/pool/decode_budget.h"

#include <malloc.h>

#include <algorithm>
#include <utility>

namespace rsc::controller::pool {

namespace {

// A waiter looks at the clock this often, so that a Clock other than the real one (a test's)
// still bounds the wait; a release wakes it at once.
constexpr auto kWaitSlice = std::chrono::milliseconds(50);

}  // namespace

DecodeBudget::Reservation::Reservation(Reservation&& other) noexcept
    : budget_(std::exchange(other.budget_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DecodeBudget::Reservation& DecodeBudget::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (budget_ != nullptr) budget_->release(bytes_);
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

DecodeBudget::Reservation::~Reservation() {
  if (budget_ != nullptr) budget_->release(bytes_);
}

DecodeBudget::DecodeBudget(DecodeBudgetOptions options) : options_(options) {
  if (options_.clock == nullptr) {
    // A programmer error: crash loudly.
    std::abort();
  }
}

std::optional<DecodeBudget::Reservation> DecodeBudget::reserve(size_t bytes, Clock::Duration wait) {
  if (bytes > options_.max_bytes) return std::nullopt;
  const Clock::TimePoint deadline = options_.clock->now() + wait;
  std::unique_lock lock(mu_);
  while (bytes > options_.max_bytes - reserved_) {
    const Clock::TimePoint now = options_.clock->now();
    if (now >= deadline) return std::nullopt;
    released_.wait_for(lock, std::min<Clock::Duration>(deadline - now, kWaitSlice));
  }
  reserved_ += bytes;
  return Reservation(this, bytes);
}

size_t DecodeBudget::reserved() const {
  std::lock_guard lock(mu_);
  return reserved_;
}

size_t DecodeBudget::trims() const {
  std::lock_guard lock(mu_);
  return trims_;
}

void DecodeBudget::release(size_t bytes) {
  bool trim = false;
  {
    std::lock_guard lock(mu_);
    reserved_ -= std::min(bytes, reserved_);
    released_.notify_all();
    if (options_.trim_above_bytes > 0 && bytes >= options_.trim_above_bytes) trim_due_ = true;
    // At most once per interval while decodes go on, and always when the last one is done, so
    // that what a burst freed after its last paced trim is given back too.
    const Clock::TimePoint now = options_.clock->now();
    if (trim_due_ && (reserved_ == 0 || !trimmed_ || now - *trimmed_ >= options_.trim_interval)) {
      trim_due_ = false;
      trimmed_ = now;
      ++trims_;
      trim = true;
    }
  }
  // The JSON tree is made of small blocks that glibc keeps in its arenas once freed (one arena
  // per thread that decoded); without this a burst of large decodes leaves its peak resident.
  if (trim) malloc_trim(0);
}

StatusOr<BudgetedJson> parseJsonBodyWithin(DecodeBudget* budget, std::string_view body,
                                           size_t max_decoded_bytes, Clock::Duration wait) {
  ASSIGN_OR_RETURN(const size_t cost, measureJsonBody(body, max_decoded_bytes));
  BudgetedJson out;
  if (budget != nullptr) {
    std::optional<DecodeBudget::Reservation> reservation = budget->reserve(cost, wait);
    if (!reservation) {
      return Status(StatusCode::kUnavailable,
                    "too many bodies are being decoded at once (" + std::to_string(cost) +
                        " bytes more would pass the " + std::to_string(budget->maxBytes()) +
                        " of --max-inflight-decoded-bytes); try again shortly",
                    {}, kReasonBusy);
    }
    out.reservation = std::move(*reservation);
  }
  ASSIGN_OR_RETURN(out.json, parseMeasuredJsonBody(body));
  return out;
}

}  // namespace rsc::controller::pool
