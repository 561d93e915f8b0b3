// Golden tests of the JSON codec: the encoded bytes, the decoding problems and
// the semanticEqual results for every input the project keeps (the inventory
// examples, the fuzz corpora and the ResourceSlice fixtures), recorded in
// test/client/testdata/codec/*.golden. A change of codec must reproduce them,
// or name the difference in its commit. Regenerate with RSC_UPDATE_GOLDEN=1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "client/objects.h"
#include "client/resource_slice.h"
#include "client/watch_decoder.h"
#include "controller/pool/pool_json.h"
#include "controller/reconcile/planner.h"

namespace rsc::client {
namespace {

namespace fs = std::filesystem;
using controller::reconcile::Plan;
using controller::reconcile::PlannedSlice;
using controller::reconcile::Pool;
using controller::reconcile::PoolKey;

const fs::path kSourceRoot = RSC_SOURCE_ROOT;
const fs::path kGoldenDir = kSourceRoot / "test/client/testdata/codec";

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The files of `dir`, in name order.
std::vector<fs::path> filesIn(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) out.push_back(entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What the wire carries: compact JSON, invalid UTF-8 replaced.
std::string bytes(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

void writeStatus(std::ostream& out, const Status& status) {
  out << "  status " << statusCodeName(status.code()) << ": " << status.message() << "\n";
  for (const FieldError& e : status.details()) {
    out << "    detail " << e.field << " | " << e.message << "\n";
  }
}

ResourceSlice sliceOf(const PoolKey& key, const Pool& pool, const Plan& plan,
                      const controller::reconcile::PlannedSlice& p) {
  ResourceSlice slice;
  slice.metadata.generate_name = controller::reconcile::sliceGenerateName(p.index, key);
  slice.spec.driver = key.driver;
  slice.spec.pool = {key.pool, 1, static_cast<int64_t>(plan.slices.size())};
  slice.spec.node_name = pool.selection.node_name;
  slice.spec.node_selector = pool.selection.node_selector;
  if (pool.selection.all_nodes) slice.spec.all_nodes = true;
  if (pool.selection.per_device_node_selection) slice.spec.per_device_node_selection = true;
  slice.spec.devices = p.devices;
  slice.spec.shared_counters = p.shared_counters;
  return slice;
}

// Every slice that decoding and planning the inputs produce, for the
// semanticEqual section.
std::vector<std::pair<std::string, ResourceSlice>>& allSlices() {
  static std::vector<std::pair<std::string, ResourceSlice>> slices;
  return slices;
}

void writePool(std::ostream& out, const std::string& name,
               const controller::reconcile::PoolKey& key, const controller::reconcile::Pool& pool) {
  const controller::reconcile::Plan plan = controller::reconcile::planPool(pool, {});
  for (const controller::reconcile::PlannedSlice& p : plan.slices) {
    ResourceSlice slice = sliceOf(key, pool, plan, p);
    out << "  slice " << bytes(toJson(slice)) << "\n";
    // Decoding what we write gives what we wrote.
    StatusOr<ResourceSlice> back = resourceSliceFromJson(toJson(slice));
    out << "  round trip " << (back.ok() && back->spec == slice.spec ? "equal" : "DIFFERENT")
        << "\n";
    allSlices().emplace_back(name + " " + key.pool + "/" + std::to_string(p.index), slice);
  }
}

// Pushed bodies: every pool input, as the body of a pool PUT and of a driver PUT.
std::string poolBodies(const std::vector<fs::path>& inputs) {
  std::ostringstream out;
  for (const fs::path& path : inputs) {
    const std::string body = readFile(path);
    const std::string name = path.filename().string();
    out << "input " << name << "\n";
    StatusOr<controller::reconcile::Pool> pool = controller::pool::parsePool(body);
    out << " as pool\n";
    if (pool.ok()) {
      writePool(out, name, {"gpu.example.com", "pool"}, *pool);
    } else {
      writeStatus(out, pool.status());
    }
    StatusOr<std::map<std::string, controller::reconcile::Pool>> pools =
        controller::pool::parseDriverPools(body);
    out << " as driver\n";
    if (pools.ok()) {
      for (const auto& [pool_name, p] : *pools) {
        writePool(out, name, {"gpu.example.com", pool_name}, p);
      }
    } else {
      writeStatus(out, pools.status());
    }
  }
  return out.str();
}

// Watch streams: each event decoded, and each slice encoded again.
std::string watchStreams(const std::vector<fs::path>& inputs) {
  std::ostringstream out;
  for (const fs::path& path : inputs) {
    const std::string name = path.filename().string();
    out << "input " << name << "\n";
    WatchDecoder decoder;
    int n = 0;
    Status fed = decoder.feedText(readFile(path), [&](std::string_view text) {
      // The controller's reading (from the text, no DOM) must read as the DOM.
      StatusOr<WatchEvent<ResourceSlice>> typed = resourceSliceWatchEventFromText(text);
      const Json dom = Json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (dom.is_discarded()) {
        EXPECT_EQ(typed.status().reason(), kReasonNotJson) << name << " event " << n;
        return WatchDecoder::Verdict::kMalformed;
      }
      const StatusOr<WatchEvent<ResourceSlice>> by_dom = resourceSliceWatchEventFromJson(dom);
      EXPECT_EQ(typed.status(), by_dom.status()) << name << " event " << n;
      if (typed.ok() && by_dom.ok()) {
        EXPECT_EQ(typed->object, by_dom->object) << name << " event " << n;
        EXPECT_EQ(typed->error, by_dom->error) << name << " event " << n;
      }
      out << " event " << n << "\n";
      if (!typed.ok()) {
        writeStatus(out, typed.status());
      } else if (!typed->error.ok()) {
        out << "  error event\n";
        writeStatus(out, typed->error);
      } else {
        out << "  object " << bytes(toJson(typed->object)) << "\n";
        allSlices().emplace_back(name + " " + std::to_string(n), typed->object);
      }
      ++n;
      return WatchDecoder::Verdict::kMore;
    });
    if (!fed.ok()) {
      out << " feed\n";
      writeStatus(out, fed);
    }
  }
  return out.str();
}

// What encoding a decoded object writes (a Node is only read: its metadata).
template <typename T>
Json encoded(const T& value) {
  return toJson(value);
}
Json encoded(const Node& node) { return toJson(node.metadata); }

// Slices and other objects as the API server returns them, from files named
// <type>-<case>.json.
std::string objects(const std::vector<fs::path>& inputs) {
  std::ostringstream out;
  for (const fs::path& path : inputs) {
    const std::string name = path.filename().string();
    if (path.extension() != ".json") continue;
    out << "input " << name << "\n";
    const Json j = Json::parse(readFile(path));
    const auto write = [&](const auto& decoded) {
      if (decoded.ok()) {
        out << "  encoded " << bytes(encoded(*decoded)) << "\n";
      } else {
        writeStatus(out, decoded.status());
      }
    };
    const std::string type = name.substr(0, name.find('-'));
    if (type == "slice") {
      StatusOr<ResourceSlice> s = resourceSliceFromJson(j);
      write(s);
      if (s.ok()) allSlices().emplace_back(name, *s);
    } else if (type == "device") {
      write(deviceFromJson(j, "devices[0]"));
    } else if (type == "meta") {
      write(objectMetaFromJson(j));
    } else if (type == "lease") {
      write(leaseFromJson(j));
    } else if (type == "node") {
      write(nodeFromJson(j));
    } else if (type == "tokenreview") {
      write(tokenReviewFromJson(j));
    } else if (type == "sar") {
      write(subjectAccessReviewFromJson(j));
    } else {
      ADD_FAILURE() << name << ": unknown input type " << type;
    }
  }
  return out.str();
}

// Edits of a slice that a server (or a foreign writer) may make, applied to
// one side of semanticEqual.
using Edit = std::function<void(ResourceSliceSpec&)>;
Edit eachDevice(const std::function<void(Device&)>& edit) {
  return
      [edit](ResourceSliceSpec& s) { client::editDevices(s.devices, [&](Device& d) { edit(d); }); };
}
const std::vector<std::pair<std::string, Edit>>& edits() {
  static const std::vector<std::pair<std::string, Edit>> list = {
      {"none", [](ResourceSliceSpec&) {}},
      {"dropTaints", eachDevice([](Device& d) { d.taints.clear(); })},
      {"dropTaintTimes", eachDevice([](Device& d) {
         for (DeviceTaint& t : d.taints) t.time_added.reset();
       })},
      {"setTaintTimes", eachDevice([](Device& d) {
         for (DeviceTaint& t : d.taints) t.time_added = "2026-07-01T12:00:00.5+02:00";
       })},
      {"dropBinding", eachDevice([](Device& d) {
         d.binds_to_node.reset();
         d.binding_conditions.clear();
         d.binding_failure_conditions.clear();
       })},
      {"dropConsumableCapacity", eachDevice([](Device& d) {
         d.allow_multiple_allocations.reset();
         for (auto& [name, c] : d.capacity) c.request_policy.reset();
       })},
      {"dropPartitionable",
       [](ResourceSliceSpec& s) {
         s.shared_counters.clear();
         s.per_device_node_selection.reset();
         client::editDevices(s.devices, [&](Device& d) {
           d.consumes_counters.clear();
           d.node_name.reset();
           d.node_selector.reset();
           d.all_nodes.reset();
         });
       }},
      {"dropListAttributes", eachDevice([](Device& d) {
         for (auto& [name, a] : d.attributes) {
           a.ints.reset();
           a.bools.reset();
           a.strings.reset();
           a.versions.reset();
         }
       })},
      {"dropUnknown",
       [](ResourceSliceSpec& s) {
         s.unknown = Json();
         client::editDevices(s.devices, [&](Device& d) {
           d.unknown = Json();
           for (auto& [name, a] : d.attributes) a.unknown = Json();
           for (auto& [name, c] : d.capacity) {
             c.unknown = Json();
             if (c.request_policy) c.request_policy->unknown = Json();
           }
         });
       }},
      {"addUnknown",
       [](ResourceSliceSpec& s) {
         s.unknown["futureSpecField"] = 1;
         client::editDevices(
             s.devices, [&](Device& d) { d.unknown["futureDeviceField"] = Json::array({"x"}); });
       }},
      {"quantityText",
       [](ResourceSliceSpec& s) {
         // The same value in other words: "80Gi" as "85899345920".
         client::editDevices(s.devices, [&](Device& d) {
           for (auto& [name, c] : d.capacity) {
             StatusOr<Quantity> plain = Quantity::parse(std::to_string(c.value.toInt64()));
             if (plain.ok() && *plain == c.value) c.value = *plain;
           }
         });
       }},
      {"quantityValue", eachDevice([](Device& d) {
         if (!d.capacity.empty()) d.capacity.begin()->second.value = Quantity::parse("7").value();
       })},
      {"poolGeneration", [](ResourceSliceSpec& s) { ++s.pool.generation; }},
      {"firstDeviceRenamed",
       [](ResourceSliceSpec& s) {
         if (!s.devices.empty()) s.devices.front().edit([](Device& d) { d.name += "-x"; });
       }},
      {"lastDeviceRemoved",
       [](ResourceSliceSpec& s) {
         if (!s.devices.empty()) s.devices.pop_back();
       }},
      {"nodeSelectorEmptyTermLists",
       [](ResourceSliceSpec& s) {
         if (s.node_selector && s.node_selector->value.contains("nodeSelectorTerms")) {
           for (Json& term : s.node_selector->value["nodeSelectorTerms"]) {
             if (term.is_object() && !term.contains("matchFields")) {
               term["matchFields"] = Json::array();
             }
           }
         }
       }},
  };
  return list;
}

std::string semanticEqualTable() {
  std::ostringstream out;
  for (const auto& [name, slice] : allSlices()) {
    out << "slice " << name << "\n";
    for (const auto& [edit_name, edit] : edits()) {
      ResourceSliceSpec edited = slice.spec;
      edit(edited);
      const auto result = [&](const ResourceSliceSpec& desired, const ResourceSliceSpec& live) {
        std::vector<std::string> dropped;
        std::string r = semanticEqual(desired, live, &dropped) ? "equal" : "different";
        for (const std::string& d : dropped) r += " " + d;
        return r;
      };
      out << "  " << edit_name << " live: " << result(slice.spec, edited)
          << "; desired: " << result(edited, slice.spec) << "\n";
    }
  }
  return out.str();
}

// Compares `got` with the golden file, or rewrites it under RSC_UPDATE_GOLDEN.
void expectGolden(const std::string& file, const std::string& got) {
  const fs::path path = kGoldenDir / file;
  if (std::getenv("RSC_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(path, std::ios::binary) << got;
    return;
  }
  const std::string want = readFile(path);
  if (want == got) return;
  std::istringstream w(want);
  std::istringstream g(got);
  std::string wl;
  std::string gl;
  for (int line = 1;; ++line) {
    const bool wok = static_cast<bool>(std::getline(w, wl));
    const bool gok = static_cast<bool>(std::getline(g, gl));
    if (!wok && !gok) break;
    if (wl != gl || wok != gok) {
      ADD_FAILURE() << file << ":" << line << " differs\n want: " << (wok ? wl : "<end>")
                    << "\n  got: " << (gok ? gl : "<end>");
      return;
    }
  }
}

// One test: the semanticEqual section uses the slices of the others, in order.
TEST(CodecGolden, ReproducesTodaysEncodingProblemsAndComparisons) {
  allSlices().clear();
  // The JSON bodies only: the folder also holds a README and manifests.
  std::vector<fs::path> pools = filesIn(kSourceRoot / "controller/inventory/examples");
  pools.erase(std::remove_if(pools.begin(), pools.end(),
                             [](const fs::path& p) { return p.extension() != ".json"; }),
              pools.end());
  expectGolden("examples.golden", poolBodies(pools));
  expectGolden("pool_json_corpus.golden",
               poolBodies(filesIn(kSourceRoot / "test/fuzz/pool_json/corpus")));
  expectGolden("watch_decoder_corpus.golden",
               watchStreams(filesIn(kSourceRoot / "test/fuzz/watch_decoder/corpus")));
  expectGolden("objects.golden", objects(filesIn(kGoldenDir / "objects")));
  expectGolden("semantic_equal.golden", semanticEqualTable());

  // Request bodies are written as text without the DOM, in the same bytes.
  ASSERT_GT(allSlices().size(), 20u);
  for (const auto& [name, slice] : allSlices()) {
    EXPECT_EQ(toJsonText(slice), toJson(slice).dump(-1, ' ', false, Json::error_handler_t::replace))
        << name;
  }
}

}  // namespace
}  // namespace rsc::client
