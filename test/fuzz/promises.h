// What the fuzz targets here share: how a target reports a broken promise of
// the code under test (on stderr, then abort, so that a fuzzer keeps the input
// and corpus_main.cc's exit status says it), and the promises that more than
// one target checks. Single-threaded, like a fuzz target.
#pragma once

#include <string_view>

#include "client/resource_slice.h"

namespace rsc::testing {

// Reports that `promise` broke, with `detail` when there is one, naming the
// fuzz target `target`, and aborts.
[[noreturn]] void broken(std::string_view target, std::string_view promise,
                         std::string_view detail = {});

// Checks that `slice` survives the JSON round trip as the controller makes it
// (toJson, text, parse, resourceSliceFromJson) unchanged; `what` names the
// slice in a report ("a decoded slice").
void checkJsonRoundTrip(std::string_view target, std::string_view what,
                        const client::ResourceSlice& slice);

}  // namespace rsc::testing
