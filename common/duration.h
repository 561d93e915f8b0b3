// parseDuration: the one parser of Go-style durations ("1m30s", "500ms",
// "1.5s", "0"), used by the service's flags and the inventory API's ?wait=.
// A pure function; safe from any thread.
#pragma once

#include <chrono>
#include <string_view>

#include "common/clock.h"
#include "common/status.h"

namespace rsc {

// Parses a Go-style duration: one or more decimal numbers, each followed by a
// unit (ms, s, m, h), summed; "0" alone needs no unit. Units larger than
// `largest_unit` are refused, so a caller can keep h out where hours make no
// sense. Values beyond Clock::Duration's range saturate at its maximum.
// Fails with InvalidArgument on a sign, a missing unit, spaces or anything else.
StatusOr<Clock::Duration> parseDuration(std::string_view text,
                                        Clock::Duration largest_unit = std::chrono::hours(1));

}  // namespace rsc
