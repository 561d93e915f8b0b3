#include "client/objects.h"

#include <limits>
#include <string>
#include <string_view>
#include <utility>

namespace rsc::client {
namespace {

constexpr std::string_view kLeaseApiVersion = "coordination.k8s.io/v1";
constexpr std::string_view kTokenReviewApiVersion = "authentication.k8s.io/v1";
constexpr std::string_view kSubjectAccessReviewApiVersion = "authorization.k8s.io/v1";
constexpr std::string_view kEventApiVersion = "events.k8s.io/v1";

// Encoding follows the API's Go types: a field tagged omitempty is left out
// when empty or unset.
void putIfNotEmpty(Json& j, const char* key, const std::string& value) {
  if (!value.empty()) {
    j[key] = value;
  }
}
void putIfNotEmpty(Json& j, const char* key, const std::vector<std::string>& value) {
  if (!value.empty()) {
    j[key] = value;
  }
}
void putIfNotEmpty(Json& j, const char* key, const std::map<std::string, std::string>& value) {
  if (!value.empty()) {
    j[key] = value;
  }
}
template <typename T>
void putIfSet(Json& j, const char* key, const std::optional<T>& value) {
  if (value.has_value()) {
    j[key] = *value;
  }
}

Status expectTopLevelObject(const Json& j, std::string_view kind) {
  if (j.is_object()) {
    return okStatus();
  }
  return invalidArgument(std::string(kind) + ": must be a JSON object");
}

Status decodeOwnerReference(const Json& j, const FieldPath& at, OwnerReference* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "apiVersion") {
      RETURN_IF_ERROR(readString(value, f, &out->api_version));
    } else if (key == "kind") {
      RETURN_IF_ERROR(readString(value, f, &out->kind));
    } else if (key == "name") {
      RETURN_IF_ERROR(readString(value, f, &out->name));
    } else if (key == "uid") {
      RETURN_IF_ERROR(readString(value, f, &out->uid));
    } else if (key == "controller") {
      RETURN_IF_ERROR(readOptional(value, f, &out->controller, readBool));
    } else if (key == "blockOwnerDeletion") {
      RETURN_IF_ERROR(readOptional(value, f, &out->block_owner_deletion, readBool));
    }
  }
  return okStatus();
}

Json ownerReferenceToJson(const OwnerReference& ref) {
  Json j = {
      {"apiVersion", ref.api_version}, {"kind", ref.kind}, {"name", ref.name}, {"uid", ref.uid}};
  putIfSet(j, "controller", ref.controller);
  putIfSet(j, "blockOwnerDeletion", ref.block_owner_deletion);
  return j;
}

Status decodeObjectMeta(const Json& j, const FieldPath& at, ObjectMeta* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "name") {
      RETURN_IF_ERROR(readString(value, f, &out->name));
    } else if (key == "generateName") {
      RETURN_IF_ERROR(readString(value, f, &out->generate_name));
    } else if (key == "namespace") {
      RETURN_IF_ERROR(readString(value, f, &out->namespace_));
    } else if (key == "uid") {
      RETURN_IF_ERROR(readString(value, f, &out->uid));
    } else if (key == "resourceVersion") {
      RETURN_IF_ERROR(readString(value, f, &out->resource_version));
    } else if (key == "generation") {
      RETURN_IF_ERROR(readInt64(value, f, &out->generation));
    } else if (key == "creationTimestamp") {
      RETURN_IF_ERROR(readString(value, f, &out->creation_timestamp));
    } else if (key == "deletionTimestamp") {
      RETURN_IF_ERROR(readOptional(value, f, &out->deletion_timestamp, readString));
    } else if (key == "labels") {
      RETURN_IF_ERROR(readStringMap(value, f, &out->labels));
    } else if (key == "annotations") {
      RETURN_IF_ERROR(readStringMap(value, f, &out->annotations));
    } else if (key == "ownerReferences") {
      if (value.is_null()) {
        continue;
      }
      if (!value.is_array()) {
        return fieldError(f, "must be a list");
      }
      out->owner_references.resize(value.size());
      for (size_t i = 0; i < value.size(); ++i) {
        RETURN_IF_ERROR(decodeOwnerReference(value[i], f.index(i), &out->owner_references[i]));
      }
    } else if (key == "finalizers") {
      RETURN_IF_ERROR(readStringList(value, f, &out->finalizers));
    } else {
      out->unknown[key] = value;
    }
  }
  return okStatus();
}

Status decodeLeaseSpec(const Json& j, const FieldPath& at, LeaseSpec* out) {
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "holderIdentity") {
      RETURN_IF_ERROR(readOptional(value, f, &out->holder_identity, readString));
    } else if (key == "leaseDurationSeconds") {
      RETURN_IF_ERROR(readOptional(value, f, &out->lease_duration_seconds, readInt32));
    } else if (key == "acquireTime") {
      RETURN_IF_ERROR(readOptional(value, f, &out->acquire_time, readString));
    } else if (key == "renewTime") {
      RETURN_IF_ERROR(readOptional(value, f, &out->renew_time, readString));
    } else if (key == "leaseTransitions") {
      RETURN_IF_ERROR(readOptional(value, f, &out->lease_transitions, readInt32));
    } else {
      out->unknown[key] = value;
    }
  }
  return okStatus();
}

Status decodeStringListMap(const Json& j, const FieldPath& at,
                           std::map<std::string, std::vector<std::string>>* out) {
  if (j.is_null()) {
    return okStatus();
  }
  if (!j.is_object()) {
    return fieldError(at, "must be an object");
  }
  for (const auto& [key, value] : j.items()) {
    RETURN_IF_ERROR(readStringList(value, at.key(key), &(*out)[key]));
  }
  return okStatus();
}

Status decodeUserInfo(const Json& j, const FieldPath& at, UserInfo* out) {
  if (j.is_null()) {
    return okStatus();
  }
  RETURN_IF_ERROR(expectObject(j, at));
  for (const auto& [key, value] : j.items()) {
    FieldPath f = at.field(key);
    if (key == "username") {
      RETURN_IF_ERROR(readString(value, f, &out->username));
    } else if (key == "uid") {
      RETURN_IF_ERROR(readString(value, f, &out->uid));
    } else if (key == "groups") {
      RETURN_IF_ERROR(readStringList(value, f, &out->groups));
    } else if (key == "extra") {
      RETURN_IF_ERROR(decodeStringListMap(value, f, &out->extra));
    }
  }
  return okStatus();
}

Json userInfoToJson(const UserInfo& user) {
  Json j = Json::object();
  putIfNotEmpty(j, "username", user.username);
  putIfNotEmpty(j, "uid", user.uid);
  putIfNotEmpty(j, "groups", user.groups);
  if (!user.extra.empty()) {
    j["extra"] = user.extra;
  }
  return j;
}

bool isEmpty(const UserInfo& user) {
  return user.username.empty() && user.uid.empty() && user.groups.empty() && user.extra.empty();
}

Json objectReferenceToJson(const ObjectReference& ref) {
  Json j = Json::object();
  putIfNotEmpty(j, "apiVersion", ref.api_version);
  putIfNotEmpty(j, "kind", ref.kind);
  putIfNotEmpty(j, "namespace", ref.namespace_);
  putIfNotEmpty(j, "name", ref.name);
  putIfNotEmpty(j, "uid", ref.uid);
  return j;
}

}  // namespace

// ---- Decoding building blocks ----------------------------------------------

void FieldPath::appendTo(std::string& out) const {
  if (parent_ != nullptr) {
    parent_->appendTo(out);
  }
  switch (kind_) {
    case Kind::kRoot:
      out.append(text_);
      break;
    case Kind::kField:
      if (!out.empty()) {
        out.push_back('.');
      }
      out.append(text_);
      break;
    case Kind::kIndex:
      out.push_back('[');
      out.append(std::to_string(index_));
      out.push_back(']');
      break;
    case Kind::kKey:
      out.append("[\"");
      for (char c : text_) {
        if (c == '"' || c == '\\') {
          out.push_back('\\');
        }
        out.push_back(c);
      }
      out.append("\"]");
      break;
  }
}

std::string FieldPath::toString() const {
  std::string out;
  appendTo(out);
  return out;
}

Status fieldError(const FieldPath& at, std::string_view message) {
  std::string path = at.toString();
  std::string text = path.empty() ? std::string(message) : path + ": " + std::string(message);
  return Status(StatusCode::kInvalidArgument, std::move(text),
                {FieldError{std::move(path), std::string(message)}});
}

Status readString(const Json& v, const FieldPath& at, std::string* out) {
  if (v.is_null()) {
    return okStatus();
  }
  if (!v.is_string()) {
    return fieldError(at, "must be a string");
  }
  *out = v.get_ref<const std::string&>();
  return okStatus();
}

Status readBool(const Json& v, const FieldPath& at, bool* out) {
  if (v.is_null()) {
    return okStatus();
  }
  if (!v.is_boolean()) {
    return fieldError(at, "must be a boolean");
  }
  *out = v.get<bool>();
  return okStatus();
}

Status readInt64(const Json& v, const FieldPath& at, int64_t* out) {
  if (v.is_null()) {
    return okStatus();
  }
  if (v.is_number_unsigned()) {
    auto value = v.get<uint64_t>();
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return fieldError(at, "out of range for a 64-bit integer");
    }
    *out = static_cast<int64_t>(value);
    return okStatus();
  }
  if (!v.is_number_integer()) {
    return fieldError(at, "must be an integer");
  }
  *out = v.get<int64_t>();
  return okStatus();
}

Status readInt32(const Json& v, const FieldPath& at, int32_t* out) {
  if (v.is_null()) {
    return okStatus();
  }
  int64_t value = 0;
  RETURN_IF_ERROR(readInt64(v, at, &value));
  if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max()) {
    return fieldError(at, "out of range for a 32-bit integer");
  }
  *out = static_cast<int32_t>(value);
  return okStatus();
}

Status readStringList(const Json& v, const FieldPath& at, std::vector<std::string>* out) {
  if (v.is_null()) {
    return okStatus();
  }
  if (!v.is_array()) {
    return fieldError(at, "must be a list of strings");
  }
  out->clear();
  out->reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& item = v[i];
    if (!item.is_string()) {
      return fieldError(at.index(i), "must be a string");
    }
    out->push_back(item.get_ref<const std::string&>());
  }
  return okStatus();
}

Status readStringMap(const Json& v, const FieldPath& at, std::map<std::string, std::string>* out) {
  if (v.is_null()) {
    return okStatus();
  }
  if (!v.is_object()) {
    return fieldError(at, "must be an object");
  }
  out->clear();
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string()) {
      return fieldError(at.key(key), "must be a string");
    }
    out->emplace_hint(out->end(), key, value.get_ref<const std::string&>());
  }
  return okStatus();
}

Status expectObject(const Json& v, const FieldPath& at) {
  if (v.is_object()) {
    return okStatus();
  }
  return fieldError(at, "must be an object");
}

Status checkTypeMeta(const Json& j, std::string_view api_version, std::string_view kind) {
  std::string value;
  if (auto it = j.find("apiVersion"); it != j.end()) {
    FieldPath at("apiVersion");
    RETURN_IF_ERROR(readString(*it, at, &value));
    if (!value.empty() && value != api_version) {
      return fieldError(at, "must be " + std::string(api_version) + ", not " + value);
    }
  }
  value.clear();
  if (auto it = j.find("kind"); it != j.end()) {
    FieldPath at("kind");
    RETURN_IF_ERROR(readString(*it, at, &value));
    if (!value.empty() && value != kind) {
      return fieldError(at, "must be " + std::string(kind) + ", not " + value);
    }
  }
  return okStatus();
}

// ---- ObjectMeta -------------------------------------------------------------

Json toJson(const ObjectMeta& meta) {
  Json j = meta.unknown.is_object() ? meta.unknown : Json::object();
  putIfNotEmpty(j, "name", meta.name);
  putIfNotEmpty(j, "generateName", meta.generate_name);
  putIfNotEmpty(j, "namespace", meta.namespace_);
  putIfNotEmpty(j, "uid", meta.uid);
  putIfNotEmpty(j, "resourceVersion", meta.resource_version);
  if (meta.generation != 0) {
    j["generation"] = meta.generation;
  }
  putIfNotEmpty(j, "creationTimestamp", meta.creation_timestamp);
  putIfSet(j, "deletionTimestamp", meta.deletion_timestamp);
  putIfNotEmpty(j, "labels", meta.labels);
  putIfNotEmpty(j, "annotations", meta.annotations);
  if (!meta.owner_references.empty()) {
    Json refs = Json::array();
    for (const OwnerReference& ref : meta.owner_references) {
      refs.push_back(ownerReferenceToJson(ref));
    }
    j["ownerReferences"] = std::move(refs);
  }
  putIfNotEmpty(j, "finalizers", meta.finalizers);
  return j;
}

StatusOr<ObjectMeta> objectMetaFromJson(const Json& j) {
  ObjectMeta meta;
  RETURN_IF_ERROR(decodeObjectMeta(j, FieldPath("metadata"), &meta));
  return meta;
}

// ---- Lease ------------------------------------------------------------------

Json toJson(const Lease& lease) {
  Json j = lease.unknown.is_object() ? lease.unknown : Json::object();
  j["apiVersion"] = kLeaseApiVersion;
  j["kind"] = "Lease";
  j["metadata"] = toJson(lease.metadata);
  Json spec = lease.spec.unknown.is_object() ? lease.spec.unknown : Json::object();
  putIfSet(spec, "holderIdentity", lease.spec.holder_identity);
  putIfSet(spec, "leaseDurationSeconds", lease.spec.lease_duration_seconds);
  putIfSet(spec, "acquireTime", lease.spec.acquire_time);
  putIfSet(spec, "renewTime", lease.spec.renew_time);
  putIfSet(spec, "leaseTransitions", lease.spec.lease_transitions);
  j["spec"] = std::move(spec);
  return j;
}

StatusOr<Lease> leaseFromJson(const Json& j) {
  RETURN_IF_ERROR(expectTopLevelObject(j, "Lease"));
  RETURN_IF_ERROR(checkTypeMeta(j, kLeaseApiVersion, "Lease"));
  Lease lease;
  for (const auto& [key, value] : j.items()) {
    if (key == "apiVersion" || key == "kind") {
      continue;
    }
    if (key == "metadata") {
      if (!value.is_null()) {
        RETURN_IF_ERROR(decodeObjectMeta(value, FieldPath("metadata"), &lease.metadata));
      }
    } else if (key == "spec") {
      if (!value.is_null()) {
        RETURN_IF_ERROR(decodeLeaseSpec(value, FieldPath("spec"), &lease.spec));
      }
    } else {
      lease.unknown[key] = value;
    }
  }
  return lease;
}

// ---- Node -------------------------------------------------------------------

StatusOr<Node> nodeFromJson(const Json& j) {
  RETURN_IF_ERROR(expectTopLevelObject(j, "Node"));
  RETURN_IF_ERROR(checkTypeMeta(j, "v1", "Node"));
  Node node;
  for (const auto& [key, value] : j.items()) {
    if (key == "metadata") {
      if (!value.is_null()) {
        RETURN_IF_ERROR(decodeObjectMeta(value, FieldPath("metadata"), &node.metadata));
      }
    } else {
      node.unknown[key] = value;
    }
  }
  return node;
}

// ---- TokenReview ------------------------------------------------------------

Json toJson(const TokenReview& review) {
  Json spec = Json::object();
  putIfNotEmpty(spec, "token", review.token);
  putIfNotEmpty(spec, "audiences", review.audiences);
  Json j = {
      {"apiVersion", kTokenReviewApiVersion}, {"kind", "TokenReview"}, {"spec", std::move(spec)}};
  // A request carries no status; an answer (as a fake server writes it) does.
  Json status = Json::object();
  if (review.authenticated) {
    status["authenticated"] = true;
  }
  if (!isEmpty(review.user)) {
    status["user"] = userInfoToJson(review.user);
  }
  putIfNotEmpty(status, "audiences", review.status_audiences);
  putIfNotEmpty(status, "error", review.error);
  if (!status.empty()) {
    j["status"] = std::move(status);
  }
  return j;
}

StatusOr<TokenReview> tokenReviewFromJson(const Json& j) {
  RETURN_IF_ERROR(expectTopLevelObject(j, "TokenReview"));
  RETURN_IF_ERROR(checkTypeMeta(j, kTokenReviewApiVersion, "TokenReview"));
  TokenReview review;
  if (auto spec = j.find("spec"); spec != j.end() && !spec->is_null()) {
    FieldPath at("spec");
    RETURN_IF_ERROR(expectObject(*spec, at));
    for (const auto& [key, value] : spec->items()) {
      if (key == "token") {
        RETURN_IF_ERROR(readString(value, at.field(key), &review.token));
      } else if (key == "audiences") {
        RETURN_IF_ERROR(readStringList(value, at.field(key), &review.audiences));
      }
    }
  }
  if (auto status = j.find("status"); status != j.end() && !status->is_null()) {
    FieldPath at("status");
    RETURN_IF_ERROR(expectObject(*status, at));
    for (const auto& [key, value] : status->items()) {
      FieldPath f = at.field(key);
      if (key == "authenticated") {
        RETURN_IF_ERROR(readBool(value, f, &review.authenticated));
      } else if (key == "user") {
        RETURN_IF_ERROR(decodeUserInfo(value, f, &review.user));
      } else if (key == "audiences") {
        RETURN_IF_ERROR(readStringList(value, f, &review.status_audiences));
      } else if (key == "error") {
        RETURN_IF_ERROR(readString(value, f, &review.error));
      }
    }
  }
  return review;
}

// ---- SubjectAccessReview ----------------------------------------------------

Json toJson(const SubjectAccessReview& review) {
  Json attributes = Json::object();
  putIfNotEmpty(attributes, "namespace", review.namespace_);
  putIfNotEmpty(attributes, "verb", review.verb);
  putIfNotEmpty(attributes, "group", review.group);
  putIfNotEmpty(attributes, "version", review.version);
  putIfNotEmpty(attributes, "resource", review.resource);
  putIfNotEmpty(attributes, "subresource", review.subresource);
  putIfNotEmpty(attributes, "name", review.name);
  Json spec = {{"resourceAttributes", std::move(attributes)}};
  putIfNotEmpty(spec, "user", review.user.username);
  putIfNotEmpty(spec, "groups", review.user.groups);
  if (!review.user.extra.empty()) {
    spec["extra"] = review.user.extra;
  }
  putIfNotEmpty(spec, "uid", review.user.uid);
  Json j = {{"apiVersion", kSubjectAccessReviewApiVersion},
            {"kind", "SubjectAccessReview"},
            {"spec", std::move(spec)}};
  // A request carries no status; an answer always says "allowed".
  if (review.allowed || review.denied || !review.reason.empty() ||
      !review.evaluation_error.empty()) {
    Json status = {{"allowed", review.allowed}};
    if (review.denied) {
      status["denied"] = true;
    }
    putIfNotEmpty(status, "reason", review.reason);
    putIfNotEmpty(status, "evaluationError", review.evaluation_error);
    j["status"] = std::move(status);
  }
  return j;
}

StatusOr<SubjectAccessReview> subjectAccessReviewFromJson(const Json& j) {
  RETURN_IF_ERROR(expectTopLevelObject(j, "SubjectAccessReview"));
  RETURN_IF_ERROR(checkTypeMeta(j, kSubjectAccessReviewApiVersion, "SubjectAccessReview"));
  SubjectAccessReview review;
  if (auto spec = j.find("spec"); spec != j.end() && !spec->is_null()) {
    FieldPath at("spec");
    RETURN_IF_ERROR(expectObject(*spec, at));
    for (const auto& [key, value] : spec->items()) {
      FieldPath f = at.field(key);
      if (key == "user") {
        RETURN_IF_ERROR(readString(value, f, &review.user.username));
      } else if (key == "groups") {
        RETURN_IF_ERROR(readStringList(value, f, &review.user.groups));
      } else if (key == "uid") {
        RETURN_IF_ERROR(readString(value, f, &review.user.uid));
      } else if (key == "extra") {
        RETURN_IF_ERROR(decodeStringListMap(value, f, &review.user.extra));
      } else if (key == "resourceAttributes" && !value.is_null()) {
        RETURN_IF_ERROR(expectObject(value, f));
        for (const auto& [attr, attr_value] : value.items()) {
          FieldPath g = f.field(attr);
          std::string* target = nullptr;
          if (attr == "namespace") {
            target = &review.namespace_;
          }
          if (attr == "verb") {
            target = &review.verb;
          }
          if (attr == "group") {
            target = &review.group;
          }
          if (attr == "version") {
            target = &review.version;
          }
          if (attr == "resource") {
            target = &review.resource;
          }
          if (attr == "subresource") {
            target = &review.subresource;
          }
          if (attr == "name") {
            target = &review.name;
          }
          if (target != nullptr) {
            RETURN_IF_ERROR(readString(attr_value, g, target));
          }
        }
      }
    }
  }
  if (auto status = j.find("status"); status != j.end() && !status->is_null()) {
    FieldPath at("status");
    RETURN_IF_ERROR(expectObject(*status, at));
    for (const auto& [key, value] : status->items()) {
      FieldPath f = at.field(key);
      if (key == "allowed") {
        RETURN_IF_ERROR(readBool(value, f, &review.allowed));
      } else if (key == "denied") {
        RETURN_IF_ERROR(readBool(value, f, &review.denied));
      } else if (key == "reason") {
        RETURN_IF_ERROR(readString(value, f, &review.reason));
      } else if (key == "evaluationError") {
        RETURN_IF_ERROR(readString(value, f, &review.evaluation_error));
      }
    }
  }
  return review;
}

// ---- Event ------------------------------------------------------------------

Json toJson(const Event& event) {
  Json j = {
      {"apiVersion", kEventApiVersion}, {"kind", "Event"}, {"metadata", toJson(event.metadata)}};
  putIfNotEmpty(j, "eventTime", event.event_time);
  putIfNotEmpty(j, "reportingController", event.reporting_controller);
  putIfNotEmpty(j, "reportingInstance", event.reporting_instance);
  putIfNotEmpty(j, "action", event.action);
  putIfNotEmpty(j, "reason", event.reason);
  putIfNotEmpty(j, "type", event.type);
  putIfNotEmpty(j, "note", event.note);
  j["regarding"] = objectReferenceToJson(event.regarding);
  return j;
}

}  // namespace rsc::client
