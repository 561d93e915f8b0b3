#include "test/fakes/fake_kube_api.h"

#include <algorithm>
#include <charconv>
#include <type_traits>

namespace rsc::testing {

using client::ConfigMap;
using client::Lease;
using client::ListOptions;
using client::Node;
using client::Preconditions;
using client::ResourceSlice;
using client::ResourceSliceList;
using client::Secret;
using client::WatchEvent;
using client::WatchEventType;

namespace {

// The first resourceVersion the fake hands out is kInitialResourceVersion + 1;
// not 1, so that no test confuses a resourceVersion with a count.
constexpr uint64_t kInitialResourceVersion = 1000;
// The API server's limit for the generateName prefix (63 - 5 random chars).
constexpr size_t kMaxGenerateNamePrefix = 58;
constexpr size_t kGenerateNameSuffix = 5;
constexpr int kGenerateNameAttempts = 8;
// The characters of generated name suffixes: no vowels (no words) and no
// look-alikes, as the API server's.
constexpr std::string_view kNameAlphabet = "bcdfghjklmnpqrstvwxz2456789";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// Splits at commas outside parentheses ("a in (x,y),b" -> "a in (x,y)", "b").
std::vector<std::string_view> splitTerms(std::string_view s) {
  std::vector<std::string_view> terms;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      terms.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    } else if (s[i] == '(') {
      ++depth;
    } else if (s[i] == ')') {
      --depth;
    }
  }
  return terms;
}

struct LabelRequirement {
  enum class Op { kEquals, kNotEquals, kIn, kNotIn, kExists, kNotExists };
  std::string key;
  Op op = Op::kExists;
  std::vector<std::string> values;

  bool matches(const std::map<std::string, std::string>& labels) const {
    const auto it = labels.find(key);
    const bool has = it != labels.end();
    const bool in_values =
        has && std::find(values.begin(), values.end(), it->second) != values.end();
    switch (op) {
      case Op::kEquals:
      case Op::kIn:
        return in_values;
      case Op::kNotEquals:
      case Op::kNotIn:
        return !in_values;
      case Op::kExists:
        return has;
      case Op::kNotExists:
        return !has;
    }
    return false;
  }
};

struct FieldRequirement {
  std::string field;
  bool equals = true;
  std::string value;
};

// A parsed label and field selector; empty matches everything.
struct Selector {
  std::vector<LabelRequirement> labels;
  std::vector<FieldRequirement> fields;

  bool matchesLabels(const std::map<std::string, std::string>& object_labels) const {
    return std::ranges::all_of(labels, [&](const LabelRequirement& requirement) {
      return requirement.matches(object_labels);
    });
  }

  bool matches(const ResourceSlice& slice) const {
    if (!matchesLabels(slice.metadata.labels)) {
      return false;
    }
    for (const auto& requirement : fields) {
      std::string actual;
      if (requirement.field == "metadata.name") {
        actual = slice.metadata.name;
      } else if (requirement.field == "spec.driver") {
        actual = slice.spec.driver;
      } else {
        actual = slice.spec.node_name.value_or("");
      }
      if ((actual == requirement.value) != requirement.equals) {
        return false;
      }
    }
    return true;
  }
};

Status badSelector(std::string_view kind, std::string_view selector, std::string_view why) {
  return invalidArgument("unable to parse requirement of " + std::string(kind) + " selector \"" +
                         std::string(selector) + "\": " + std::string(why));
}

StatusOr<Selector> parseSelector(const ListOptions& options) {
  Selector selector;
  if (!trim(options.label_selector).empty()) {
    for (std::string_view term : splitTerms(options.label_selector)) {
      LabelRequirement requirement;
      if (term.empty()) {
        return badSelector("label", options.label_selector, "empty requirement");
      }
      if (const size_t open = term.find('('); open != std::string_view::npos) {
        if (term.back() != ')') {
          return badSelector("label", options.label_selector, "missing ')'");
        }
        const std::string_view head = trim(term.substr(0, open));
        const size_t space = head.find_last_of(" \t");
        if (space == std::string_view::npos) {
          return badSelector("label", options.label_selector, "expected 'in' or 'notin'");
        }
        const std::string_view op = head.substr(space + 1);
        if (op == "in") {
          requirement.op = LabelRequirement::Op::kIn;
        } else if (op == "notin") {
          requirement.op = LabelRequirement::Op::kNotIn;
        } else {
          return badSelector("label", options.label_selector, "expected 'in' or 'notin'");
        }
        requirement.key = std::string(trim(head.substr(0, space)));
        const std::string_view inner = term.substr(open + 1, term.size() - open - 2);
        for (std::string_view value : splitTerms(inner)) {
          requirement.values.emplace_back(value);
        }
      } else if (term.front() == '!') {
        requirement.op = LabelRequirement::Op::kNotExists;
        requirement.key = std::string(trim(term.substr(1)));
      } else if (const size_t ne = term.find("!="); ne != std::string_view::npos) {
        requirement.op = LabelRequirement::Op::kNotEquals;
        requirement.key = std::string(trim(term.substr(0, ne)));
        requirement.values.emplace_back(trim(term.substr(ne + 2)));
      } else if (const size_t eq = term.find('='); eq != std::string_view::npos) {
        requirement.op = LabelRequirement::Op::kEquals;
        requirement.key = std::string(trim(term.substr(0, eq)));
        const size_t skip = term.substr(eq).starts_with("==") ? 2 : 1;
        requirement.values.emplace_back(trim(term.substr(eq + skip)));
      } else {
        requirement.key = std::string(term);
      }
      if (requirement.key.empty() ||
          requirement.key.find_first_of(" \t=!()") != std::string::npos) {
        return badSelector("label", options.label_selector, "invalid key");
      }
      selector.labels.push_back(std::move(requirement));
    }
  }
  if (!trim(options.field_selector).empty()) {
    for (std::string_view term : splitTerms(options.field_selector)) {
      FieldRequirement requirement;
      size_t op_at = term.find("!=");
      size_t op_len = 2;
      if (op_at != std::string_view::npos) {
        requirement.equals = false;
      } else if (op_at = term.find("=="); op_at == std::string_view::npos) {
        op_at = term.find('=');
        op_len = 1;
      }
      if (op_at == std::string_view::npos) {
        return badSelector("field", options.field_selector, "expected an operator");
      }
      requirement.field = std::string(trim(term.substr(0, op_at)));
      requirement.value = std::string(trim(term.substr(op_at + op_len)));
      if (requirement.field != "metadata.name" && requirement.field != "spec.driver" &&
          requirement.field != "spec.nodeName") {
        return invalidArgument(
            "field label not supported for resource.k8s.io/v1, "
            "Kind=ResourceSlice: " +
            requirement.field);
      }
      selector.fields.push_back(std::move(requirement));
    }
  }
  return selector;
}

std::optional<uint64_t> parseResourceVersion(std::string_view rv) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(rv.data(), rv.data() + rv.size(), value);
  if (error != std::errc() || end != rv.data() + rv.size() || rv.empty()) {
    return std::nullopt;
  }
  return value;
}

bool matchesPattern(const std::string& pattern, const std::string& value) {
  return pattern == "*" || pattern == value;
}

Status notFoundError(std::string_view kind, const std::string& name) {
  return {StatusCode::kNotFound, std::string(kind) + " \"" + name + "\" not found", {}, "NotFound"};
}

// The object stored at `key`, or the API server's NotFound for `name`.
template <typename Map>
StatusOr<typename Map::mapped_type> findStored(const Map& objects,
                                               const typename Map::key_type& key,
                                               std::string_view kind, const std::string& name) {
  const auto it = objects.find(key);
  if (it == objects.end()) {
    return notFoundError(kind, name);
  }
  return it->second;
}

Status alreadyExistsError(std::string_view kind, const std::string& name) {
  return {StatusCode::kAlreadyExists,
          std::string(kind) + " \"" + name + "\" already exists",
          {},
          "AlreadyExists"};
}

Status staleError(std::string_view kind, const std::string& name) {
  return {StatusCode::kConflict,
          "Operation cannot be fulfilled on " + std::string(kind) + " \"" + name +
              "\": the object has been modified; please apply your changes to the latest "
              "version and try again",
          {},
          "Conflict"};
}

Status invalidError(std::string_view kind, const std::string& name, std::string field,
                    std::string message) {
  std::string text = std::string(kind) + " \"" + name + "\" is invalid: " + field + ": " + message;
  return {StatusCode::kUnprocessable,
          std::move(text),
          {rsc::FieldError{std::move(field), std::move(message)}},
          "Invalid"};
}

constexpr std::string_view kSlices = "resourceslices.resource.k8s.io";

// Queues the first events of `watcher` as the API server does: from "" or
// "0", every current object (`add_current`); from a resourceVersion, the
// events of `history` (which holds every event after `floor`) after it, each
// offered to the watch; from before `floor`, an ERROR 410 event, as the watch
// cache sends it.
template <typename W, typename Entry>
Status queueFirstEvents(W& watcher, uint64_t floor, const std::deque<Entry>& history,
                        const std::function<void()>& add_current) {
  const ListOptions& options = watcher.options;
  const std::string rv = options.resource_version.value_or("");
  if (rv.empty() || rv == "0") {
    add_current();
    return okStatus();
  }
  const auto from = parseResourceVersion(rv);
  if (!from) {
    return invalidArgument("invalid resource version: " + rv);
  }
  if (*from < floor) {
    typename decltype(watcher.pending)::value_type gone;
    gone.type = WatchEventType::kError;
    gone.error = Status(StatusCode::kGone,
                        "too old resource version: " + rv + " (" + std::to_string(floor + 1) + ")",
                        {}, "Expired");
    watcher.pending.push_back(std::move(gone));
    return okStatus();
  }
  for (const auto& entry : history) {
    if (entry.resource_version > *from) {
      watcher.offer(entry);
    }
  }
  return okStatus();
}

// What a watch sees of a change of `type` to an object its selection held
// `before` and holds `now`: entering the selection is an ADDED, leaving it a
// DELETED; nothing when the change stays outside.
std::optional<WatchEventType> selectedEvent(WatchEventType type, bool before, bool now) {
  switch (type) {
    case WatchEventType::kAdded:
    case WatchEventType::kDeleted:
      return now ? std::optional(type) : std::nullopt;
    case WatchEventType::kModified:
      if (before && now) {
        return WatchEventType::kModified;
      }
      if (now) {
        return WatchEventType::kAdded;
      }
      if (before) {
        return WatchEventType::kDeleted;
      }
      return std::nullopt;
    case WatchEventType::kBookmark:
    case WatchEventType::kError:
      break;
  }
  return std::nullopt;
}

// A Service or EndpointSlice selection: labels only.
StatusOr<Selector> parseLabelSelector(std::string_view what, const ListOptions& options) {
  if (!trim(options.field_selector).empty()) {
    return invalidArgument("the fake supports no field selector on " + std::string(what) + ": " +
                           options.field_selector);
  }
  return parseSelector(options);
}

FakeKubeApi::Request newRequest(std::string verb, std::string resource, std::string ns,
                                std::string name) {
  FakeKubeApi::Request request;
  request.verb = std::move(verb);
  request.resource = std::move(resource);
  request.namespace_ = std::move(ns);
  request.name = std::move(name);
  return request;
}

}  // namespace

// One open watch of ResourceSlices. Guarded by the fake's mutex.
struct FakeKubeApi::Watcher {
  ListOptions options;
  Selector selector;
  std::deque<WatchEvent<ResourceSlice>> pending;
  bool closed = false;      // resetWatches(): end now, drop what is pending
  bool delivering = false;  // an event is in the handler
  bool waiting = false;     // the watch's thread waits for an event

  // Queues the event `entry` means for this watch's selection, if any.
  void offer(const HistoryEntry& entry) {
    const auto type =
        selectedEvent(entry.type, entry.old.has_value() && selector.matches(*entry.old),
                      selector.matches(entry.object));
    if (type) {
      pending.push_back({*type, entry.object, {}});
    }
  }
};

// One open watch of Services or EndpointSlices. Guarded by the fake's mutex.
template <typename T>
struct FakeKubeApi::ObjectWatcher {
  ListOptions options;
  Selector selector;
  std::deque<WatchEvent<T>> pending;
  bool closed = false;
  bool delivering = false;
  bool waiting = false;

  bool selects(const T& object) const {
    return (options.namespace_.empty() || object.metadata.namespace_ == options.namespace_) &&
           selector.matchesLabels(object.metadata.labels);
  }
  void offer(const ObjectHistoryEntry<T>& entry) {
    const auto type = selectedEvent(entry.type, entry.old.has_value() && selects(*entry.old),
                                    selects(entry.object));
    if (type) {
      pending.push_back({*type, entry.object, {}});
    }
  }
};

// One open watch of Node metadata. Guarded by the fake's mutex.
struct FakeKubeApi::NodeWatcher {
  ListOptions options;
  std::deque<WatchEvent<client::PartialObjectMetadata>> pending;
  bool closed = false;
  bool delivering = false;
  bool waiting = false;

  // Node watches do not select: every change is an event.
  void offer(const NodeHistoryEntry& entry) { pending.push_back({entry.type, entry.object, {}}); }
};

FakeKubeApi::FakeKubeApi(Clock& clock, FakeKubeApiOptions options)
    : clock_(clock),
      options_(options),
      random_(options.seed),
      resource_version_(kInitialResourceVersion),
      history_floor_(kInitialResourceVersion),
      node_history_floor_(kInitialResourceVersion) {
  services_.history_floor = kInitialResourceVersion;
  endpoint_slices_.history_floor = kInitialResourceVersion;
  pods_.history_floor = kInitialResourceVersion;
}

FakeKubeApi::~FakeKubeApi() = default;

// ---- plumbing ---------------------------------------------------------------

void FakeKubeApi::holdWritesUntilConcurrent(size_t n) {
  std::lock_guard lock(writes_mu_);
  counting_writes_ = true;
  hold_writes_until_ = n;
  max_writes_in_flight_ = 0;
}

size_t FakeKubeApi::maxConcurrentWrites() const {
  std::lock_guard lock(writes_mu_);
  return max_writes_in_flight_;
}

Status FakeKubeApi::invoke(Request& request) {
  std::vector<RegisteredReactor> matching;
  {
    std::lock_guard lock(mu_);
    actions_.push_back(Action{request.verb, request.resource, request.namespace_, request.name,
                              request.options, request.dry_run});
    for (const auto& registered : reactors_) {
      if (matchesPattern(registered.verb, request.verb) &&
          matchesPattern(registered.resource, request.resource)) {
        matching.push_back(registered);
      }
    }
  }
  if (request.resource == "resourceslices" &&
      (request.verb == "create" || request.verb == "update" || request.verb == "delete")) {
    std::unique_lock lock(writes_mu_);
    if (counting_writes_) {
      max_writes_in_flight_ = std::max(max_writes_in_flight_, ++writes_in_flight_);
      if (hold_writes_until_ != 0 && writes_in_flight_ >= hold_writes_until_) {
        hold_writes_until_ = 0;  // open for good
      }
      writes_cv_.notify_all();
      if (!writes_cv_.wait_for(lock, std::chrono::seconds(10),
                               [&] { return hold_writes_until_ == 0; })) {
        hold_writes_until_ = 0;  // the safety net: fail once, not per write
        writes_cv_.notify_all();
      }
      --writes_in_flight_;
    }
  }
  for (const RegisteredReactor& registered : matching) {
    std::lock_guard running(*registered.running);
    RETURN_IF_ERROR(registered.reactor(request));
  }
  return okStatus();
}

std::string FakeKubeApi::nextResourceVersionLocked() { return std::to_string(++resource_version_); }

std::string FakeKubeApi::generateSuffixLocked(size_t length) {
  std::uniform_int_distribution<size_t> pick(0, kNameAlphabet.size() - 1);
  std::string suffix;
  for (size_t i = 0; i < length; ++i) {
    suffix.push_back(kNameAlphabet[pick(random_)]);
  }
  return suffix;
}

std::string FakeKubeApi::newUidLocked() {
  std::uniform_int_distribution<uint32_t> nibble(0, 15);
  std::string uid;
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) {
      uid.push_back('-');
    }
    uid.push_back("0123456789abcdef"[nibble(random_)]);
  }
  return uid;
}

template <typename T, typename W>
void FakeKubeApi::publishLocked(std::deque<ObjectHistoryEntry<T>>& history, uint64_t& floor,
                                const std::vector<std::shared_ptr<W>>& watchers,
                                WatchEventType type, const std::type_identity_t<T>* old,
                                const T& object) {
  ObjectHistoryEntry<T> entry;
  entry.resource_version = resource_version_;
  entry.type = type;
  if (old != nullptr) {
    entry.old = *old;
  }
  entry.object = object;
  for (const auto& watcher : watchers) {
    watcher->offer(entry);
  }
  history.push_back(std::move(entry));
  while (history.size() > options_.watch_history) {
    floor = history.front().resource_version;
    history.pop_front();
  }
  notifyLocked();
}

void FakeKubeApi::publishNodeLocked(WatchEventType type, const Node& node) {
  const client::PartialObjectMetadata metadata{node.metadata, nullptr};
  publishLocked(node_history_, node_history_floor_, node_watchers_, type, nullptr, metadata);
}

template <typename W, typename T>
Status FakeKubeApi::serveWatchLocked(std::unique_lock<std::mutex>& lock,
                                     std::vector<std::shared_ptr<W>>& registry,
                                     const std::shared_ptr<W>& watcher,
                                     const client::WatchHandler<T>& handler,
                                     const std::stop_token& stop, std::string_view what) {
  registry.push_back(watcher);
  notifyLocked();
  auto unregister = [&] {
    std::erase(registry, watcher);
    notifyLocked();
  };
  while (true) {
    watcher->waiting = true;
    reportBlockedLocked();
    cv_.wait(lock, stop, [&] { return watcher->closed || !watcher->pending.empty(); });
    watcher->waiting = false;
    reportBlockedLocked();
    if (stop.stop_requested()) {
      unregister();
      return cancelled("watch " + std::string(what) + ": stopped");
    }
    if (watcher->closed) {
      unregister();
      return okStatus();
    }
    WatchEvent<T> event = std::move(watcher->pending.front());
    watcher->pending.pop_front();
    watcher->delivering = true;
    lock.unlock();
    const bool more = handler(event);
    lock.lock();
    watcher->delivering = false;
    notifyLocked();
    if (!more || event.type == WatchEventType::kError) {
      unregister();
      return okStatus();
    }
  }
}

// ---- ResourceSlices ---------------------------------------------------------

StatusOr<ResourceSlice> FakeKubeApi::createSliceLocked(ResourceSlice slice) {
  if (slice.metadata.name.empty()) {
    if (slice.metadata.generate_name.empty()) {
      return invalidError(kSlices, "", "metadata.name",
                          "Required value: name or generateName is required");
    }
    const std::string prefix = slice.metadata.generate_name.substr(0, kMaxGenerateNamePrefix);
    for (int attempt = 0; attempt < kGenerateNameAttempts; ++attempt) {
      std::string candidate = prefix + generateSuffixLocked(kGenerateNameSuffix);
      if (!slices_.contains(candidate)) {
        slice.metadata.name = std::move(candidate);
        break;
      }
    }
    if (slice.metadata.name.empty()) {
      return alreadyExistsError(kSlices, prefix + "*****");
    }
  }
  if (slices_.contains(slice.metadata.name)) {
    return alreadyExistsError(kSlices, slice.metadata.name);
  }
  if (!slice.metadata.resource_version.empty()) {
    // What the API server's storage layer answers (as an internal error).
    return internalError("resourceVersion should not be set on objects to be created");
  }
  slice.metadata.uid = newUidLocked();
  slice.metadata.generation = 1;
  slice.metadata.creation_timestamp = formatTime(clock_.systemNow());
  slice.metadata.deletion_timestamp.reset();
  slice.metadata.resource_version = nextResourceVersionLocked();
  slices_[slice.metadata.name] = slice;
  publishLocked(history_, history_floor_, watchers_, WatchEventType::kAdded, nullptr, slice);
  return slice;
}

StatusOr<ResourceSlice> FakeKubeApi::updateSliceLocked(ResourceSlice slice,
                                                       bool require_resource_version) {
  const std::string& name = slice.metadata.name;
  if (name.empty()) {
    return invalidError(kSlices, "", "metadata.name", "Required value: name is required");
  }
  const auto it = slices_.find(name);
  if (it == slices_.end()) {
    return notFoundError(kSlices, name);
  }
  const ResourceSlice& stored = it->second;
  if (require_resource_version) {
    if (slice.metadata.resource_version.empty()) {
      return invalidError(kSlices, name, "metadata.resourceVersion",
                          "Invalid value: must be specified for an update");
    }
    if (slice.metadata.resource_version != stored.metadata.resource_version) {
      return staleError(kSlices, name);
    }
  }
  if (!slice.metadata.uid.empty() && slice.metadata.uid != stored.metadata.uid) {
    return Status(StatusCode::kConflict,
                  "Precondition failed: UID in precondition: " + slice.metadata.uid +
                      ", UID in object meta: " + stored.metadata.uid,
                  {}, "Conflict");
  }
  if (slice.spec.driver != stored.spec.driver) {
    return invalidError(kSlices, name, "spec.driver",
                        "Invalid value: \"" + slice.spec.driver + "\": field is immutable");
  }
  if (slice.spec.node_name != stored.spec.node_name) {
    return invalidError(kSlices, name, "spec.nodeName", "Invalid value: field is immutable");
  }
  // Fields the server owns.
  slice.metadata.uid = stored.metadata.uid;
  slice.metadata.creation_timestamp = stored.metadata.creation_timestamp;
  slice.metadata.deletion_timestamp = stored.metadata.deletion_timestamp;
  slice.metadata.generation = stored.metadata.generation;
  slice.metadata.resource_version = stored.metadata.resource_version;
  if (slice == stored) {
    // Nothing changed: the API server writes nothing and sends no event.
    return stored;
  }
  if (!(slice.spec == stored.spec)) {
    ++slice.metadata.generation;
  }
  slice.metadata.resource_version = nextResourceVersionLocked();
  const ResourceSlice old = stored;
  it->second = slice;
  publishLocked(history_, history_floor_, watchers_, WatchEventType::kModified, &old, slice);
  return slice;
}

Status FakeKubeApi::deleteSliceLocked(const std::string& name, const Preconditions& preconditions) {
  const auto it = slices_.find(name);
  if (it == slices_.end()) {
    return notFoundError(kSlices, name);
  }
  if (preconditions.uid && *preconditions.uid != it->second.metadata.uid) {
    return {StatusCode::kConflict,
            "Precondition failed: UID in precondition: " + *preconditions.uid +
                ", UID in object meta: " + it->second.metadata.uid,
            {},
            "Conflict"};
  }
  if (preconditions.resource_version &&
      *preconditions.resource_version != it->second.metadata.resource_version) {
    return {
        StatusCode::kConflict,
        "Precondition failed: ResourceVersion in precondition: " + *preconditions.resource_version +
            ", ResourceVersion in object meta: " + it->second.metadata.resource_version,
        {},
        "Conflict"};
  }
  ResourceSlice last = std::move(it->second);
  slices_.erase(it);
  // A DELETED event carries the last state at the deletion's resourceVersion.
  last.metadata.resource_version = nextResourceVersionLocked();
  publishLocked(history_, history_floor_, watchers_, WatchEventType::kDeleted, nullptr, last);
  return okStatus();
}

StatusOr<ResourceSlice> FakeKubeApi::getResourceSlice(const std::string& name) {
  Request request = newRequest("get", "resourceslices", "", name);
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  return findStored(slices_, request.name, kSlices, request.name);
}

StatusOr<ResourceSliceList> FakeKubeApi::listResourceSlices(const ListOptions& options) {
  Request request = newRequest("list", "resourceslices", "", "");
  request.options = options;
  RETURN_IF_ERROR(invoke(request));
  const ListOptions& opts = request.options;
  std::lock_guard lock(mu_);
  Snapshot snapshot;
  size_t offset = 0;
  uint64_t snapshot_id = 0;
  if (!opts.continue_token.empty()) {
    // Tokens look like "<snapshot>/<offset>".
    const size_t slash = opts.continue_token.find('/');
    const auto id = parseResourceVersion(std::string_view(opts.continue_token).substr(0, slash));
    const auto at =
        slash == std::string::npos
            ? std::nullopt
            : parseResourceVersion(std::string_view(opts.continue_token).substr(slash + 1));
    if (!id || !at) {
      return invalidArgument("continue key is not valid: " + opts.continue_token);
    }
    const auto it = snapshots_.find(*id);
    if (it == snapshots_.end()) {
      return Status(StatusCode::kGone,
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                    {}, "Expired");
    }
    snapshot_id = *id;
    offset = *at;
    snapshot = it->second;
  } else {
    ASSIGN_OR_RETURN(const Selector selector, parseSelector(opts));
    for (const auto& [name, slice] : slices_) {
      if (selector.matches(slice)) {
        snapshot.items.push_back(slice);
      }
    }
    snapshot.resource_version = std::to_string(resource_version_);
  }

  ResourceSliceList list;
  list.resource_version = snapshot.resource_version;
  const size_t end = opts.limit > 0
                         ? std::min(snapshot.items.size(), offset + static_cast<size_t>(opts.limit))
                         : snapshot.items.size();
  for (size_t i = std::min(offset, end); i < end; ++i) {
    list.items.push_back(snapshot.items[i]);
  }
  if (end < snapshot.items.size()) {
    if (snapshot_id == 0) {
      snapshot_id = next_snapshot_++;
      snapshots_[snapshot_id] = snapshot;
    }
    list.continue_token = std::to_string(snapshot_id) + "/" + std::to_string(end);
    list.remaining_item_count = static_cast<int64_t>(snapshot.items.size() - end);
  } else if (snapshot_id != 0) {
    snapshots_.erase(snapshot_id);
  }
  return list;
}

Status FakeKubeApi::watchResourceSlices(const ListOptions& options,
                                        const client::WatchHandler<ResourceSlice>& handler,
                                        std::stop_token stop) {
  Request request = newRequest("watch", "resourceslices", "", "");
  request.options = options;
  RETURN_IF_ERROR(invoke(request));
  const ListOptions& opts = request.options;
  std::unique_lock lock(mu_);
  auto watcher = std::make_shared<Watcher>();
  watcher->options = opts;
  { ASSIGN_OR_RETURN(watcher->selector, parseSelector(opts)); }

  RETURN_IF_ERROR(queueFirstEvents(*watcher, history_floor_, history_, [&] {
    for (const auto& [name, slice] : slices_) {
      if (watcher->selector.matches(slice)) {
        watcher->pending.push_back({WatchEventType::kAdded, slice, {}});
      }
    }
  }));
  ++watches_started_;
  return serveWatchLocked(lock, watchers_, watcher, handler, stop, "ResourceSlices");
}

StatusOr<ResourceSlice> FakeKubeApi::createResourceSlice(const ResourceSlice& slice) {
  Request request = newRequest("create", "resourceslices", "", slice.metadata.name);
  request.slice = slice;
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  return createSliceLocked(std::move(*request.slice));
}

StatusOr<ResourceSlice> FakeKubeApi::dryRunCreateResourceSlice(const ResourceSlice& slice) {
  Request request = newRequest("create", "resourceslices", "", slice.metadata.name);
  request.slice = slice;
  request.dry_run = true;
  RETURN_IF_ERROR(invoke(request));
  ResourceSlice answer = std::move(*request.slice);
  if (answer.metadata.name.empty()) {
    if (answer.metadata.generate_name.empty()) {
      return invalidError(kSlices, "", "metadata.name",
                          "Required value: name or generateName is required");
    }
    answer.metadata.name =
        answer.metadata.generate_name.substr(0, kMaxGenerateNamePrefix) + "dryrn";
  }
  std::lock_guard lock(mu_);
  if (slices_.contains(answer.metadata.name))
    return alreadyExistsError(kSlices, answer.metadata.name);
  answer.metadata.generation = 1;
  answer.metadata.creation_timestamp = formatTime(clock_.systemNow());
  return answer;
}

StatusOr<ResourceSlice> FakeKubeApi::updateResourceSlice(const ResourceSlice& slice) {
  Request request = newRequest("update", "resourceslices", "", slice.metadata.name);
  request.slice = slice;
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  return updateSliceLocked(std::move(*request.slice), /*require_resource_version=*/true);
}

Status FakeKubeApi::deleteResourceSlice(const std::string& name,
                                        const Preconditions& preconditions) {
  Request request = newRequest("delete", "resourceslices", "", name);
  request.preconditions = preconditions;
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  return deleteSliceLocked(request.name, request.preconditions);
}

Status FakeKubeApi::deleteResourceSlices(const ListOptions& options) {
  Request request = newRequest("deletecollection", "resourceslices", "", "");
  request.options = options;
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(const Selector selector, parseSelector(request.options));
  std::vector<std::string> names;
  for (const auto& [name, slice] : slices_) {
    if (selector.matches(slice)) {
      names.push_back(name);
    }
  }
  for (const auto& name : names) {
    RETURN_IF_ERROR(deleteSliceLocked(name, {}));
  }
  return okStatus();
}

// ---- Leases, Nodes, reviews, Events -----------------------------------------

template <typename T>
Status FakeKubeApi::invokeWrite(std::string verb, NamespacedObjects<T>& store, T& object) {
  Request request = newRequest(std::move(verb), std::string(store.resource),
                               object.metadata.namespace_, object.metadata.name);
  if (store.request_object != nullptr) request.*store.request_object = object;
  RETURN_IF_ERROR(invoke(request));
  if (store.request_object != nullptr) object = std::move(*(request.*store.request_object));
  return okStatus();
}

template <typename T>
StatusOr<T> FakeKubeApi::getNamespaced(NamespacedObjects<T>& store, const std::string& ns,
                                       const std::string& name) {
  Request request = newRequest("get", std::string(store.resource), ns, name);
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  return findStored(store.objects, {request.namespace_, request.name}, store.kind, request.name);
}

template <typename T>
StatusOr<T> FakeKubeApi::createNamespaced(NamespacedObjects<T>& store, T created) {
  RETURN_IF_ERROR(invokeWrite("create", store, created));
  std::lock_guard lock(mu_);
  const std::string_view kind = store.kind;
  if (created.metadata.name.empty()) {
    return invalidError(kind, "", "metadata.name", "Required value: name is required");
  }
  if (created.metadata.namespace_.empty()) {
    return invalidError(kind, created.metadata.name, "metadata.namespace",
                        "Required value: namespace is required");
  }
  const auto key = std::make_pair(created.metadata.namespace_, created.metadata.name);
  if (store.objects.contains(key)) {
    return alreadyExistsError(kind, created.metadata.name);
  }
  if (!created.metadata.resource_version.empty()) {
    return internalError("resourceVersion should not be set on objects to be created");
  }
  created.metadata.uid = newUidLocked();
  created.metadata.creation_timestamp = formatTime(clock_.systemNow());
  created.metadata.resource_version = nextResourceVersionLocked();
  store.objects[key] = created;
  return created;
}

template <typename T>
StatusOr<T> FakeKubeApi::updateNamespaced(NamespacedObjects<T>& store, T updated) {
  RETURN_IF_ERROR(invokeWrite("update", store, updated));
  std::lock_guard lock(mu_);
  const std::string_view kind = store.kind;
  const auto it = store.objects.find({updated.metadata.namespace_, updated.metadata.name});
  if (it == store.objects.end()) {
    return notFoundError(kind, updated.metadata.name);
  }
  if (updated.metadata.resource_version.empty()) {
    return invalidError(kind, updated.metadata.name, "metadata.resourceVersion",
                        "Invalid value: must be specified for an update");
  }
  if (updated.metadata.resource_version != it->second.metadata.resource_version) {
    return staleError(kind, updated.metadata.name);
  }
  updated.metadata.uid = it->second.metadata.uid;
  updated.metadata.creation_timestamp = it->second.metadata.creation_timestamp;
  if (updated == it->second) {
    return it->second;
  }
  updated.metadata.resource_version = nextResourceVersionLocked();
  it->second = updated;
  return updated;
}

StatusOr<Lease> FakeKubeApi::getLease(const std::string& ns, const std::string& name) {
  return getNamespaced(leases_, ns, name);
}

StatusOr<Lease> FakeKubeApi::createLease(const Lease& lease) {
  return createNamespaced(leases_, lease);
}

StatusOr<Lease> FakeKubeApi::updateLease(const Lease& lease) {
  return updateNamespaced(leases_, lease);
}

StatusOr<Secret> FakeKubeApi::getSecret(const std::string& ns, const std::string& name) {
  return getNamespaced(secrets_, ns, name);
}

StatusOr<Secret> FakeKubeApi::createSecret(const Secret& secret) {
  return createNamespaced(secrets_, secret);
}

StatusOr<Secret> FakeKubeApi::updateSecret(const Secret& secret) {
  return updateNamespaced(secrets_, secret);
}

StatusOr<ConfigMap> FakeKubeApi::getConfigMap(const std::string& ns, const std::string& name) {
  return getNamespaced(config_maps_, ns, name);
}

StatusOr<ConfigMap> FakeKubeApi::createConfigMap(const ConfigMap& config_map) {
  return createNamespaced(config_maps_, config_map);
}

StatusOr<ConfigMap> FakeKubeApi::updateConfigMap(const ConfigMap& config_map) {
  return updateNamespaced(config_maps_, config_map);
}

void FakeKubeApi::setServerVersion(client::ServerVersion version) {
  std::lock_guard lock(mu_);
  server_version_ = std::move(version);
}

StatusOr<client::ServerVersion> FakeKubeApi::getServerVersion() {
  Request request = newRequest("get", "version", "", "");
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  return server_version_;
}

StatusOr<Node> FakeKubeApi::getNode(const std::string& name) {
  Request request = newRequest("get", "nodes", "", name);
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  return findStored(nodes_, request.name, "nodes", request.name);
}

StatusOr<client::PartialObjectMetadataList> FakeKubeApi::listNodeMetadata(
    const ListOptions& options) {
  Request request = newRequest("list", "nodes", "", "");
  request.options = options;
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  client::PartialObjectMetadataList list;
  list.resource_version = std::to_string(resource_version_);
  for (const auto& [name, node] : nodes_) {
    list.items.push_back({node.metadata, nullptr});
  }
  return list;
}

Status FakeKubeApi::watchNodeMetadata(
    const ListOptions& options, const client::WatchHandler<client::PartialObjectMetadata>& handler,
    std::stop_token stop) {
  Request request = newRequest("watch", "nodes", "", "");
  request.options = options;
  RETURN_IF_ERROR(invoke(request));
  const ListOptions& opts = request.options;
  std::unique_lock lock(mu_);
  auto watcher = std::make_shared<NodeWatcher>();
  watcher->options = opts;

  RETURN_IF_ERROR(queueFirstEvents(*watcher, node_history_floor_, node_history_, [&] {
    for (const auto& [name, node] : nodes_) {
      watcher->pending.push_back({WatchEventType::kAdded, {node.metadata, nullptr}, {}});
    }
  }));
  ++node_watches_started_;
  return serveWatchLocked(lock, node_watchers_, watcher, handler, stop, "Node metadata");
}

// ---- Services, EndpointSlices and Pods ----------------------------------------------

template <typename T>
StatusOr<client::ObjectList<T>> FakeKubeApi::listWatched(WatchedObjects<T>& store,
                                                         const ListOptions& options) {
  Request request = newRequest("list", std::string(store.resource), options.namespace_, "");
  request.options = options;
  RETURN_IF_ERROR(invoke(request));
  ObjectWatcher<T> filter;
  filter.options = request.options;
  ASSIGN_OR_RETURN(filter.selector, parseLabelSelector(store.what, request.options));
  std::lock_guard lock(mu_);
  client::ObjectList<T> list;
  list.resource_version = std::to_string(resource_version_);
  for (const auto& [key, object] : store.objects) {
    if (filter.selects(object)) {
      list.items.push_back(object);
    }
  }
  return list;
}

template <typename T>
Status FakeKubeApi::watchWatched(WatchedObjects<T>& store, const ListOptions& options,
                                 const client::WatchHandler<T>& handler, std::stop_token stop) {
  Request request = newRequest("watch", std::string(store.resource), options.namespace_, "");
  request.options = options;
  RETURN_IF_ERROR(invoke(request));
  auto watcher = std::make_shared<ObjectWatcher<T>>();
  watcher->options = request.options;
  ASSIGN_OR_RETURN(watcher->selector, parseLabelSelector(store.what, request.options));
  std::unique_lock lock(mu_);
  RETURN_IF_ERROR(queueFirstEvents(*watcher, store.history_floor, store.history, [&] {
    for (const auto& [key, object] : store.objects) {
      if (watcher->selects(object)) {
        watcher->pending.push_back({WatchEventType::kAdded, object, {}});
      }
    }
  }));
  ++store.watches_started;
  return serveWatchLocked(lock, store.watchers, watcher, handler, stop, store.what);
}

template <typename T>
StatusOr<T> FakeKubeApi::putWatched(WatchedObjects<T>& store, T object) {
  if (object.metadata.namespace_.empty() || object.metadata.name.empty()) {
    return invalidArgument("put " + std::string(store.what) + ": namespace and name are required");
  }
  std::lock_guard lock(mu_);
  const std::pair key(object.metadata.namespace_, object.metadata.name);
  const auto it = store.objects.find(key);
  if (it == store.objects.end()) {
    object.metadata.uid = newUidLocked();
    object.metadata.creation_timestamp = formatTime(clock_.systemNow());
    object.metadata.resource_version = nextResourceVersionLocked();
    store.objects.emplace(key, object);
    publishLocked(store.history, store.history_floor, store.watchers, WatchEventType::kAdded,
                  nullptr, object);
    return object;
  }
  T& stored = it->second;
  object.metadata.uid = stored.metadata.uid;
  object.metadata.creation_timestamp = stored.metadata.creation_timestamp;
  object.metadata.resource_version = stored.metadata.resource_version;
  if (object == stored) {
    return stored;  // no change: no new resourceVersion, no event
  }
  object.metadata.resource_version = nextResourceVersionLocked();
  T old = std::exchange(stored, object);
  publishLocked(store.history, store.history_floor, store.watchers, WatchEventType::kModified, &old,
                object);
  return object;
}

template <typename T>
Status FakeKubeApi::removeWatched(WatchedObjects<T>& store, const std::string& ns,
                                  const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = store.objects.find({ns, name});
  if (it == store.objects.end()) {
    return notFoundError(store.resource, ns + "/" + name);
  }
  T last = std::move(it->second);
  store.objects.erase(it);
  last.metadata.resource_version = nextResourceVersionLocked();
  publishLocked(store.history, store.history_floor, store.watchers, WatchEventType::kDeleted,
                nullptr, last);
  return okStatus();
}

StatusOr<client::ServiceList> FakeKubeApi::listServices(const ListOptions& options) {
  return listWatched(services_, options);
}

Status FakeKubeApi::watchServices(const ListOptions& options,
                                  const client::WatchHandler<client::Service>& handler,
                                  std::stop_token stop) {
  return watchWatched(services_, options, handler, std::move(stop));
}

StatusOr<client::EndpointSliceList> FakeKubeApi::listEndpointSlices(const ListOptions& options) {
  return listWatched(endpoint_slices_, options);
}

Status FakeKubeApi::watchEndpointSlices(const ListOptions& options,
                                        const client::WatchHandler<client::EndpointSlice>& handler,
                                        std::stop_token stop) {
  return watchWatched(endpoint_slices_, options, handler, std::move(stop));
}

StatusOr<client::Service> FakeKubeApi::putService(client::Service service) {
  return putWatched(services_, std::move(service));
}

Status FakeKubeApi::removeService(const std::string& ns, const std::string& name) {
  return removeWatched(services_, ns, name);
}

StatusOr<client::EndpointSlice> FakeKubeApi::putEndpointSlice(client::EndpointSlice slice) {
  return putWatched(endpoint_slices_, std::move(slice));
}

Status FakeKubeApi::removeEndpointSlice(const std::string& ns, const std::string& name) {
  return removeWatched(endpoint_slices_, ns, name);
}

StatusOr<client::PodList> FakeKubeApi::listPods(const ListOptions& options) {
  return listWatched(pods_, options);
}

Status FakeKubeApi::watchPods(const ListOptions& options,
                              const client::WatchHandler<client::Pod>& handler,
                              std::stop_token stop) {
  return watchWatched(pods_, options, handler, std::move(stop));
}

StatusOr<client::Pod> FakeKubeApi::putPod(client::Pod pod) {
  return putWatched(pods_, std::move(pod));
}

Status FakeKubeApi::removePod(const std::string& ns, const std::string& name) {
  return removeWatched(pods_, ns, name);
}

template <typename T>
StatusOr<T> FakeKubeApi::answerReview(std::string resource,
                                      std::function<T(const T&)> FakeKubeApi::*reviewer,
                                      const T& review, std::type_identity_t<void (*)(T&)> refuse) {
  Request request = newRequest("create", std::move(resource), "", "");
  RETURN_IF_ERROR(invoke(request));
  std::function<T(const T&)> answer_with;
  {
    std::lock_guard lock(mu_);
    answer_with = this->*reviewer;
  }
  if (answer_with) {
    return answer_with(review);
  }
  T answer = review;
  refuse(answer);
  return answer;
}

StatusOr<client::TokenReview> FakeKubeApi::createTokenReview(const client::TokenReview& review) {
  return answerReview("tokenreviews", &FakeKubeApi::token_reviewer_, review,
                      [](client::TokenReview& answer) {
                        answer.authenticated = false;
                        answer.error = "fake: no token reviewer set";
                      });
}

StatusOr<client::SubjectAccessReview> FakeKubeApi::createSubjectAccessReview(
    const client::SubjectAccessReview& review) {
  return answerReview("subjectaccessreviews", &FakeKubeApi::access_reviewer_, review,
                      [](client::SubjectAccessReview& answer) {
                        answer.allowed = false;
                        answer.reason = "fake: no access reviewer set";
                      });
}

StatusOr<client::Event> FakeKubeApi::createEvent(const client::Event& event) {
  client::Event stored = event;
  if (stored.metadata.namespace_.empty()) stored.metadata.namespace_ = event.regarding.namespace_;
  if (stored.metadata.namespace_.empty()) stored.metadata.namespace_ = "default";
  Request request = newRequest("create", "events", stored.metadata.namespace_, event.metadata.name);
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  if (stored.metadata.name.empty()) {
    stored.metadata.name =
        stored.metadata.generate_name + generateSuffixLocked(kGenerateNameSuffix);
  }
  for (const client::Event& e : events_) {
    if (e.metadata.namespace_ == stored.metadata.namespace_ &&
        e.metadata.name == stored.metadata.name) {
      return alreadyExistsError("events.events.k8s.io", stored.metadata.name);
    }
  }
  stored.metadata.uid = newUidLocked();
  stored.metadata.resource_version = nextResourceVersionLocked();
  events_.push_back(stored);
  return stored;
}

StatusOr<client::Event> FakeKubeApi::patchEventSeries(const std::string& ns,
                                                      const std::string& name,
                                                      const client::EventSeries& series) {
  Request request = newRequest("patch", "events", ns, name);
  RETURN_IF_ERROR(invoke(request));
  std::lock_guard lock(mu_);
  for (client::Event& e : events_) {
    if (e.metadata.namespace_ != ns || e.metadata.name != name) continue;
    e.series = series;
    e.metadata.resource_version = nextResourceVersionLocked();
    return e;
  }
  return notFoundError("events.events.k8s.io", name);
}

// ---- test controls ----------------------------------------------------------

void FakeKubeApi::prependReactor(std::string verb, std::string resource, Reactor reactor) {
  std::lock_guard lock(mu_);
  reactors_.insert(reactors_.begin(),
                   RegisteredReactor{std::move(verb), std::move(resource), std::move(reactor)});
}

void FakeKubeApi::clearReactors() {
  std::lock_guard lock(mu_);
  reactors_.clear();
}

std::vector<FakeKubeApi::Action> FakeKubeApi::actions() const {
  std::lock_guard lock(mu_);
  return actions_;
}

void FakeKubeApi::clearActions() {
  std::lock_guard lock(mu_);
  actions_.clear();
}

size_t FakeKubeApi::countActions(std::string_view verb, std::string_view resource) const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(actions_.begin(), actions_.end(), [&](const Action& a) {
    return a.verb == verb && a.resource == resource;
  }));
}

size_t FakeKubeApi::countWrites(std::string_view resource) const {
  std::lock_guard lock(mu_);
  return static_cast<size_t>(std::count_if(actions_.begin(), actions_.end(), [&](const Action& a) {
    return a.resource == resource && !a.dry_run &&
           (a.verb == "create" || a.verb == "update" || a.verb == "delete" ||
            a.verb == "deletecollection");
  }));
}

StatusOr<ResourceSlice> FakeKubeApi::addResourceSlice(const ResourceSlice& slice) {
  std::lock_guard lock(mu_);
  return createSliceLocked(slice);
}

StatusOr<ResourceSlice> FakeKubeApi::editResourceSlice(
    const std::string& name, const std::function<void(ResourceSlice&)>& edit) {
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(ResourceSlice edited, findStored(slices_, name, kSlices, name));
  edit(edited);
  return updateSliceLocked(std::move(edited), /*require_resource_version=*/false);
}

Status FakeKubeApi::removeResourceSlice(const std::string& name) {
  std::lock_guard lock(mu_);
  return deleteSliceLocked(name, {});
}

std::vector<ResourceSlice> FakeKubeApi::resourceSlices() const {
  std::lock_guard lock(mu_);
  std::vector<ResourceSlice> all;
  for (const auto& [name, slice] : slices_) {
    all.push_back(slice);
  }
  return all;
}

std::optional<ResourceSlice> FakeKubeApi::resourceSlice(const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto it = slices_.find(name);
  if (it == slices_.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::optional<Lease> FakeKubeApi::lease(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto it = leases_.objects.find({ns, name});
  if (it == leases_.objects.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::vector<client::Event> FakeKubeApi::events() const {
  std::lock_guard lock(mu_);
  return events_;
}

std::string FakeKubeApi::resourceVersion() const {
  std::lock_guard lock(mu_);
  return std::to_string(resource_version_);
}

void FakeKubeApi::notifyLocked() {
  reportBlockedLocked();
  cv_.notify_all();
}

void FakeKubeApi::reportBlockedLocked() {
  if (options_.blocked == nullptr) return;
  size_t blocked = 0;
  forEachWatcherLocked([&](const auto& watcher) {
    blocked += watcher.waiting && !watcher.closed && watcher.pending.empty();
  });
  options_.blocked->set(this, blocked);
}

template <typename F>
void FakeKubeApi::forEachWatcherLocked(F f) const {
  for (const auto& watcher : watchers_) {
    f(*watcher);
  }
  for (const auto& watcher : node_watchers_) {
    f(*watcher);
  }
  for (const auto& watcher : services_.watchers) {
    f(*watcher);
  }
  for (const auto& watcher : endpoint_slices_.watchers) {
    f(*watcher);
  }
  for (const auto& watcher : pods_.watchers) {
    f(*watcher);
  }
}

void FakeKubeApi::resetWatches() {
  std::lock_guard lock(mu_);
  forEachWatcherLocked([](auto& watcher) { watcher.closed = true; });
  notifyLocked();
}

void FakeKubeApi::sendWatchError(const Status& error) {
  std::lock_guard lock(mu_);
  forEachWatcherLocked([&](auto& watcher) {
    typename decltype(watcher.pending)::value_type event;
    event.type = WatchEventType::kError;
    event.error = error;
    watcher.pending.push_back(std::move(event));
  });
  notifyLocked();
}

void FakeKubeApi::sendBookmark() {
  std::lock_guard lock(mu_);
  forEachWatcherLocked([&](auto& watcher) {
    if (!watcher.options.allow_watch_bookmarks) {
      return;
    }
    typename decltype(watcher.pending)::value_type event;
    event.type = WatchEventType::kBookmark;
    event.object.metadata.resource_version = std::to_string(resource_version_);
    watcher.pending.push_back(std::move(event));
  });
  notifyLocked();
}

void FakeKubeApi::compact() {
  std::lock_guard lock(mu_);
  history_.clear();
  history_floor_ = resource_version_;
  node_history_.clear();
  node_history_floor_ = resource_version_;
  services_.history.clear();
  services_.history_floor = resource_version_;
  endpoint_slices_.history.clear();
  endpoint_slices_.history_floor = resource_version_;
  pods_.history.clear();
  pods_.history_floor = resource_version_;
  snapshots_.clear();
}

size_t FakeKubeApi::activeWatchesLocked(std::string_view resource) const {
  if (resource == services_.resource) return services_.watchers.size();
  if (resource == endpoint_slices_.resource) return endpoint_slices_.watchers.size();
  if (resource == pods_.resource) return pods_.watchers.size();
  return resource == "nodes" ? node_watchers_.size() : watchers_.size();
}

size_t FakeKubeApi::watchesStartedLocked(std::string_view resource) const {
  if (resource == services_.resource) return services_.watches_started;
  if (resource == endpoint_slices_.resource) return endpoint_slices_.watches_started;
  if (resource == pods_.resource) return pods_.watches_started;
  return resource == "nodes" ? node_watches_started_ : watches_started_;
}

size_t FakeKubeApi::activeWatches(std::string_view resource) const {
  std::lock_guard lock(mu_);
  return activeWatchesLocked(resource);
}

size_t FakeKubeApi::watchesStarted(std::string_view resource) const {
  std::lock_guard lock(mu_);
  return watchesStartedLocked(resource);
}

bool FakeKubeApi::waitForActiveWatches(size_t n, std::string_view resource,
                                       std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return activeWatchesLocked(resource) == n; });
}

bool FakeKubeApi::waitForWatchesStarted(size_t n, std::string_view resource,
                                        std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return watchesStartedLocked(resource) >= n; });
}

bool FakeKubeApi::waitForWatchesDelivered(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    bool idle = true;
    forEachWatcherLocked([&](const auto& watcher) {
      idle = idle && (watcher.closed || (watcher.pending.empty() && !watcher.delivering));
    });
    return idle;
  });
}

Node FakeKubeApi::addNode(const std::string& name) {
  std::lock_guard lock(mu_);
  Node node;
  node.metadata.name = name;
  node.metadata.uid = newUidLocked();
  node.metadata.creation_timestamp = formatTime(clock_.systemNow());
  node.metadata.resource_version = nextResourceVersionLocked();
  nodes_[name] = node;
  publishNodeLocked(WatchEventType::kAdded, node);
  return node;
}

StatusOr<Node> FakeKubeApi::editNode(const std::string& name,
                                     const std::function<void(Node&)>& edit) {
  std::lock_guard lock(mu_);
  const auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return notFoundError("nodes", name);
  }
  Node edited = it->second;
  edit(edited);
  edited.metadata.name = name;
  edited.metadata.uid = it->second.metadata.uid;
  edited.metadata.resource_version = nextResourceVersionLocked();
  it->second = edited;
  publishNodeLocked(WatchEventType::kModified, edited);
  return edited;
}

void FakeKubeApi::removeNode(const std::string& name) {
  std::lock_guard lock(mu_);
  const auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return;
  }
  Node last = std::move(it->second);
  nodes_.erase(it);
  last.metadata.resource_version = nextResourceVersionLocked();
  publishNodeLocked(WatchEventType::kDeleted, last);
}

void FakeKubeApi::setTokenReviewer(
    std::function<client::TokenReview(const client::TokenReview&)> reviewer) {
  std::lock_guard lock(mu_);
  token_reviewer_ = std::move(reviewer);
}

void FakeKubeApi::setAccessReviewer(
    std::function<client::SubjectAccessReview(const client::SubjectAccessReview&)> reviewer) {
  std::lock_guard lock(mu_);
  access_reviewer_ = std::move(reviewer);
}

}  // namespace rsc::testing
