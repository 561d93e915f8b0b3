#include "client/objects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace rsc::client {
namespace {

using ::testing::ElementsAre;

// Metadata as the API server returns it, with fields this model keeps only
// as unknown (managedFields, deletionGracePeriodSeconds).
constexpr std::string_view kMetadata = R"({
  "name": "controller-leader",
  "namespace": "rsc-system",
  "uid": "5f0e4bd6-0c39-4d4e-9d34-1e2b0b6d7a11",
  "resourceVersion": "184467",
  "generation": 4,
  "creationTimestamp": "2026-07-01T10:00:00Z",
  "deletionTimestamp": "2026-07-01T11:00:00Z",
  "deletionGracePeriodSeconds": 0,
  "labels": {"app.kubernetes.io/name": "resourceslice-controller"},
  "annotations": {"example.com/note": "x"},
  "ownerReferences": [
    {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "1234", "controller": true},
    {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "5678",
     "blockOwnerDeletion": false}
  ],
  "finalizers": ["example.com/cleanup"],
  "managedFields": [{
    "manager": "resourceslice-controller", "operation": "Update",
    "apiVersion": "coordination.k8s.io/v1", "time": "2026-07-01T10:00:00Z",
    "fieldsType": "FieldsV1",
    "fieldsV1": {"f:spec": {"f:holderIdentity": {}}}
  }]
})";

TEST(ObjectMeta, RoundTripsEveryFieldAndKeepsUnknownOnes) {
  Json input = Json::parse(kMetadata);
  StatusOr<ObjectMeta> meta = objectMetaFromJson(input);
  ASSERT_TRUE(meta.ok()) << meta.status().toString();
  EXPECT_EQ(meta->name, "controller-leader");
  EXPECT_EQ(meta->namespace_, "rsc-system");
  EXPECT_EQ(meta->uid, "5f0e4bd6-0c39-4d4e-9d34-1e2b0b6d7a11");
  EXPECT_EQ(meta->resource_version, "184467");
  EXPECT_EQ(meta->generation, 4);
  EXPECT_EQ(meta->creation_timestamp, "2026-07-01T10:00:00Z");
  EXPECT_EQ(meta->deletion_timestamp, "2026-07-01T11:00:00Z");
  EXPECT_EQ(meta->labels.at("app.kubernetes.io/name"), "resourceslice-controller");
  EXPECT_EQ(meta->annotations.at("example.com/note"), "x");
  ASSERT_EQ(meta->owner_references.size(), 2u);
  EXPECT_EQ(meta->owner_references[0],
            (OwnerReference{"v1", "Node", "node-a", "1234", true, std::nullopt}));
  EXPECT_EQ(meta->owner_references[1],
            (OwnerReference{"apps/v1", "Deployment", "d", "5678", std::nullopt, false}));
  EXPECT_THAT(meta->finalizers, ElementsAre("example.com/cleanup"));
  EXPECT_TRUE(meta->unknown.contains("managedFields"));
  EXPECT_TRUE(meta->unknown.contains("deletionGracePeriodSeconds"));
  EXPECT_EQ(meta->unknown.size(), 2u);

  EXPECT_EQ(toJson(*meta), input);
}

TEST(ObjectMeta, EmptyFieldsAreOmitted) {
  EXPECT_EQ(toJson(ObjectMeta{}), Json::object());
  ObjectMeta meta;
  meta.generate_name = "00000-gpu.example.com-node-a-";
  meta.labels["app.kubernetes.io/managed-by"] = "resourceslice-controller";
  EXPECT_EQ(toJson(meta), Json::parse(R"({
    "generateName": "00000-gpu.example.com-node-a-",
    "labels": {"app.kubernetes.io/managed-by": "resourceslice-controller"}
  })"));
}

TEST(ObjectMeta, NullFieldsReadAsAbsent) {
  StatusOr<ObjectMeta> meta = objectMetaFromJson(Json::parse(
      R"({"name": "x", "creationTimestamp": null, "labels": null, "deletionTimestamp": null,
          "ownerReferences": null})"));
  ASSERT_TRUE(meta.ok()) << meta.status().toString();
  EXPECT_EQ(meta->name, "x");
  EXPECT_EQ(meta->creation_timestamp, "");
  EXPECT_FALSE(meta->deletion_timestamp.has_value());
  EXPECT_TRUE(meta->labels.empty());
}

TEST(ObjectMeta, DecodingErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* field;
    const char* message;
  };
  const std::vector<Case> cases = {
      {R"([])", "metadata", "must be an object"},
      {R"({"name": 7})", "metadata.name", "must be a string"},
      {R"({"labels": []})", "metadata.labels", "must be an object"},
      {R"({"labels": {"a": 1}})", "metadata.labels[\"a\"]", "must be a string"},
      {R"({"generation": "1"})", "metadata.generation", "must be an integer"},
      {R"({"generation": 1.5})", "metadata.generation", "must be an integer"},
      {R"({"generation": 18446744073709551615})", "metadata.generation",
       "out of range for a 64-bit integer"},
      {R"({"finalizers": ["a", 2]})", "metadata.finalizers[1]", "must be a string"},
      {R"({"finalizers": "a"})", "metadata.finalizers", "must be a list of strings"},
      {R"({"ownerReferences": {}})", "metadata.ownerReferences", "must be a list"},
      {R"({"ownerReferences": [{"uid": "1"}, {"controller": "yes"}]})",
       "metadata.ownerReferences[1].controller", "must be a boolean"},
  };
  for (const auto& c : cases) {
    StatusOr<ObjectMeta> meta = objectMetaFromJson(Json::parse(c.json));
    ASSERT_FALSE(meta.ok()) << c.json;
    EXPECT_EQ(meta.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(meta.status().message(), std::string(c.field) + ": " + c.message) << c.json;
    EXPECT_THAT(meta.status().details(), ElementsAre(FieldError{c.field, c.message})) << c.json;
  }
}

TEST(FieldPath, RendersFieldsIndexesAndKeys) {
  FieldPath root("");
  EXPECT_EQ(root.toString(), "");
  EXPECT_EQ(
      root.field("spec").field("devices").index(3).field("attributes").key("model").toString(),
      "spec.devices[3].attributes[\"model\"]");
  FieldPath prefix("devices[2]");
  EXPECT_EQ(prefix.field("capacity").key("a\"b").toString(), R"(devices[2].capacity["a\"b"])");
  EXPECT_EQ(root.index(0).field("name").toString(), "[0].name");
}

constexpr std::string_view kLease = R"({
  "apiVersion": "coordination.k8s.io/v1",
  "kind": "Lease",
  "metadata": {"name": "resourceslice-controller", "namespace": "rsc-system",
               "resourceVersion": "77", "uid": "u-1",
               "creationTimestamp": "2026-07-01T10:00:00Z"},
  "spec": {
    "holderIdentity": "pod-1_0c8f",
    "leaseDurationSeconds": 15,
    "acquireTime": "2026-07-01T10:00:00.000000Z",
    "renewTime": "2026-07-01T10:05:02.123456Z",
    "leaseTransitions": 3,
    "strategy": "OldestEmulationVersion",
    "preferredHolder": "pod-2"
  }
})";

TEST(Lease, RoundTripsAndKeepsUnknownSpecFields) {
  Json input = Json::parse(kLease);
  StatusOr<Lease> lease = leaseFromJson(input);
  ASSERT_TRUE(lease.ok()) << lease.status().toString();
  EXPECT_EQ(lease->metadata.name, "resourceslice-controller");
  EXPECT_EQ(lease->spec.holder_identity, "pod-1_0c8f");
  EXPECT_EQ(lease->spec.lease_duration_seconds, 15);
  EXPECT_EQ(lease->spec.acquire_time, "2026-07-01T10:00:00.000000Z");
  EXPECT_EQ(lease->spec.renew_time, "2026-07-01T10:05:02.123456Z");
  EXPECT_EQ(lease->spec.lease_transitions, 3);
  EXPECT_EQ(lease->spec.unknown,
            Json::parse(R"({"strategy": "OldestEmulationVersion", "preferredHolder": "pod-2"})"));
  EXPECT_EQ(toJson(*lease), input);
}

TEST(Lease, WritesTypeMetaAndOmitsUnsetSpecFields) {
  Lease lease;
  lease.metadata.name = "l";
  lease.metadata.namespace_ = "ns";
  lease.spec.holder_identity = "";  // set but empty: released lease, still written
  lease.spec.lease_duration_seconds = 1;
  EXPECT_EQ(toJson(lease), Json::parse(R"({
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "l", "namespace": "ns"},
    "spec": {"holderIdentity": "", "leaseDurationSeconds": 1}
  })"));
}

TEST(Lease, RejectsWrongKindAndOutOfRangeFields) {
  Json wrong_kind = Json::parse(kLease);
  wrong_kind["kind"] = "ConfigMap";
  StatusOr<Lease> lease = leaseFromJson(wrong_kind);
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().message(), "kind: must be Lease, not ConfigMap");

  Json too_long = Json::parse(kLease);
  too_long["spec"]["leaseDurationSeconds"] = 4294967296LL;
  lease = leaseFromJson(too_long);
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().message(),
            "spec.leaseDurationSeconds: out of range for a 32-bit integer");

  lease = leaseFromJson(Json::parse("[]"));
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().code(), StatusCode::kInvalidArgument);
}

TEST(Node, KeepsIdentityAndEverythingElse) {
  Json input = Json::parse(R"({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "node-a", "uid": "9a8b", "labels": {"kubernetes.io/hostname": "node-a"}},
    "spec": {"podCIDR": "10.0.0.0/24"},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]}
  })");
  StatusOr<Node> node = nodeFromJson(input);
  ASSERT_TRUE(node.ok()) << node.status().toString();
  EXPECT_EQ(node->metadata.name, "node-a");
  EXPECT_EQ(node->metadata.uid, "9a8b");
  EXPECT_EQ(node->unknown["spec"], input["spec"]);
  EXPECT_EQ(node->unknown["status"], input["status"]);

  StatusOr<Node> bad = nodeFromJson(Json::parse(R"({"metadata": {"uid": 5}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "metadata.uid: must be a string");
}

TEST(TokenReview, WritesRequest) {
  TokenReview review;
  review.token = "eyJhbGciOi";
  review.audiences = {"resourceslice-controller"};
  EXPECT_EQ(toJson(review), Json::parse(R"({
    "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
    "spec": {"token": "eyJhbGciOi", "audiences": ["resourceslice-controller"]}
  })"));
}

TEST(TokenReview, ReadsResponseWithUserExtra) {
  StatusOr<TokenReview> review = tokenReviewFromJson(Json::parse(R"({
    "kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
    "metadata": {"creationTimestamp": null},
    "spec": {"token": "eyJhbGciOi", "audiences": ["resourceslice-controller"]},
    "status": {
      "authenticated": true,
      "user": {
        "username": "system:serviceaccount:gpu:gpu-driver",
        "uid": "sa-uid",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:gpu", "system:authenticated"],
        "extra": {
          "authentication.kubernetes.io/node-name": ["node-a"],
          "authentication.kubernetes.io/pod-name": ["gpu-driver-x"],
          "authentication.kubernetes.io/credential-id": ["JTI=1f2e"]
        }
      },
      "audiences": ["resourceslice-controller"]
    }
  })"));
  ASSERT_TRUE(review.ok()) << review.status().toString();
  EXPECT_EQ(review->token, "eyJhbGciOi");
  EXPECT_TRUE(review->authenticated);
  EXPECT_EQ(review->user.username, "system:serviceaccount:gpu:gpu-driver");
  EXPECT_EQ(review->user.uid, "sa-uid");
  EXPECT_EQ(review->user.groups.size(), 3u);
  EXPECT_THAT(review->user.extra.at("authentication.kubernetes.io/node-name"),
              ElementsAre("node-a"));
  EXPECT_THAT(review->status_audiences, ElementsAre("resourceslice-controller"));
  EXPECT_EQ(review->error, "");

  // What a fake server writes back reads the same.
  StatusOr<TokenReview> again = tokenReviewFromJson(toJson(*review));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->user, review->user);
  EXPECT_EQ(again->status_audiences, review->status_audiences);
  EXPECT_TRUE(again->authenticated);
}

TEST(TokenReview, ReadsFailureAndRejectsBadExtra) {
  StatusOr<TokenReview> review = tokenReviewFromJson(Json::parse(R"({
    "spec": {"token": "t"}, "status": {"user": {}, "error": "token has expired"}
  })"));
  ASSERT_TRUE(review.ok()) << review.status().toString();
  EXPECT_FALSE(review->authenticated);
  EXPECT_EQ(review->error, "token has expired");

  review = tokenReviewFromJson(Json::parse(R"({"status": {"user": {"extra": {"k": "v"}}}})"));
  ASSERT_FALSE(review.ok());
  EXPECT_EQ(review.status().message(), "status.user.extra[\"k\"]: must be a list of strings");
}

TEST(Secret, DataIsBase64OnTheWireAndBytesInTheStruct) {
  StatusOr<Secret> secret = secretFromJson(Json::parse(R"({
    "apiVersion": "v1", "kind": "Secret",
    "metadata": {"name": "tls", "namespace": "dra", "resourceVersion": "7"},
    "type": "kubernetes.io/tls",
    "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5Cg==", "empty": ""}
  })"));
  ASSERT_TRUE(secret.ok()) << secret.status().toString();
  EXPECT_EQ(secret->type, "kubernetes.io/tls");
  EXPECT_EQ(secret->data.at("tls.crt"), "cert");
  EXPECT_EQ(secret->data.at("tls.key"), "key\n");
  EXPECT_EQ(secret->data.at("empty"), "");
  const Json written = toJson(*secret);
  EXPECT_EQ(written["data"]["tls.crt"], "Y2VydA==");
  EXPECT_EQ(written["data"]["tls.key"], "a2V5Cg==");
  EXPECT_EQ(written["kind"], "Secret");
  StatusOr<Secret> again = secretFromJson(written);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *secret);
  // Every length of tail survives the round trip.
  Secret bytes;
  bytes.data = {{"a", "x"}, {"b", "xy"}, {"c", "xyz"}, {"d", std::string("\0\xff\x10", 3)}};
  StatusOr<Secret> round = secretFromJson(toJson(bytes));
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->data, bytes.data);

  StatusOr<Secret> bad = secretFromJson(Json::parse(R"({"data": {"k": "not base64!"}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "data[\"k\"]: must be a base64 string");
}

TEST(ConfigMap, ReadsAndWritesStringData) {
  ConfigMap cm;
  cm.metadata.name = "rsc-ca";
  cm.metadata.namespace_ = "gpu-system";
  cm.data["ca.crt"] = "-----BEGIN CERTIFICATE-----\n";
  const Json written = toJson(cm);
  EXPECT_EQ(written["kind"], "ConfigMap");
  EXPECT_EQ(written["data"]["ca.crt"], "-----BEGIN CERTIFICATE-----\n");
  StatusOr<ConfigMap> again = configMapFromJson(written);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, cm);
}

TEST(SubjectAccessReview, WritesRequest) {
  SubjectAccessReview review;
  review.user.username = "system:serviceaccount:gpu:gpu-driver";
  review.user.uid = "sa-uid";
  review.user.groups = {"system:authenticated"};
  review.user.extra["authentication.kubernetes.io/node-name"] = {"node-a"};
  review.verb = "publish";
  review.group = "resourceslices.example.com";
  review.resource = "drivers";
  review.name = "gpu.example.com";
  EXPECT_EQ(toJson(review), Json::parse(R"({
    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
    "spec": {
      "resourceAttributes": {"verb": "publish", "group": "resourceslices.example.com",
                             "resource": "drivers", "name": "gpu.example.com"},
      "user": "system:serviceaccount:gpu:gpu-driver",
      "uid": "sa-uid",
      "groups": ["system:authenticated"],
      "extra": {"authentication.kubernetes.io/node-name": ["node-a"]}
    }
  })"));
}

TEST(SubjectAccessReview, WritesNonResourceRequest) {
  SubjectAccessReview review;
  review.user.username = "system:serviceaccount:monitoring:prometheus";
  review.non_resource = {"/metrics", "get"};
  EXPECT_EQ(toJson(review), Json::parse(R"({
    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
    "spec": {
      "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
      "user": "system:serviceaccount:monitoring:prometheus"
    }
  })"));
  StatusOr<SubjectAccessReview> again = subjectAccessReviewFromJson(toJson(review));
  ASSERT_TRUE(again.ok()) << again.status().toString();
  EXPECT_EQ(again->non_resource.path, "/metrics");
  EXPECT_EQ(again->non_resource.verb, "get");
  EXPECT_EQ(again->verb, "");
}

TEST(SubjectAccessReview, ReadsNonResourceResponse) {
  StatusOr<SubjectAccessReview> review = subjectAccessReviewFromJson(Json::parse(R"({
    "kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
    "metadata": {"creationTimestamp": null},
    "spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"},
             "user": "system:serviceaccount:default:stranger", "groups": ["system:authenticated"],
             "extra": {"authentication.kubernetes.io/credential-id": ["JTI=x"]}, "uid": "u"},
    "status": {"allowed": false}
  })"));
  ASSERT_TRUE(review.ok()) << review.status().toString();
  EXPECT_EQ(review->non_resource.path, "/metrics");
  EXPECT_FALSE(review->allowed);
}

TEST(SubjectAccessReview, ReadsResponse) {
  StatusOr<SubjectAccessReview> review = subjectAccessReviewFromJson(Json::parse(R"({
    "kind": "SubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
    "metadata": {},
    "spec": {
      "resourceAttributes": {"namespace": "ns", "verb": "publish", "group": "g", "version": "v1",
                             "resource": "drivers", "subresource": "status", "name": "d"},
      "user": "alice", "groups": ["devs"], "uid": "u", "extra": {"k": ["v1", "v2"]}
    },
    "status": {"allowed": false, "denied": true, "reason": "no RBAC policy matched",
               "evaluationError": "partial"}
  })"));
  ASSERT_TRUE(review.ok()) << review.status().toString();
  EXPECT_EQ(review->namespace_, "ns");
  EXPECT_EQ(review->verb, "publish");
  EXPECT_EQ(review->group, "g");
  EXPECT_EQ(review->version, "v1");
  EXPECT_EQ(review->resource, "drivers");
  EXPECT_EQ(review->subresource, "status");
  EXPECT_EQ(review->name, "d");
  EXPECT_EQ(review->user, (UserInfo{"alice", "u", {"devs"}, {{"k", {"v1", "v2"}}}}));
  EXPECT_FALSE(review->allowed);
  EXPECT_TRUE(review->denied);
  EXPECT_EQ(review->reason, "no RBAC policy matched");
  EXPECT_EQ(review->evaluation_error, "partial");

  // An answer written by toJson (a fake server) reads back the same.
  StatusOr<SubjectAccessReview> again = subjectAccessReviewFromJson(toJson(*review));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->denied);
  EXPECT_EQ(again->reason, review->reason);
  EXPECT_EQ(again->user, review->user);

  review = subjectAccessReviewFromJson(Json::parse(R"({"status": {"allowed": "yes"}})"));
  ASSERT_FALSE(review.ok());
  EXPECT_EQ(review.status().message(), "status.allowed: must be a boolean");
}

TEST(Event, WritesEventsV1) {
  Event event;
  event.metadata.name = "node-a.18f3a1b2c3d4e5f6";
  event.metadata.namespace_ = "default";
  event.event_time = "2026-07-01T10:00:00.123456Z";
  event.reporting_controller = "resourceslice-controller.example.com/controller";
  event.reporting_instance = "pod-1";
  event.action = "Publish";
  event.reason = "PoolPublished";
  event.type = "Normal";
  event.note = "published pool node-a at generation 4";
  event.regarding = {"v1", "Node", "", "node-a", "9a8b"};
  EXPECT_EQ(toJson(event), Json::parse(R"({
    "apiVersion": "events.k8s.io/v1", "kind": "Event",
    "metadata": {"name": "node-a.18f3a1b2c3d4e5f6", "namespace": "default"},
    "eventTime": "2026-07-01T10:00:00.123456Z",
    "reportingController": "resourceslice-controller.example.com/controller",
    "reportingInstance": "pod-1",
    "action": "Publish",
    "reason": "PoolPublished",
    "type": "Normal",
    "note": "published pool node-a at generation 4",
    "regarding": {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": "9a8b"}
  })"));
}

// GET /version, as kube-apiserver and a provider's (with "+") answer it.
TEST(ServerVersion, ReadsTheReleaseNumbers) {
  auto v = serverVersionFromJson(
      Json::parse(R"({"major":"1","minor":"34","gitVersion":"v1.34.4","platform":"linux/amd64"})"));
  ASSERT_TRUE(v.ok()) << v.status().toString();
  EXPECT_EQ(v->majorNumber(), 1);
  EXPECT_EQ(v->minorNumber(), 34);
  EXPECT_EQ(v->git_version, "v1.34.4");
  EXPECT_EQ(v->unknown["platform"], "linux/amd64");

  auto provider = serverVersionFromJson(Json::parse(R"({"major":"1","minor":"35+"})"));
  ASSERT_TRUE(provider.ok());
  EXPECT_EQ(provider->minorNumber(), 35);
  auto none = serverVersionFromJson(Json::parse(R"({"major":"","minor":"x"})"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->majorNumber(), -1);
  EXPECT_EQ(none->minorNumber(), -1);
  EXPECT_FALSE(serverVersionFromJson(Json::parse(R"({"minor":34})")).ok());
}

// The fields a decoding error names, in order.
std::vector<std::string> detailFields(const Status& status) {
  std::vector<std::string> fields;
  for (const auto& detail : status.details()) fields.push_back(detail.field);
  return fields;
}

// A Service as the API server answers it: the spec's addressing, targetPort
// and the status are not modelled and must come back unchanged.
constexpr std::string_view kService = R"({
  "apiVersion": "v1", "kind": "Service",
  "metadata": {"name": "gpu-inventory", "namespace": "drivers", "uid": "s-1",
               "resourceVersion": "42", "labels": {"resourceslice.dra.k8s.io/driver": "gpu.example.com"},
               "annotations": {"resourceslice.dra.k8s.io/inventory-path": "/inv"}},
  "spec": {
    "clusterIP": "10.96.0.12", "clusterIPs": ["10.96.0.12"], "type": "ClusterIP",
    "selector": {"app": "gpu-driver"}, "sessionAffinity": "None",
    "ports": [
      {"name": "inventory", "port": 8443, "targetPort": "inv", "protocol": "TCP",
       "appProtocol": "https"},
      {"name": "metrics", "port": 9090, "targetPort": 9090, "protocol": "TCP"}
    ]
  },
  "status": {"loadBalancer": {}}
})";

TEST(Service, RoundTripsAndKeepsUnknownFields) {
  const Json input = Json::parse(kService);
  StatusOr<Service> service = serviceFromJson(input);
  ASSERT_TRUE(service.ok()) << service.status().toString();
  EXPECT_EQ(service->metadata.namespace_, "drivers");
  ASSERT_EQ(service->spec.ports.size(), 2u);
  EXPECT_EQ(service->spec.ports[0].name, "inventory");
  EXPECT_EQ(service->spec.ports[0].port, 8443);
  EXPECT_EQ(service->spec.ports[0].app_protocol, "https");
  EXPECT_EQ(service->spec.ports[0].unknown["targetPort"], "inv");
  EXPECT_EQ(service->spec.ports[1].unknown["targetPort"], 9090);
  EXPECT_EQ(service->spec.ports[1].app_protocol, "");
  EXPECT_EQ(service->spec.unknown["clusterIP"], "10.96.0.12");
  EXPECT_EQ(service->unknown["status"], input["status"]);
  EXPECT_EQ(toJson(*service), input);
}

TEST(Service, DecodingErrorsNameTheField) {
  Json bad = Json::parse(kService);
  bad["spec"]["ports"][1]["port"] = "9090";
  bad["spec"]["ports"][0]["appProtocol"] = 7;
  StatusOr<Service> service = serviceFromJson(bad);
  ASSERT_FALSE(service.ok());
  EXPECT_EQ(service.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(service.status().message(),
              ::testing::HasSubstr("spec.ports[0].appProtocol: must be a string"));
  EXPECT_THAT(detailFields(service.status()),
              ElementsAre("spec.ports[0].appProtocol", "spec.ports[1].port"));

  Json wrong_kind = Json::parse(kService);
  wrong_kind["kind"] = "Endpoints";
  EXPECT_EQ(serviceFromJson(wrong_kind).status().message(), "kind: must be Service, not Endpoints");
}

// An EndpointSlice as the EndpointSlice controller writes it, with fields
// discovery does not read (zone, hints, hostname) and the targetRef it checks against the Pod.
constexpr std::string_view kEndpointSlice = R"({
  "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
  "metadata": {"name": "gpu-inventory-x7k2p", "namespace": "drivers",
               "labels": {"kubernetes.io/service-name": "gpu-inventory",
                          "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"},
               "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": "gpu-inventory",
                                    "uid": "s-1", "controller": true, "blockOwnerDeletion": true}]},
  "addressType": "IPv4",
  "endpoints": [
    {"addresses": ["10.1.2.3"], "conditions": {"ready": true, "serving": true, "terminating": false},
     "nodeName": "node-a", "zone": "z1", "hostname": "pod-0",
     "targetRef": {"kind": "Pod", "namespace": "drivers", "name": "gpu-driver-abcde", "uid": "p-1"}},
    {"addresses": ["10.1.2.4"], "conditions": {}}
  ],
  "ports": [{"name": "inventory", "port": 8443, "protocol": "TCP", "appProtocol": "https"},
            {"name": "", "protocol": "UDP"}]
})";

TEST(EndpointSlice, RoundTripsAndKeepsUnknownFields) {
  const Json input = Json::parse(kEndpointSlice);
  StatusOr<EndpointSlice> slice = endpointSliceFromJson(input);
  ASSERT_TRUE(slice.ok()) << slice.status().toString();
  EXPECT_EQ(slice->address_type, "IPv4");
  ASSERT_EQ(slice->endpoints.size(), 2u);
  const Endpoint& first = slice->endpoints[0];
  EXPECT_THAT(first.addresses, ElementsAre("10.1.2.3"));
  EXPECT_EQ(first.conditions.ready, true);
  EXPECT_EQ(first.conditions.terminating, false);
  EXPECT_EQ(first.node_name, "node-a");
  ASSERT_TRUE(first.target_ref.has_value());
  EXPECT_EQ(first.target_ref->kind, "Pod");
  EXPECT_EQ(first.target_ref->name, "gpu-driver-abcde");
  const Endpoint& second = slice->endpoints[1];
  EXPECT_FALSE(second.conditions.ready.has_value());
  EXPECT_FALSE(second.node_name.has_value());
  ASSERT_EQ(slice->ports.size(), 2u);
  EXPECT_EQ(slice->ports[0].port, 8443);
  EXPECT_EQ(slice->ports[0].app_protocol, "https");
  EXPECT_FALSE(slice->ports[1].port.has_value());
  // The unnamed port's "name": "" is written as Go writes an empty *string:
  // left out, which the server reads back as the same unnamed port.
  Json expected = input;
  expected["ports"][1].erase("name");
  EXPECT_EQ(toJson(*slice), expected);
}

TEST(EndpointSlice, EmptyListsAreWrittenAndBadFieldsNamed) {
  EndpointSlice empty;
  empty.metadata.name = "s";
  empty.address_type = "IPv6";
  EXPECT_EQ(toJson(empty), Json::parse(R"({"apiVersion": "discovery.k8s.io/v1",
    "kind": "EndpointSlice", "metadata": {"name": "s"}, "addressType": "IPv6",
    "endpoints": [], "ports": []})"));

  Json bad = Json::parse(kEndpointSlice);
  bad["endpoints"][1]["conditions"]["ready"] = "yes";
  bad["endpoints"][0]["addresses"][0] = 10;
  bad["ports"][0]["port"] = 1.5;
  StatusOr<EndpointSlice> slice = endpointSliceFromJson(bad);
  ASSERT_FALSE(slice.ok());
  EXPECT_THAT(
      detailFields(slice.status()),
      ElementsAre("endpoints[0].addresses[0]", "endpoints[1].conditions.ready", "ports[0].port"));
}

}  // namespace
}  // namespace rsc::client
