// Heap that decoding the API server's answers costs, counted in real bytes:
// this binary replaces the global operator new and delete and keeps the live
// bytes (malloc_usable_size of each block) and their peak. A list page is read
// without a DOM of the page (codec_sax.h); the DOM of the same page, measured
// in the same run, is the baseline it is compared with.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <new>
#include <string>

#include "client/resource_slice.h"
#include "client/rest_kube_api.h"
#include "test/fakes/fake_clock.h"
#include "test/fakes/fake_http_transport.h"

namespace {

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_peak{0};

void track(int64_t delta) {
  const int64_t now = g_live.fetch_add(delta) + delta;
  int64_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
}

void* allocate(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  track(static_cast<int64_t>(malloc_usable_size(p)));
  return p;
}

void release(void* p) noexcept {
  if (p != nullptr) {
    track(-static_cast<int64_t>(malloc_usable_size(p)));
    std::free(p);
  }
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t /*n*/) noexcept { release(p); }
void operator delete[](void* p, std::size_t /*n*/) noexcept { release(p); }

namespace rsc::client {
namespace {

// The heap a call holds at its peak above what it started with, and what
// it still holds when it returns (its result).
struct HeapUse {
  int64_t peak = 0;
  int64_t kept = 0;
  int64_t transient() const { return peak - kept; }
};

template <typename F>
HeapUse measure(F&& f) {
  const int64_t start = g_live.load();
  g_peak.store(start);
  f();
  return {g_peak.load() - start, g_live.load() - start};
}

// A page of `slices` slices of 128 devices as the API server lists them:
// distinct devices with ten attributes and two capacities each.
std::string listPage(int slices) {
  std::string page = R"({"kind":"ResourceSliceList","apiVersion":"resource.k8s.io/v1",)"
                     R"("metadata":{"resourceVersion":"4242"},"items":[)";
  for (int s = 0; s < slices; ++s) {
    ResourceSlice slice;
    slice.metadata.name = "nic-pool-" + std::to_string(s);
    slice.metadata.uid = "0c4d9a8e-1111-4e2b-9c3a-" + std::to_string(100000000000 + s);
    slice.metadata.resource_version = std::to_string(1000 + s);
    slice.metadata.labels["app.kubernetes.io/managed-by"] = "resourceslice-controller";
    slice.spec.driver = "nic.example.com";
    slice.spec.pool = ResourcePool{"fabric-" + std::to_string(s), 1, 1};
    slice.spec.all_nodes = true;
    for (int d = 0; d < 128; ++d) {
      Device device;
      device.name = "nic-" + std::to_string(s) + "-" + std::to_string(d);
      for (int a = 0; a < 10; ++a) {
        device.attributes["example.com/attribute-" + std::to_string(a)].string_value =
            "value-" + std::to_string(s * 1000 + d * 10 + a);
      }
      device.capacity["example.com/bandwidth"].value = *Quantity::parse("100G");
      device.capacity["example.com/queues"].value = *Quantity::parse(std::to_string(64 + d));
      slice.spec.devices.emplace_back(device);
    }
    page += (s == 0 ? "" : ",") + toJsonText(slice);
  }
  return page + "]}";
}

TEST(DecodeHeap, AListPageIsReadInAboutItsOwnSizeNotAsADom) {
  const std::string page = listPage(40);
  const auto body = static_cast<int64_t>(page.size());

  // The baseline: the DOM of the page, which the list read before.
  HeapUse dom = measure([&] {
    const Json parsed = Json::parse(page);
    ASSERT_EQ(parsed["items"].size(), 40u);
  });

  testing::FakeHttpTransport transport("apiserver:6443");
  transport.answer = [&](const HttpRequest&) -> StatusOr<HttpResponse> {
    HttpResponse response;
    response.code = 200;
    response.body = page;  // the transport's copy, as a real answer's body
    return response;
  };
  testing::FakeClock clock;
  RestKubeApiOptions options;
  options.qps = 0;
  auto api = RestKubeApi::create(transport, clock, std::move(options));
  ASSERT_TRUE(api.ok()) << api.status().toString();

  StatusOr<ResourceSliceList> list = internalError("not listed");
  const HeapUse read = measure([&] { list = (*api)->listResourceSlices({}); });
  ASSERT_TRUE(list.ok()) << list.status().toString();
  ASSERT_EQ(list->items.size(), 40u);
  EXPECT_EQ(list->resource_version, "4242");
  EXPECT_EQ(list->items[39].spec.devices.size(), 128u);

  const double page_mib = static_cast<double>(body) / (1 << 20);
  std::cout << "page " << page_mib << " MiB; DOM of it " << static_cast<double>(dom.peak) / body
            << "x the page; list read: transient " << static_cast<double>(read.transient()) / body
            << "x, kept (the typed slices) " << static_cast<double>(read.kept) / body << "x\n";
  // The answer's body is one copy of the page; what decoding adds to it stays
  // well under the DOM's cost, which is about nine times the page.
  EXPECT_LT(read.transient(), 2 * body);
  EXPECT_GT(dom.peak, 4 * read.transient());
}

}  // namespace
}  // namespace rsc::client
