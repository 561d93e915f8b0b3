#include "client/objects.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <tuple>

#include "client/base64.h"

namespace rsc::client {

// Tag types of JSON objects whose fields live in their parent's struct
// (a TokenReview's "spec" and "status"), for their tables.
struct TokenReviewSpec;
struct TokenReviewStatus;
struct SubjectAccessReviewSpec;
struct ResourceAttributes;
struct SubjectAccessReviewStatus;

namespace codec {

template <>
struct Table<LeaseSpec> : TableKeepingUnknown<LeaseSpec> {
  static constexpr auto kFields = std::tuple{
      field("acquireTime", &LeaseSpec::acquire_time, Opt<Str>{}),
      field("holderIdentity", &LeaseSpec::holder_identity, Opt<Str>{}),
      field("leaseDurationSeconds", &LeaseSpec::lease_duration_seconds, Opt<Int32>{}),
      field("leaseTransitions", &LeaseSpec::lease_transitions, Opt<Int32>{}),
      field("renewTime", &LeaseSpec::renew_time, Opt<Str>{}),
  };
};

template <>
struct Table<Lease> : TableKeepingUnknown<Lease> {
  static constexpr std::string_view kApiVersion = "coordination.k8s.io/v1";
  static constexpr std::string_view kKind = "Lease";
  static constexpr auto kFields = std::tuple{
      field("metadata", &Lease::metadata, Obj<ObjectMeta>{}, Omit::kNever),
      field("spec", &Lease::spec, Obj<LeaseSpec>{}, Omit::kNever),
  };
};

// Secret values: base64 on the wire, decoded in the struct.
struct Base64Map {
  using Type = std::map<std::string, std::string>;
  static void decode(const Json& v, Type& out, const FieldPath& at, Decoder& d) {
    if (!v.is_object()) return d.fail(at, "must be an object");
    out.clear();
    for (const auto& [key, value] : v.items()) {
      std::optional<std::string> bytes;
      if (value.is_string()) bytes = decodeBase64(value.get_ref<const std::string&>());
      if (!bytes) {
        d.fail(at.key(key), "must be a base64 string");
        continue;
      }
      out.emplace_hint(out.end(), key, std::move(*bytes));
    }
  }
  static bool isEmpty(const Type& map) { return map.empty(); }
  static Json encode(const Type& map) {
    Json j = Json::object();
    for (const auto& [key, value] : map) j[key] = encodeBase64(value);
    return j;
  }
};

template <>
struct Table<Secret> : TableKeepingUnknown<Secret> {
  static constexpr std::string_view kApiVersion = "v1";
  static constexpr std::string_view kKind = "Secret";
  static constexpr auto kFields = std::tuple{
      field("data", &Secret::data, Base64Map{}),
      field("metadata", &Secret::metadata, Obj<ObjectMeta>{}, Omit::kNever),
      field("type", &Secret::type, Str{}),
  };
};

template <>
struct Table<ConfigMap> : TableKeepingUnknown<ConfigMap> {
  static constexpr std::string_view kApiVersion = "v1";
  static constexpr std::string_view kKind = "ConfigMap";
  static constexpr auto kFields = std::tuple{
      field("data", &ConfigMap::data, StringMap{}),
      field("metadata", &ConfigMap::metadata, Obj<ObjectMeta>{}, Omit::kNever),
  };
};

template <>
struct Table<ServerVersion> : TableKeepingUnknown<ServerVersion> {
  static constexpr auto kFields = std::tuple{
      field("gitVersion", &ServerVersion::git_version, Str{}),
      field("major", &ServerVersion::major, Str{}),
      field("minor", &ServerVersion::minor, Str{}),
  };
};

template <>
struct Table<Node> : TableKeepingUnknown<Node> {
  static constexpr std::string_view kApiVersion = "v1";
  static constexpr std::string_view kKind = "Node";
  static constexpr auto kFields = std::tuple{
      field("metadata", &Node::metadata, Obj<ObjectMeta>{}, Omit::kNever),
  };
};

template <>
struct Table<PartialObjectMetadata> : TableKeepingUnknown<PartialObjectMetadata> {
  static constexpr std::string_view kApiVersion = "meta.k8s.io/v1";
  static constexpr std::string_view kKind = "PartialObjectMetadata";
  static constexpr auto kFields = std::tuple{
      field("metadata", &PartialObjectMetadata::metadata, Obj<ObjectMeta>{}, Omit::kNever),
  };
};

template <>
struct Table<UserInfo> : TableKeepingUnknown<UserInfo> {
  static constexpr auto kFields = std::tuple{
      field("extra", &UserInfo::extra, MapOf<Strings>{}),
      field("groups", &UserInfo::groups, Strings{}),
      field("uid", &UserInfo::uid, Str{}),
      field("username", &UserInfo::username, Str{}),
  };
};

template <>
struct Table<TokenReviewSpec> {
  using Owner = TokenReview;
  static constexpr auto kFields = std::tuple{
      field("audiences", &TokenReview::audiences, Strings{}),
      field("token", &TokenReview::token, Str{}),
  };
};

template <>
struct Table<TokenReviewStatus> {
  using Owner = TokenReview;
  static constexpr auto kFields = std::tuple{
      field("audiences", &TokenReview::status_audiences, Strings{}),
      field("authenticated", &TokenReview::authenticated, Bool{}),
      field("error", &TokenReview::error, Str{}),
      field("user", &TokenReview::user, Obj<UserInfo>{}),
  };
};

// A request carries no status; an answer (as a fake server writes it) does.
template <>
struct Table<TokenReview> : TableOf<TokenReview> {
  static constexpr std::string_view kApiVersion = "authentication.k8s.io/v1";
  static constexpr std::string_view kKind = "TokenReview";
  static constexpr auto kFields = std::tuple{
      field("spec", kSelf, Obj<TokenReviewSpec>{}, Omit::kNever),
      field("status", kSelf, Obj<TokenReviewStatus>{}),
  };
};

template <>
struct Table<NonResourceAttributes> : TableOf<NonResourceAttributes> {
  static constexpr auto kFields = std::tuple{
      field("path", &NonResourceAttributes::path, Str{}),
      field("verb", &NonResourceAttributes::verb, Str{}),
  };
};

template <>
struct Table<ResourceAttributes> {
  using Owner = SubjectAccessReview;
  static constexpr auto kFields = std::tuple{
      field("group", &SubjectAccessReview::group, Str{}),
      field("name", &SubjectAccessReview::name, Str{}),
      field("namespace", &SubjectAccessReview::namespace_, Str{}),
      field("resource", &SubjectAccessReview::resource, Str{}),
      field("subresource", &SubjectAccessReview::subresource, Str{}),
      field("verb", &SubjectAccessReview::verb, Str{}),
      field("version", &SubjectAccessReview::version, Str{}),
  };
};

// The user's fields sit in the spec itself, not in a UserInfo object.
template <>
struct Table<SubjectAccessReviewSpec> {
  using Owner = SubjectAccessReview;
  static constexpr auto kFields = std::tuple{
      field(
          "extra", [](auto& r) -> auto& { return r.user.extra; }, MapOf<Strings>{}),
      field(
          "groups", [](auto& r) -> auto& { return r.user.groups; }, Strings{}),
      field("nonResourceAttributes", &SubjectAccessReview::non_resource,
            Obj<NonResourceAttributes>{}),
      // Empty in a review of a non-resource path.
      field("resourceAttributes", kSelf, Obj<ResourceAttributes>{}),
      field(
          "uid", [](auto& r) -> auto& { return r.user.uid; }, Str{}),
      field(
          "user", [](auto& r) -> auto& { return r.user.username; }, Str{}),
  };
};

// An answer always says "allowed"; a request carries no status.
template <>
struct Table<SubjectAccessReviewStatus> {
  using Owner = SubjectAccessReview;
  static constexpr auto kFields = std::tuple{
      field("allowed", &SubjectAccessReview::allowed, Bool{}, Omit::kNever),
      field("denied", &SubjectAccessReview::denied, Bool{}),
      field("evaluationError", &SubjectAccessReview::evaluation_error, Str{}),
      field("reason", &SubjectAccessReview::reason, Str{}),
  };
};

template <>
struct Table<SubjectAccessReview> : TableOf<SubjectAccessReview> {
  static constexpr std::string_view kApiVersion = "authorization.k8s.io/v1";
  static constexpr std::string_view kKind = "SubjectAccessReview";
  static constexpr auto kFields = std::tuple{
      field("spec", kSelf, Obj<SubjectAccessReviewSpec>{}, Omit::kNever),
      field("status", kSelf, Obj<SubjectAccessReviewStatus>{}),
  };
};

template <>
struct Table<ObjectReference> : TableOf<ObjectReference> {
  static constexpr auto kFields = std::tuple{
      field("apiVersion", &ObjectReference::api_version, Str{}),
      field("kind", &ObjectReference::kind, Str{}),
      field("name", &ObjectReference::name, Str{}),
      field("namespace", &ObjectReference::namespace_, Str{}),
      field("uid", &ObjectReference::uid, Str{}),
  };
};

template <>
struct Table<EventSeries> : TableKeepingUnknown<EventSeries> {
  static constexpr auto kFields = std::tuple{
      field("count", &EventSeries::count, Int32{}, Omit::kNever),
      field("lastObservedTime", &EventSeries::last_observed_time, Str{}, Omit::kNever),
  };
};

template <>
struct Table<Event> : TableKeepingUnknown<Event> {
  static constexpr std::string_view kApiVersion = "events.k8s.io/v1";
  static constexpr std::string_view kKind = "Event";
  static constexpr auto kFields = std::tuple{
      field("action", &Event::action, Str{}),
      field("eventTime", &Event::event_time, Str{}),
      field("metadata", &Event::metadata, Obj<ObjectMeta>{}, Omit::kNever),
      field("note", &Event::note, Str{}),
      field("reason", &Event::reason, Str{}),
      field("regarding", &Event::regarding, Obj<ObjectReference>{}, Omit::kNever),
      field("reportingController", &Event::reporting_controller, Str{}),
      field("reportingInstance", &Event::reporting_instance, Str{}),
      field("series", &Event::series, Opt<Obj<EventSeries>>{}),
      field("type", &Event::type, Str{}),
  };
};

template <>
struct Table<ServicePort> : TableKeepingUnknown<ServicePort> {
  static constexpr auto kFields = std::tuple{
      field("appProtocol", &ServicePort::app_protocol, Str{}),
      field("name", &ServicePort::name, Str{}),
      field("port", &ServicePort::port, Int32{}, Omit::kNever),
      field("protocol", &ServicePort::protocol, Str{}),
  };
};

template <>
struct Table<ServiceSpec> : TableKeepingUnknown<ServiceSpec> {
  static constexpr auto kFields = std::tuple{
      field("ports", &ServiceSpec::ports, ListOf<Obj<ServicePort>>{}),
  };
};

template <>
struct Table<Service> : TableKeepingUnknown<Service> {
  static constexpr std::string_view kApiVersion = "v1";
  static constexpr std::string_view kKind = "Service";
  static constexpr auto kFields = std::tuple{
      field("metadata", &Service::metadata, Obj<ObjectMeta>{}, Omit::kNever),
      field("spec", &Service::spec, Obj<ServiceSpec>{}),
  };
};

template <>
struct Table<EndpointConditions> : TableKeepingUnknown<EndpointConditions> {
  static constexpr auto kFields = std::tuple{
      field("ready", &EndpointConditions::ready, Opt<Bool>{}),
      field("serving", &EndpointConditions::serving, Opt<Bool>{}),
      field("terminating", &EndpointConditions::terminating, Opt<Bool>{}),
  };
};

template <>
struct Table<EndpointTargetRef> : TableKeepingUnknown<EndpointTargetRef> {
  static constexpr auto kFields = std::tuple{
      field("kind", &EndpointTargetRef::kind, Str{}),
      field("name", &EndpointTargetRef::name, Str{}),
      field("namespace", &EndpointTargetRef::namespace_, Str{}),
      field("uid", &EndpointTargetRef::uid, Str{}),
  };
};

template <>
struct Table<Endpoint> : TableKeepingUnknown<Endpoint> {
  static constexpr auto kFields = std::tuple{
      field("addresses", &Endpoint::addresses, Strings{}, Omit::kNever),
      // A struct, which Go's omitempty never leaves out.
      field("conditions", &Endpoint::conditions, Obj<EndpointConditions>{}, Omit::kNever),
      field("nodeName", &Endpoint::node_name, Opt<Str>{}),
      field("targetRef", &Endpoint::target_ref, Opt<Obj<EndpointTargetRef>>{}),
  };
};

template <>
struct Table<EndpointPort> : TableKeepingUnknown<EndpointPort> {
  static constexpr auto kFields = std::tuple{
      field("appProtocol", &EndpointPort::app_protocol, Str{}),
      field("name", &EndpointPort::name, Str{}),
      field("port", &EndpointPort::port, Opt<Int32>{}),
      field("protocol", &EndpointPort::protocol, Str{}),
  };
};

// endpoints and ports are written even when empty, as Go writes them (no
// omitempty); addressType is required.
template <>
struct Table<EndpointSlice> : TableKeepingUnknown<EndpointSlice> {
  static constexpr std::string_view kApiVersion = "discovery.k8s.io/v1";
  static constexpr std::string_view kKind = "EndpointSlice";
  static constexpr auto kFields = std::tuple{
      field("addressType", &EndpointSlice::address_type, Str{}, Omit::kNever),
      field("endpoints", &EndpointSlice::endpoints, ListOf<Obj<Endpoint>>{}, Omit::kNever),
      field("metadata", &EndpointSlice::metadata, Obj<ObjectMeta>{}, Omit::kNever),
      field("ports", &EndpointSlice::ports, ListOf<Obj<EndpointPort>>{}, Omit::kNever),
  };
};

template <>
struct Table<PodSpec> : TableOf<PodSpec> {
  static constexpr auto kFields = std::tuple{
      field("nodeName", &PodSpec::node_name, Str{}),
      field("serviceAccountName", &PodSpec::service_account_name, Str{}),
  };
};

template <>
struct Table<PodIp> : TableOf<PodIp> {
  static constexpr auto kFields = std::tuple{
      field("ip", &PodIp::ip, Str{}),
  };
};

template <>
struct Table<PodStatus> : TableOf<PodStatus> {
  static constexpr auto kFields = std::tuple{
      field("phase", &PodStatus::phase, Str{}),
      field("podIP", &PodStatus::pod_ip, Str{}),
      field("podIPs", &PodStatus::pod_ips, ListOf<Obj<PodIp>>{}),
  };
};

template <>
struct Table<Pod> : TableOf<Pod> {
  static constexpr std::string_view kApiVersion = "v1";
  static constexpr std::string_view kKind = "Pod";
  static constexpr auto kFields = std::tuple{
      field("metadata", &Pod::metadata, Obj<ObjectMeta>{}, Omit::kNever),
      field("spec", &Pod::spec, Obj<PodSpec>{}),
      field("status", &Pod::status, Obj<PodStatus>{}),
  };
};

}  // namespace codec

Json toJson(const ObjectMeta& meta) { return codec::toJson<ObjectMeta>(meta); }

StatusOr<ObjectMeta> objectMetaFromJson(const Json& j) {
  return codec::decode<ObjectMeta>(j, "metadata");
}

Json toJson(const Lease& lease) { return codec::toJson<Lease>(lease); }

StatusOr<Lease> leaseFromJson(const Json& j) { return codec::decode<Lease>(j, ""); }

Json toJson(const Secret& secret) { return codec::toJson<Secret>(secret); }

StatusOr<Secret> secretFromJson(const Json& j) { return codec::decode<Secret>(j, ""); }

Json toJson(const ConfigMap& config_map) { return codec::toJson<ConfigMap>(config_map); }

StatusOr<ConfigMap> configMapFromJson(const Json& j) { return codec::decode<ConfigMap>(j, ""); }

StatusOr<Node> nodeFromJson(const Json& j) { return codec::decode<Node>(j, ""); }

StatusOr<ServerVersion> serverVersionFromJson(const Json& j) {
  return codec::decode<ServerVersion>(j, "");
}

namespace {
int leadingNumber(const std::string& s) {
  int n = -1;
  for (const char c : s) {
    if (c < '0' || c > '9' || n > 100000) break;
    n = (n < 0 ? 0 : n * 10) + (c - '0');
  }
  return n;
}
}  // namespace

int ServerVersion::majorNumber() const { return leadingNumber(major); }
int ServerVersion::minorNumber() const { return leadingNumber(minor); }

StatusOr<PartialObjectMetadata> partialObjectMetadataFromJson(const Json& j) {
  return codec::decode<PartialObjectMetadata>(j, "");
}

Json toJson(const TokenReview& review) { return codec::toJson<TokenReview>(review); }

StatusOr<TokenReview> tokenReviewFromJson(const Json& j) {
  return codec::decode<TokenReview>(j, "");
}

Json toJson(const SubjectAccessReview& review) {
  return codec::toJson<SubjectAccessReview>(review);
}

StatusOr<SubjectAccessReview> subjectAccessReviewFromJson(const Json& j) {
  return codec::decode<SubjectAccessReview>(j, "");
}

Json toJson(const Event& event) { return codec::toJson<Event>(event); }

StatusOr<Event> eventFromJson(const Json& j) { return codec::decode<Event>(j, ""); }

Json toJson(const EventSeries& series) { return codec::toJson<EventSeries>(series); }

Json toJson(const Service& service) { return codec::toJson<Service>(service); }

StatusOr<Service> serviceFromJson(const Json& j) { return codec::decode<Service>(j, ""); }

Json toJson(const EndpointSlice& slice) { return codec::toJson<EndpointSlice>(slice); }

StatusOr<EndpointSlice> endpointSliceFromJson(const Json& j) {
  return codec::decode<EndpointSlice>(j, "");
}

bool Pod::hasIp(std::string_view address) const {
  if (address.empty()) return false;
  if (status.pod_ip == address) return true;
  return std::ranges::any_of(status.pod_ips, [&](const PodIp& p) { return p.ip == address; });
}

Json toJson(const Pod& pod) { return codec::toJson<Pod>(pod); }

StatusOr<Pod> podFromJson(const Json& j) {
  codec::DecodeOptions options;
  options.unknown = codec::Unknown::kSkip;
  StatusOr<Pod> pod = codec::decode<Pod>(j, "", options);
  if (pod.ok()) {
    // Who the Pod is, and nothing a cache of every Pod of a namespace need hold.
    client::ObjectMeta& meta = pod->metadata;
    meta.labels.clear();
    meta.annotations.clear();
    meta.owner_references.clear();
    meta.finalizers.clear();
    meta.unknown = nullptr;
  }
  return pod;
}

}  // namespace rsc::client
