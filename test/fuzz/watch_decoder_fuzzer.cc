// Fuzz target for the watch stream reader (client/watch_decoder.h): any bytes
// as the body of a watch response, cut into chunks three ways (whole, at
// pseudo-random points, byte by byte), each event then decoded with
// resourceSliceWatchEventFromJson. Besides "never crashes, never throws", it
// checks that the chunking changes nothing (the same events, the same
// verdict), that an ERROR event never reads as success, and that a decoded
// slice survives a JSON round trip unchanged. A broken promise aborts, so that
// a fuzzer keeps the input.
//
// Input: byte 0 seeds the chunk sizes, byte 1 picks the event size limit (0:
// the default 8 MiB, else 64 << (byte % 16)), the rest is the stream.
// Built with libFuzzer (test/fuzz/run-libfuzzer) or with corpus_main.cc.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "client/resource_slice.h"
#include "client/watch_decoder.h"
#include "test/fuzz/promises.h"

namespace rsc::client {
namespace {

[[noreturn]] void broken(std::string_view promise, std::string_view detail = {}) {
  testing::broken("watch_decoder", promise, detail);
}

struct Decoded {
  std::vector<Json> events;
  bool feed_ok = true;
  bool finish_ok = true;
};

// Feeds `stream` in chunks of the sizes `next_size` returns (at least 1).
template <typename NextSize>
Decoded decode(std::string_view stream, size_t max_event_bytes, NextSize next_size) {
  Decoded out;
  WatchDecoder decoder(max_event_bytes);
  size_t at = 0;
  while (at < stream.size()) {
    const size_t n = std::min(stream.size() - at, next_size());
    const Status status = decoder.feed(stream.substr(at, n), [&](Json&& event) {
      out.events.push_back(std::move(event));
      return true;
    });
    at += n;
    if (!status.ok()) {
      out.feed_ok = false;
      break;
    }
  }
  out.finish_ok = decoder.finish().ok();
  return out;
}

void checkEvent(const Json& event) {
  const StatusOr<WatchEvent<ResourceSlice>> decoded = resourceSliceWatchEventFromJson(event);
  if (!decoded.ok()) {
    return;
  }
  switch (decoded->type) {
    case WatchEventType::kError:
      if (decoded->error.ok()) {
        broken("an ERROR event that reads as success");
      }
      return;
    case WatchEventType::kBookmark:
      if (decoded->object.metadata.resource_version.empty()) {
        broken("a BOOKMARK without a resourceVersion");
      }
      return;
    case WatchEventType::kAdded:
    case WatchEventType::kModified:
    case WatchEventType::kDeleted:
      break;
  }
  // What the controller would write back is what it read.
  testing::checkJsonRoundTrip("watch_decoder", "a decoded slice", decoded->object);
}

}  // namespace
}  // namespace rsc::client

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace rsc::client;
  if (size < 2) {
    return 0;
  }
  uint32_t state = data[0] * 2654435761U + 1;
  const size_t limit =
      data[1] == 0 ? WatchDecoder::kDefaultMaxEventBytes : size_t{64} << (data[1] % 16);
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);

  // The library's own work first, so that a crash in it is not blamed on
  // the comparisons below (which recurse through the events too).
  const Decoded whole = decode(stream, limit, [] { return SIZE_MAX; });
  for (const Json& event : whole.events) {
    checkEvent(event);
  }

  const Decoded cut = decode(stream, limit, [&] {
    state = state * 1664525U + 1013904223U;
    return size_t{1} + (state >> 24) % 97;
  });
  const Decoded bytes = decode(stream, limit, [] { return size_t{1}; });
  for (const Decoded* other : {&cut, &bytes}) {
    if (other->feed_ok != whole.feed_ok || other->finish_ok != whole.finish_ok) {
      broken("the chunking changes the verdict");
    }
    if (other->events != whole.events) {
      broken("the chunking changes the events");
    }
  }
  return 0;
}
