// Typed Kubernetes objects the controller reads and writes, other than
// ResourceSlice (resource_slice.h): object metadata, Lease, Node, TokenReview,
// SubjectAccessReview and Event, with their JSON conversions. Every struct keeps
// the fields it does not model in `unknown`, so a read-modify-write never drops
// what a newer API server added. Plain values: not synchronised.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace rsc::client {

using Json = nlohmann::json;

struct OwnerReference {
  std::string api_version;
  std::string kind;
  std::string name;
  std::string uid;
  std::optional<bool> controller;
  std::optional<bool> block_owner_deletion;
  friend bool operator==(const OwnerReference&, const OwnerReference&) = default;
};

struct ObjectMeta {
  std::string name;
  std::string generate_name;
  std::string namespace_;
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;
  std::string creation_timestamp;
  std::optional<std::string> deletion_timestamp;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  std::vector<OwnerReference> owner_references;
  std::vector<std::string> finalizers;
  Json unknown = Json::object();  // managedFields and anything newer
  friend bool operator==(const ObjectMeta&, const ObjectMeta&) = default;
};

// coordination.k8s.io/v1 Lease.
struct LeaseSpec {
  std::optional<std::string> holder_identity;
  std::optional<int32_t> lease_duration_seconds;
  std::optional<std::string> acquire_time;  // MicroTime, RFC 3339 with microseconds
  std::optional<std::string> renew_time;    // MicroTime
  std::optional<int32_t> lease_transitions;
  Json unknown = Json::object();
  friend bool operator==(const LeaseSpec&, const LeaseSpec&) = default;
};

struct Lease {
  ObjectMeta metadata;
  LeaseSpec spec;
  Json unknown = Json::object();
  friend bool operator==(const Lease&, const Lease&) = default;
};

// v1 Node: the controller needs only its identity (the UID for owner
// references); the rest is kept verbatim.
struct Node {
  ObjectMeta metadata;
  Json unknown = Json::object();
};

// authentication.k8s.io/v1 TokenReview.
struct UserInfo {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
  friend bool operator==(const UserInfo&, const UserInfo&) = default;
};

struct TokenReview {
  // spec
  std::string token;
  std::vector<std::string> audiences;
  // status
  bool authenticated = false;
  UserInfo user;
  std::vector<std::string> status_audiences;
  std::string error;
};

// authorization.k8s.io/v1 SubjectAccessReview with resource attributes.
struct SubjectAccessReview {
  // spec
  UserInfo user;
  std::string namespace_;
  std::string verb;
  std::string group;
  std::string version;
  std::string resource;
  std::string subresource;
  std::string name;
  // status
  bool allowed = false;
  bool denied = false;
  std::string reason;
  std::string evaluation_error;
};

// events.k8s.io/v1 Event about some object.
struct ObjectReference {
  std::string api_version;
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
  friend bool operator==(const ObjectReference&, const ObjectReference&) = default;
};

struct Event {
  ObjectMeta metadata;
  std::string event_time;  // MicroTime
  std::string reporting_controller;
  std::string reporting_instance;
  std::string action;
  std::string reason;
  std::string type;  // Normal or Warning
  std::string note;
  ObjectReference regarding;
};

// JSON conversions. Decoding fails with InvalidArgument naming the field
// ("metadata.labels: must be an object") and never throws.
Json toJson(const ObjectMeta& meta);
StatusOr<ObjectMeta> objectMetaFromJson(const Json& j);
Json toJson(const Lease& lease);
StatusOr<Lease> leaseFromJson(const Json& j);
StatusOr<Node> nodeFromJson(const Json& j);
Json toJson(const TokenReview& review);
StatusOr<TokenReview> tokenReviewFromJson(const Json& j);
Json toJson(const SubjectAccessReview& review);
StatusOr<SubjectAccessReview> subjectAccessReviewFromJson(const Json& j);
Json toJson(const Event& event);

// Building blocks of the decoders above and in resource_slice.h, for any code
// of this project that decodes Kubernetes-shaped JSON with field-path errors.
//
// A FieldPath names the field being decoded. Children are made on the stack
// as decoding descends and refer to their parent, so a path must not outlive
// the path it was made from; the text ("spec.devices[3].attributes[\"model\"]")
// is only built when an error is reported.
class FieldPath {
 public:
  // A root: "" for the object itself, or a prefix such as "devices[3]".
  explicit FieldPath(std::string_view root) : text_(root) {}

  FieldPath field(std::string_view name) const { return {this, Kind::kField, name, 0}; }
  FieldPath index(size_t i) const { return {this, Kind::kIndex, {}, i}; }
  FieldPath key(std::string_view map_key) const { return {this, Kind::kKey, map_key, 0}; }

  std::string toString() const;

 private:
  enum class Kind { kRoot, kField, kIndex, kKey };
  FieldPath(const FieldPath* parent, Kind kind, std::string_view text, size_t index)
      : parent_(parent), kind_(kind), text_(text), index_(index) {}
  void appendTo(std::string& out) const;

  const FieldPath* parent_ = nullptr;
  Kind kind_ = Kind::kRoot;
  std::string_view text_;
  size_t index_ = 0;
};

// InvalidArgument "<path>: <message>", with the same pair as its one detail.
Status fieldError(const FieldPath& at, std::string_view message);

// Typed reads of one JSON value. Each fails with fieldError(at, "must be a
// string") and the like. A JSON null reads as absent (OK, *out unchanged),
// as the API server's Go decoder treats it.
Status readString(const Json& v, const FieldPath& at, std::string* out);
Status readBool(const Json& v, const FieldPath& at, bool* out);
Status readInt64(const Json& v, const FieldPath& at, int64_t* out);
Status readInt32(const Json& v, const FieldPath& at, int32_t* out);
Status readStringList(const Json& v, const FieldPath& at, std::vector<std::string>* out);
Status readStringMap(const Json& v, const FieldPath& at, std::map<std::string, std::string>* out);
// OK when `v` is a JSON object (null is not).
Status expectObject(const Json& v, const FieldPath& at);
// Checks a top-level object's apiVersion and kind where present (list items
// carry neither): "apiVersion: must be resource.k8s.io/v1, not ...".
Status checkTypeMeta(const Json& j, std::string_view api_version, std::string_view kind);

// Reads an optional field with one of the readers above; null leaves it unset.
template <typename T>
Status readOptional(const Json& v, const FieldPath& at, std::optional<T>* out,
                    Status (*read)(const Json&, const FieldPath&, T*)) {
  if (v.is_null()) {
    return {};
  }
  T value{};
  Status status = read(v, at, &value);
  if (status.ok()) {
    *out = std::move(value);
  }
  return status;
}

}  // namespace rsc::client
