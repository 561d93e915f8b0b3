// Typed Kubernetes objects the controller reads and writes, other than
// ResourceSlice (resource_slice.h): object metadata, Lease, Node,
// PartialObjectMetadata, TokenReview, SubjectAccessReview, Event, Service,
// EndpointSlice and Pod (its identity alone), with their
// JSON conversions. Every struct keeps the fields it does not model in
// `unknown`, so a read-modify-write never drops what a newer API server added.
// Plain values: not synchronised.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "client/codec.h"
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
  Json unknown = nullptr;  // fields of newer API versions, written back unchanged
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
  Json unknown = nullptr;  // managedFields and anything newer; null when there is none
  friend bool operator==(const ObjectMeta&, const ObjectMeta&) = default;
};

// coordination.k8s.io/v1 Lease.
struct LeaseSpec {
  std::optional<std::string> holder_identity;
  std::optional<int32_t> lease_duration_seconds;
  std::optional<std::string> acquire_time;  // MicroTime, RFC 3339 with microseconds
  std::optional<std::string> renew_time;    // MicroTime
  std::optional<int32_t> lease_transitions;
  Json unknown = nullptr;
  friend bool operator==(const LeaseSpec&, const LeaseSpec&) = default;
};

struct Lease {
  ObjectMeta metadata;
  LeaseSpec spec;
  Json unknown = nullptr;
  friend bool operator==(const Lease&, const Lease&) = default;
};

// v1 Secret. `data` holds the decoded values (base64 on the wire).
struct Secret {
  ObjectMeta metadata;
  std::string type;
  std::map<std::string, std::string> data;
  Json unknown = nullptr;
  friend bool operator==(const Secret&, const Secret&) = default;
};

// v1 ConfigMap (string data only).
struct ConfigMap {
  ObjectMeta metadata;
  std::map<std::string, std::string> data;
  Json unknown = nullptr;
  friend bool operator==(const ConfigMap&, const ConfigMap&) = default;
};

// What GET /version answers (version.Info): the release the API server runs.
// Providers may append to the numbers ("34+"); the *Number() accessors read
// the leading digits (-1 when there are none).
struct ServerVersion {
  std::string major;
  std::string minor;
  std::string git_version;  // "v1.34.4"
  Json unknown = nullptr;

  int majorNumber() const;
  int minorNumber() const;
};

// v1 Node: the controller needs only its identity (the UID for owner
// references); the rest is kept verbatim.
struct Node {
  ObjectMeta metadata;
  Json unknown = nullptr;
};

// meta.k8s.io/v1 PartialObjectMetadata: an object's metadata alone, which the
// API server sends instead of the whole object when the Accept header asks for
// it (the Node cache lists and watches Nodes so).
struct PartialObjectMetadata {
  ObjectMeta metadata;
  Json unknown = nullptr;
  friend bool operator==(const PartialObjectMetadata&, const PartialObjectMetadata&) = default;
};

// authentication.k8s.io/v1 TokenReview.
struct UserInfo {
  std::string username;
  std::string uid;
  std::vector<std::string> groups;
  std::map<std::string, std::vector<std::string>> extra;
  Json unknown = nullptr;
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

// authorization.k8s.io/v1 SubjectAccessReview with resource attributes, or,
// when non_resource.path is set, with non-resource attributes (an HTTP path
// such as /metrics; the resource fields stay empty then).
struct NonResourceAttributes {
  std::string path;
  std::string verb;
};

struct SubjectAccessReview {
  // spec
  UserInfo user;
  NonResourceAttributes non_resource;
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

// An Event seen again: how often, and when last (client-go's recorder counts
// repeats here instead of creating a new Event each time).
struct EventSeries {
  int32_t count = 0;
  std::string last_observed_time;  // MicroTime
  Json unknown = nullptr;
  friend bool operator==(const EventSeries&, const EventSeries&) = default;
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
  std::optional<EventSeries> series;
  Json unknown = nullptr;
};

// v1 Service, as pull-mode discovery reads it: labels, annotations and the
// ports' names and protocols. targetPort (an int or a string), the rest of the
// spec and the status are kept in `unknown`.
struct ServicePort {
  std::string name;
  int32_t port = 0;
  std::string protocol;      // TCP, UDP, SCTP
  std::string app_protocol;  // "https", "kubernetes.io/h2c", ...; empty: unset
  Json unknown = nullptr;
  friend bool operator==(const ServicePort&, const ServicePort&) = default;
};

struct ServiceSpec {
  std::vector<ServicePort> ports;
  Json unknown = nullptr;
  friend bool operator==(const ServiceSpec&, const ServiceSpec&) = default;
};

struct Service {
  ObjectMeta metadata;
  ServiceSpec spec;
  Json unknown = nullptr;  // status
  friend bool operator==(const Service&, const Service&) = default;
};

// discovery.k8s.io/v1 EndpointSlice: the addresses behind a Service. Unset
// conditions mean what Kubernetes says they mean (ready: unset is ready).
// Endpoints keep hostname, zone and hints in `unknown`.
struct EndpointConditions {
  std::optional<bool> ready;
  std::optional<bool> serving;
  std::optional<bool> terminating;
  Json unknown = nullptr;
  friend bool operator==(const EndpointConditions&, const EndpointConditions&) = default;
};

// An endpoint's targetRef: the object (a Pod, for the EndpointSlice
// controller's slices) that serves its addresses. Written by whoever writes
// the EndpointSlice, so it names a Pod without proving anything about it.
struct EndpointTargetRef {
  std::string kind;
  std::string namespace_;
  std::string name;
  std::string uid;
  Json unknown = nullptr;  // apiVersion, resourceVersion, fieldPath
  friend bool operator==(const EndpointTargetRef&, const EndpointTargetRef&) = default;
};

struct Endpoint {
  std::vector<std::string> addresses;
  EndpointConditions conditions;
  std::optional<std::string> node_name;
  std::optional<EndpointTargetRef> target_ref;
  Json unknown = nullptr;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

struct EndpointPort {
  std::string name;  // empty: unnamed
  std::optional<int32_t> port;
  std::string protocol;
  std::string app_protocol;
  Json unknown = nullptr;
  friend bool operator==(const EndpointPort&, const EndpointPort&) = default;
};

struct EndpointSlice {
  ObjectMeta metadata;
  std::string address_type;  // IPv4, IPv6 or FQDN
  std::vector<Endpoint> endpoints;
  std::vector<EndpointPort> ports;
  Json unknown = nullptr;
  friend bool operator==(const EndpointSlice&, const EndpointSlice&) = default;
};

// v1 Pod, trimmed to who it is and where it runs: what pull-mode discovery
// checks an endpoint's targetRef against (its node, addresses, ServiceAccount,
// whether it is being deleted). Decoding keeps nothing else (podFromJson
// also drops labels, annotations, owners and finalizers), so a cache of a
// namespace's Pods costs a few hundred bytes per Pod. Read-only: never
// written back.
struct PodSpec {
  std::string node_name;
  std::string service_account_name;
  friend bool operator==(const PodSpec&, const PodSpec&) = default;
};

struct PodIp {
  std::string ip;
  friend bool operator==(const PodIp&, const PodIp&) = default;
};

struct PodStatus {
  std::string phase;
  std::string pod_ip;
  std::vector<PodIp> pod_ips;
  friend bool operator==(const PodStatus&, const PodStatus&) = default;
};

struct Pod {
  ObjectMeta metadata;
  PodSpec spec;
  PodStatus status;
  friend bool operator==(const Pod&, const Pod&) = default;

  // True when `address` is one of the Pod's IPs (status.podIPs, or podIP).
  bool hasIp(std::string_view address) const;
};

// JSON conversions, by the field tables below and in objects.cc. Decoding fails
// with InvalidArgument naming every bad field ("metadata.labels: must be an
// object") and never throws.
Json toJson(const ObjectMeta& meta);
StatusOr<ObjectMeta> objectMetaFromJson(const Json& j);
Json toJson(const Lease& lease);
StatusOr<Lease> leaseFromJson(const Json& j);
Json toJson(const Secret& secret);
StatusOr<Secret> secretFromJson(const Json& j);
Json toJson(const ConfigMap& config_map);
StatusOr<ConfigMap> configMapFromJson(const Json& j);
StatusOr<Node> nodeFromJson(const Json& j);
StatusOr<ServerVersion> serverVersionFromJson(const Json& j);
StatusOr<PartialObjectMetadata> partialObjectMetadataFromJson(const Json& j);
Json toJson(const TokenReview& review);
StatusOr<TokenReview> tokenReviewFromJson(const Json& j);
Json toJson(const SubjectAccessReview& review);
StatusOr<SubjectAccessReview> subjectAccessReviewFromJson(const Json& j);
Json toJson(const Event& event);
StatusOr<Event> eventFromJson(const Json& j);
Json toJson(const EventSeries& series);
Json toJson(const Service& service);
StatusOr<Service> serviceFromJson(const Json& j);
Json toJson(const EndpointSlice& slice);
StatusOr<EndpointSlice> endpointSliceFromJson(const Json& j);
// Unknown fields are skipped and the metadata trimmed (see Pod).
Json toJson(const Pod& pod);
StatusOr<Pod> podFromJson(const Json& j);

// The tables of the types other files nest in theirs.
namespace codec {

template <>
struct Table<OwnerReference> : TableKeepingUnknown<OwnerReference> {
  static constexpr auto kFields = std::tuple{
      field("apiVersion", &OwnerReference::api_version, Str{}, Omit::kNever),
      field("blockOwnerDeletion", &OwnerReference::block_owner_deletion, Opt<Bool>{}),
      field("controller", &OwnerReference::controller, Opt<Bool>{}),
      field("kind", &OwnerReference::kind, Str{}, Omit::kNever),
      field("name", &OwnerReference::name, Str{}, Omit::kNever),
      field("uid", &OwnerReference::uid, Str{}, Omit::kNever),
  };
};

template <>
struct Table<ObjectMeta> : TableKeepingUnknown<ObjectMeta> {
  static constexpr auto kFields = std::tuple{
      field("annotations", &ObjectMeta::annotations, StringMap{}),
      field("creationTimestamp", &ObjectMeta::creation_timestamp, Str{}),
      field("deletionTimestamp", &ObjectMeta::deletion_timestamp, Opt<Str>{}),
      field("finalizers", &ObjectMeta::finalizers, Strings{}),
      field("generateName", &ObjectMeta::generate_name, Str{}),
      field("generation", &ObjectMeta::generation, Int64{}),
      field("labels", &ObjectMeta::labels, StringMap{}),
      field("name", &ObjectMeta::name, Str{}),
      field("namespace", &ObjectMeta::namespace_, Str{}),
      field("ownerReferences", &ObjectMeta::owner_references, ListOf<Obj<OwnerReference>>{}),
      field("resourceVersion", &ObjectMeta::resource_version, Str{}),
      field("uid", &ObjectMeta::uid, Str{}),
  };
};

}  // namespace codec
}  // namespace rsc::client
