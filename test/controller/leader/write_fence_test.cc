#include "controller/leader/write_fence.h"

#include <gtest/gtest.h>

#include <atomic>

#include "client/rest_kube_api.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_http_transport.h"

namespace rsc::controller::leader {
namespace {

client::HttpRequest request(std::string method, std::string path) {
  client::HttpRequest r;
  r.method = std::move(method);
  r.path_and_query = std::move(path);
  return r;
}

client::ResourceSlice slice() {
  client::ResourceSlice s;
  s.metadata.generate_name = "00000-gpu.example.com-node-a-";
  s.spec.driver = "gpu.example.com";
  s.spec.pool.name = "node-a";
  s.spec.pool.resource_slice_count = 1;
  s.spec.node_name = "node-a";
  return s;
}

class WriteFenceTest : public ::testing::Test {
 protected:
  // The server answers every request with 200 unless a test says otherwise.
  WriteFenceTest() {
    inner_.answer = [](const client::HttpRequest&) {
      client::HttpResponse r;
      r.code = 200;
      r.body = "{}";
      return StatusOr<client::HttpResponse>(r);
    };
  }

  std::unique_ptr<client::RestKubeApi> api() {
    client::RestKubeApiOptions o;
    o.qps = 0;
    auto made = client::RestKubeApi::create(fence_, clock_, o);
    EXPECT_TRUE(made.ok()) << made.status().toString();
    return std::move(*made);
  }

  testing::FakeClock clock_;
  testing::FakeHttpTransport inner_{"api.example:443"};
  std::atomic<bool> holds_lease_{false};
  WriteFence fence_{inner_, [this] { return holds_lease_.load(); }};
};

TEST_F(WriteFenceTest, GuardsEveryWriteOfTheResourceGroupAndNothingElse) {
  EXPECT_TRUE(WriteFence::guarded(request("POST", "/apis/resource.k8s.io/v1/resourceslices")));
  EXPECT_TRUE(WriteFence::guarded(request("PUT", "/apis/resource.k8s.io/v1/resourceslices/x")));
  EXPECT_TRUE(WriteFence::guarded(request("DELETE", "/apis/resource.k8s.io/v1/resourceslices/x")));
  EXPECT_TRUE(WriteFence::guarded(request("DELETE", "/apis/resource.k8s.io/v1/resourceslices")));
  EXPECT_TRUE(WriteFence::guarded(request("PATCH", "/apis/resource.k8s.io/v1/resourceslices/x")));
  EXPECT_FALSE(WriteFence::guarded(request("GET", "/apis/resource.k8s.io/v1/resourceslices")));
  EXPECT_FALSE(WriteFence::guarded(request(
      "PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/resourceslice-controller")));
  EXPECT_FALSE(WriteFence::guarded(request("POST", "/apis/authentication.k8s.io/v1/tokenreviews")));
  EXPECT_FALSE(WriteFence::guarded(request("POST", "/apis/events.k8s.io/v1/namespaces/a/events")));
}

TEST_F(WriteFenceTest, WithoutTheLeaseSliceWritesFailAndNeverReachTheServer) {
  auto kube = api();
  StatusOr<client::ResourceSlice> created = kube->createResourceSlice(slice());
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(created.status().reason(), kReasonNotLeader);
  EXPECT_FALSE(kube->deleteResourceSlice("x", {}).ok());
  EXPECT_TRUE(inner_.requests().empty());
  // Reads, and the lease itself, always pass.
  (void)kube->getLease("ns", "resourceslice-controller");
  EXPECT_EQ(inner_.requests().size(), 1U);

  holds_lease_ = true;
  (void)kube->createResourceSlice(slice());
  EXPECT_EQ(inner_.requests().size(), 2U);
}

TEST_F(WriteFenceTest, ARetryDueAfterTheLeaseLapsedIsNotSent) {
  holds_lease_ = true;
  // The server answers 429 with Retry-After; during that wait the renew
  // deadline passes without a renewal.
  inner_.answer = [this](const client::HttpRequest&) {
    holds_lease_ = false;
    client::HttpResponse r;
    r.code = 429;
    r.headers["retry-after"] = "5";
    r.body = "Too many requests";
    return StatusOr<client::HttpResponse>(r);
  };
  auto kube = api();
  StatusOr<client::ResourceSlice> created = kube->createResourceSlice(slice());
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().reason(), kReasonNotLeader) << created.status().toString();
  EXPECT_EQ(inner_.requests().size(), 1U) << "only the attempt sent while the lease was held";
}

}  // namespace
}  // namespace rsc::controller::leader
