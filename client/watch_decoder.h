// WatchDecoder: turns the body of a watch response, arriving in chunks of any
// size, into events. An event may be split across chunks and a chunk may hold
// many events; the API server writes one JSON object per event, each followed
// by a newline, but the decoder does not rely on the newlines. Used by
// RestKubeApi on its watch thread; one decoder per stream, not synchronised.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "client/json_nesting.h"
#include "client/kube_api.h"
#include "client/objects.h"
#include "client/resource_slice.h"
#include "common/status.h"

namespace rsc::client {

class WatchDecoder {
 public:
  // An event larger than this is an error (a ResourceSlice is at most about
  // 1.1 MB; etcd's request limit is 1.5 MiB).
  static constexpr size_t kDefaultMaxEventBytes = 8 << 20;

  explicit WatchDecoder(size_t max_event_bytes = kDefaultMaxEventBytes);

  // Appends `chunk` and calls `on_event` with each complete top-level JSON
  // value, in order. Stops early (returning OK) when `on_event` returns false.
  // Fails with InvalidArgument on malformed JSON or an oversized event.
  Status feed(std::string_view chunk, const std::function<bool(Json&&)>& on_event);

  // What the reader of an event's text found.
  enum class Verdict : uint8_t { kMore, kStop, kMalformed };
  // feed() for a reader that decodes the text itself (without a DOM): each
  // complete top-level value's text, whose brackets balance but which may
  // still be malformed JSON; a reader that finds it so answers kMalformed,
  // and the decoder fails as feed() would.
  Status feedText(std::string_view chunk,
                  const std::function<Verdict(std::string_view text)>& on_text);

  // Returns OK when no partial event is pending (call at end of stream).
  Status finish() const;

 private:
  size_t max_event_bytes_;
  std::string buffer_;
  size_t scanned_ = 0;   // bytes of buffer_ already scanned for a value's end
  JsonNesting nesting_;  // of buffer_'s first scanned_ bytes
  // Set once the stream is known to be bad: every later call fails, because
  // nothing after a framing error can be trusted.
  bool failed_ = false;
};

// Converts one decoded watch event ({"type": ..., "object": ...}) into a
// typed event. An ERROR event's object is a metav1.Status and becomes
// WatchEvent::error (a 410 is StatusCode::kGone).
StatusOr<WatchEvent<ResourceSlice>> resourceSliceWatchEventFromJson(const Json& event);
// Status::reason() of an event whose text is not JSON.
inline constexpr char kReasonNotJson[] = "NotJson";

// The same from the event's text. The API server writes an event as
// {"type":"ADDED","object":{...}}; such events of ADDED, MODIFIED and DELETED
// are decoded without a DOM (resourceSliceFromText); any other event, and any
// object that refuses, goes through the DOM, whose errors callers know. Text
// that is not JSON fails with reason kReasonNotJson. The object of an ADDED or
// MODIFIED event in a state `held` has is read up to its spec only
// (resourceSliceFromText with a HeldSlice).
StatusOr<WatchEvent<ResourceSlice>> resourceSliceWatchEventFromText(
    std::string_view text, const HeldSlice& held = nullptr);
// Any event's text through its DOM and `from_json`.
template <typename T>
StatusOr<WatchEvent<T>> watchEventFromText(std::string_view text,
                                           StatusOr<WatchEvent<T>> (*from_json)(const Json&)) {
  const Json event = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (event.is_discarded()) {
    return Status(StatusCode::kInvalidArgument, "not JSON", {}, kReasonNotJson);
  }
  return from_json(event);
}
// For a watch that asked for PartialObjectMetadata (the Node cache's).
StatusOr<WatchEvent<PartialObjectMetadata>> partialObjectMetadataWatchEventFromJson(
    const Json& event);
StatusOr<WatchEvent<Service>> serviceWatchEventFromJson(const Json& event);
StatusOr<WatchEvent<EndpointSlice>> endpointSliceWatchEventFromJson(const Json& event);
StatusOr<WatchEvent<Pod>> podWatchEventFromJson(const Json& event);

}  // namespace rsc::client
