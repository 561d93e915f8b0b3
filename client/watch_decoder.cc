#include "client/watch_decoder.h"

#include <utility>

#include "client/api_error.h"
#include "common/strings.h"

namespace rsc::client {
namespace {

// No Kubernetes object nests anywhere near this deep; a deeper event is
// hostile or broken, and copying it recursively would overflow the stack.
constexpr size_t kMaxDepth = 256;

bool isJsonWhitespace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

WatchDecoder::WatchDecoder(size_t max_event_bytes) : max_event_bytes_(max_event_bytes) {}

// Invariant between calls: buffer_ holds only the unfinished value (it starts
// with its opening bracket) or nothing; scanned_ bytes of it are accounted for
// in nesting_.
Status WatchDecoder::feed(std::string_view chunk, const std::function<bool(Json&&)>& on_event) {
  return feedText(chunk, [&](std::string_view text) {
    Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (value.is_discarded()) {
      return Verdict::kMalformed;
    }
    return on_event(std::move(value)) ? Verdict::kMore : Verdict::kStop;
  });
}

Status WatchDecoder::feedText(std::string_view chunk,
                              const std::function<Verdict(std::string_view text)>& on_text) {
  if (failed_) {
    return invalidArgument("watch stream: decoder already failed");
  }
  buffer_.append(chunk);
  size_t start = 0;  // where the value being scanned begins
  size_t i = scanned_;
  auto fail = [this](std::string message) {
    failed_ = true;
    buffer_.clear();
    scanned_ = 0;
    return invalidArgument("watch stream: " + std::move(message));
  };
  for (; i < buffer_.size(); ++i) {
    const char c = buffer_[i];
    if (nesting_.depth() == 0) {
      // Between values: only whitespace, or the start of the next object.
      if (isJsonWhitespace(c)) {
        start = i + 1;
        continue;
      }
      if (c != '{' && c != '[') {
        return fail("expected a JSON object at byte " + std::to_string(i) + ", got '" +
                    std::string(1, c) + "'");
      }
      start = i;
      nesting_.feed(c);
      continue;
    }
    if (i - start + 1 > max_event_bytes_) {
      return fail("event larger than " + std::to_string(max_event_bytes_) + " bytes");
    }
    const JsonNesting::Byte byte = nesting_.feed(c);
    if (byte == JsonNesting::Byte::kOpen && nesting_.depth() > kMaxDepth) {
      return fail("event nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    if (byte != JsonNesting::Byte::kClose || nesting_.depth() > 0) {
      continue;
    }
    // One complete value: [start, i]. Brackets balance, but the reader
    // still checks that it is valid JSON (e.g. "{]" or a missing comma).
    const Verdict verdict = on_text(std::string_view(buffer_).substr(start, i + 1 - start));
    if (verdict == Verdict::kMalformed) {
      return fail("malformed JSON event of " + std::to_string(i + 1 - start) + " bytes");
    }
    start = i + 1;
    if (verdict == Verdict::kStop) {
      // Keep what follows for the next call, unscanned.
      buffer_.erase(0, start);
      scanned_ = 0;
      return okStatus();
    }
  }
  // Drop what was consumed; keep the unfinished value.
  buffer_.erase(0, nesting_.depth() == 0 ? buffer_.size() : start);
  scanned_ = buffer_.size();
  return okStatus();
}

Status WatchDecoder::finish() const {
  if (failed_) {
    return invalidArgument("watch stream: decoder already failed");
  }
  for (char c : buffer_) {
    if (!isJsonWhitespace(c)) {
      return invalidArgument("watch stream ended inside an event (" +
                             std::to_string(buffer_.size()) + " bytes pending)");
    }
  }
  return okStatus();
}

namespace {

StatusOr<WatchEventType> watchEventTypeFromString(const std::string& type) {
  if (type == "ADDED") {
    return WatchEventType::kAdded;
  }
  if (type == "MODIFIED") {
    return WatchEventType::kModified;
  }
  if (type == "DELETED") {
    return WatchEventType::kDeleted;
  }
  if (type == "BOOKMARK") {
    return WatchEventType::kBookmark;
  }
  if (type == "ERROR") {
    return WatchEventType::kError;
  }
  return invalidArgument("watch event: unknown type \"" + type + "\"");
}

// A BOOKMARK carries only metadata.resourceVersion and annotations (such as
// k8s.io/initial-events-end); a full decode would fail on the missing spec.
Status bookmarkFromJson(const Json& object, ObjectMeta& meta) {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) {
    return invalidArgument("watch event: BOOKMARK object.metadata: must be an object");
  }
  const auto rv = metadata->find("resourceVersion");
  if (rv == metadata->end() || !rv->is_string() || rv->get_ref<const std::string&>().empty()) {
    return invalidArgument(
        "watch event: BOOKMARK object.metadata.resourceVersion: must be a non-empty string");
  }
  meta.resource_version = rv->get<std::string>();
  const auto annotations = metadata->find("annotations");
  if (annotations != metadata->end() && !annotations->is_null()) {
    if (!annotations->is_object()) {
      return invalidArgument(
          "watch event: BOOKMARK object.metadata.annotations: must be an object");
    }
    for (const auto& [key, value] : annotations->items()) {
      if (!value.is_string()) {
        return invalidArgument("watch event: BOOKMARK object.metadata.annotations[\"" + key +
                               "\"]: must be a string");
      }
      meta.annotations[key] = value.get<std::string>();
    }
  }
  return okStatus();
}

// One event whose object `decode` turns into a T.
template <typename T>
StatusOr<WatchEvent<T>> watchEventFromJson(const Json& event,
                                           StatusOr<T> (*decode)(const Json& object)) {
  if (!event.is_object()) {
    return invalidArgument("watch event: must be an object");
  }
  const auto type = event.find("type");
  if (type == event.end() || !type->is_string()) {
    return invalidArgument("watch event: type: must be a string");
  }
  const auto object = event.find("object");
  if (object == event.end() || !object->is_object()) {
    return invalidArgument("watch event: object: must be an object");
  }
  ASSIGN_OR_RETURN(const WatchEventType event_type,
                   watchEventTypeFromString(type->get_ref<const std::string&>()));

  WatchEvent<T> result;
  result.type = event_type;
  switch (event_type) {
    case WatchEventType::kAdded:
    case WatchEventType::kModified:
    case WatchEventType::kDeleted: {
      StatusOr<T> decoded = decode(*object);
      if (!decoded.ok()) {
        return decoded.status().withContext("watch event " + type->get<std::string>() + " object");
      }
      result.object = std::move(decoded).value();
      break;
    }
    case WatchEventType::kBookmark:
      RETURN_IF_ERROR(bookmarkFromJson(*object, result.object.metadata));
      break;
    case WatchEventType::kError:
      result.error = statusFromKubeStatus(*object);
      if (result.error.ok()) {
        // An ERROR event always ends the stream; never let it read as success.
        result.error = internalError(
            "watch ERROR event without a failure status: " +
            excerpt(object->dump(-1, ' ', false, Json::error_handler_t::replace), 256));
      }
      break;
  }
  return result;
}

}  // namespace

StatusOr<WatchEvent<ResourceSlice>> resourceSliceWatchEventFromJson(const Json& event) {
  return watchEventFromJson<ResourceSlice>(event, resourceSliceFromJson);
}

StatusOr<WatchEvent<ResourceSlice>> resourceSliceWatchEventFromText(std::string_view text,
                                                                    const HeldSlice& held) {
  // The object of an event of this exact form is the text between the
  // prefix and the closing bracket; if that is one JSON value, the whole is
  // the event the DOM would read. Anything else (another member order,
  // spaces, more members, a BOOKMARK or an ERROR) goes through the DOM.
  static constexpr std::pair<std::string_view, WatchEventType> kForms[] = {
      {R"({"type":"ADDED","object":)", WatchEventType::kAdded},
      {R"({"type":"MODIFIED","object":)", WatchEventType::kModified},
      {R"({"type":"DELETED","object":)", WatchEventType::kDeleted},
  };
  for (const auto& [prefix, type] : kForms) {
    if (!text.starts_with(prefix) || !text.ends_with('}')) {
      continue;
    }
    const std::string_view body = text.substr(prefix.size(), text.size() - prefix.size() - 1);
    StatusOr<ResourceSlice> object = type == WatchEventType::kDeleted
                                         ? resourceSliceFromText(body)
                                         : resourceSliceFromText(body, held);
    if (!object.ok()) {
      break;
    }
    WatchEvent<ResourceSlice> event;
    event.type = type;
    event.object = std::move(object).value();
    return event;
  }
  return watchEventFromText<ResourceSlice>(text, resourceSliceWatchEventFromJson);
}

StatusOr<WatchEvent<PartialObjectMetadata>> partialObjectMetadataWatchEventFromJson(
    const Json& event) {
  return watchEventFromJson<PartialObjectMetadata>(event, partialObjectMetadataFromJson);
}

StatusOr<WatchEvent<Service>> serviceWatchEventFromJson(const Json& event) {
  return watchEventFromJson<Service>(event, serviceFromJson);
}

StatusOr<WatchEvent<EndpointSlice>> endpointSliceWatchEventFromJson(const Json& event) {
  return watchEventFromJson<EndpointSlice>(event, endpointSliceFromJson);
}

StatusOr<WatchEvent<Pod>> podWatchEventFromJson(const Json& event) {
  return watchEventFromJson<Pod>(event, podFromJson);
}

}  // namespace rsc::client
