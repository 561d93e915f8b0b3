// Checks that what parseJsonBody charges for a body (decodedJsonBytes) is at least what decoding
// it really costs: the JSON tree plus what the pool decoder builds from it, counted byte for byte
// by this binary's own global operator new and delete (malloc's chunk sizes, headers included).
// The bodies are the worst cases per byte of each JSON kind, and realistic pools. Its own binary:
// replacing operator new is process-wide.
#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <string>

#include "controller/pool/pool_json.h"

namespace {

// glibc's in-use chunk: the usable size plus its 8-byte size header.
constexpr size_t kChunkHeader = 8;
std::atomic<size_t> g_live{0};
std::atomic<size_t> g_peak{0};

void* allocate(size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  const size_t live =
      g_live.fetch_add(malloc_usable_size(p) + kChunkHeader) + malloc_usable_size(p) + kChunkHeader;
  size_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return p;
}

void release(void* p) noexcept {
  if (p == nullptr) return;
  g_live.fetch_sub(malloc_usable_size(p) + kChunkHeader);
  std::free(p);
}

}  // namespace

void* operator new(size_t n) { return allocate(n); }
void* operator new[](size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }

namespace rsc::controller::pool {
namespace {

// What decoding `body` as the handler and the fetcher do costs at its peak, above what was live
// before: parse, decode as a pool (PUT pool) or a driver's pools (PUT driver, a pull), validate,
// and the error answer.
size_t realPeak(const std::string& body, bool driver) {
  const size_t before = g_live.load();
  g_peak.store(before);
  {
    StatusOr<Json> json = parseJsonBody(body, SIZE_MAX);
    EXPECT_TRUE(json.ok()) << json.status().message();
    if (json.ok()) {
      BodyProblems problems;
      if (driver) {
        auto pools = decodeDriverInventory(*json, std::nullopt, problems);
        (void)problemsStatus(problems);
      } else {
        reconcile::Pool pool = decodePool(*json, "", problems);
        (void)problemsStatus(problems);
      }
    }
  }
  return g_peak.load() - before;
}

// `count` copies of `item`, comma-separated, as the devices of a pool.
std::string poolOf(const std::string& item, size_t count) {
  std::string body = R"({"nodeName":"node-a","devices":[)";
  body.reserve(body.size() + count * (item.size() + 1) + 4);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) body += ',';
    body += item;
  }
  body += "]}";
  return body;
}

std::string driverOf(const std::string& pool) { return R"({"pools":{"p":)" + pool + "}}"; }

void expectCharged(const std::string& name, const std::string& pool) {
  for (bool driver : {false, true}) {
    const std::string body = driver ? driverOf(pool) : pool;
    const size_t real = realPeak(body, driver);
    const size_t charged = decodedJsonBytes(body);
    std::printf("%-28s %-6s body %9zu B  real %11zu B (%5.1f x)  charged %11zu B (%5.2f x real)\n",
                name.c_str(), driver ? "driver" : "pool", body.size(), real,
                static_cast<double>(real) / static_cast<double>(body.size()), charged,
                static_cast<double>(charged) / static_cast<double>(real));
    EXPECT_GE(charged, real) << name << (driver ? " as a driver" : " as a pool");
  }
}

constexpr size_t kCount = 100'000;

TEST(DecodeCostTest, EmptyDevices) { expectCharged("empty devices", poolOf("{}", kCount)); }

TEST(DecodeCostTest, NumbersAsDevices) { expectCharged("numbers as devices", poolOf("0", kCount)); }

TEST(DecodeCostTest, NullsAndBooleans) {
  expectCharged("nulls as devices", poolOf("null", kCount));
  expectCharged("booleans as devices", poolOf("true", kCount));
}

TEST(DecodeCostTest, TinyStrings) {
  expectCharged("tiny strings as devices", poolOf(R"("")", kCount));
  expectCharged("tiny device names", poolOf(R"({"name":"a"})", kCount));
}

TEST(DecodeCostTest, LongStrings) {
  expectCharged("16-byte strings", poolOf(R"("abcdefghijklmnop")", kCount));
  expectCharged("16-byte device names", poolOf(R"({"name":"abcdefghijklmnop"})", kCount));
}

TEST(DecodeCostTest, DeepArrays) {
  std::string deep = "0";  // 40 nested lists
  deep.insert(0, 40, '[');
  deep.append(40, ']');
  expectCharged("deep arrays", poolOf(deep, kCount / 40));
  expectCharged("empty arrays", poolOf("[]", kCount));
}

// A device with `count` attributes of value `value`.
std::string withAttributes(const std::string& value, int count) {
  std::string device = R"({"name":"d","attributes":{)";
  for (int i = 0; i < count; ++i) {
    if (i > 0) device += ',';
    device += "\"a" + std::to_string(i) + "\":" + value;
  }
  return device + "}}";
}

TEST(DecodeCostTest, ObjectMembers) {
  expectCharged("empty attributes", poolOf(withAttributes("{}", 1000), kCount / 1000));
  expectCharged("int attributes", poolOf(withAttributes(R"({"int":1})", 1000), kCount / 1000));
  expectCharged("unknown members", poolOf(R"({"x":0})", kCount));
  expectCharged("null members", poolOf(R"({"name":null})", kCount));
}

TEST(DecodeCostTest, CapacitiesAndCounters) {
  expectCharged("capacities",
                poolOf(R"({"name":"d","capacity":{"m":{"value":"1"},"n":{"value":"2"}}})", kCount));
  expectCharged("taints",
                poolOf(R"({"name":"d","taints":[{"key":"k","effect":"NoSchedule"}]})", kCount));
}

// A valid pool of 4 MiB of GPU-like devices (about 5,000), which the default limit admits: the
// decoded form (each device's shared form) is built too.
TEST(DecodeCostTest, RealisticPool) {
  std::string devices;
  size_t count = 0;
  while (devices.size() < kDefaultMaxDecodedBytes / 32) {
    const std::string i = std::to_string(count++);
    if (!devices.empty()) devices += ',';
    devices.append(R"({"name":"gpu-)").append(i);
    devices.append(R"(","attributes":{"uuid":{"string":"GPU-0001-4a1e-9c3b-)").append(i);
    devices.append(R"(-7d2f0ca1b9e0"},"productName":{"string":"NVIDIA H100 80GB HBM3"},)");
    devices.append(R"("brand":{"string":"Nvidia"},"architecture":{"string":"Hopper"},)");
    devices.append(R"("cudaComputeCapability":{"version":"9.0.0"},"driverVersion":{"version":)");
    devices.append(R"("570.124.6"},"index":{"int":)").append(i);
    devices.append(R"(},"minor":{"int":)").append(i);
    devices.append(R"(},"resource.kubernetes.io/pcieRoot":{"string":"pci0000:00"}},)");
    devices.append(R"("capacity":{"memory":{"value":"80Gi"},"multiprocessors":{"value":"132"}}})");
  }
  const std::string pool = R"({"nodeName":"node-a","devices":[)" + devices + "]}";
  ASSERT_TRUE(parsePool(pool).ok()) << "valid, and within --max-decoded-bytes";
  expectCharged("realistic pool", pool);
}

// Small valid devices, each a shared form once the pool is valid.
TEST(DecodeCostTest, SmallValidDevices) {
  std::string devices;
  for (size_t i = 0; i < kCount; ++i) {
    if (i > 0) devices += ',';
    devices += R"({"name":"d)" + std::to_string(i) + R"("})";
  }
  const std::string pool = R"({"nodeName":"node-a","devices":[)" + devices + "]}";
  ASSERT_TRUE(parsePool(pool).ok());
  expectCharged("small valid devices", pool);
}

TEST(DecodeCostTest, Examples) {
  for (const auto& entry : std::filesystem::directory_iterator(RSC_INVENTORY_EXAMPLES_DIR)) {
    const std::string path = entry.path().string();
    if (!path.ends_with(".json")) continue;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const bool driver = path.ends_with(".driver.json");
    const std::string body = text.str();
    const size_t real = realPeak(body, driver);
    EXPECT_GE(decodedJsonBytes(body), real) << path;
  }
}

}  // namespace
}  // namespace rsc::controller::pool
