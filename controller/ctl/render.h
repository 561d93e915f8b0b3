// How resourceslicectl prints what it gets: pool statuses as a table, dry-run
// answers as a diff, live slices with their pools' completeness, and any JSON
// as YAML. Pure functions from the inventory API's answers, read with the
// controller's own tables (client/inventory_api.h), or typed slices to text;
// thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "client/inventory_api.h"
#include "client/objects.h"
#include "client/resource_slice.h"

namespace rsc::ctl {

using Json = client::Json;

// A table of PoolStatus objects: DRIVER POOL PHASE GENERATION SLICES
// LAST-PUSH, and with `wide` also VERSION (published/desired), LEASE, LEADER,
// ERROR. LAST-PUSH is an age as kubectl prints one ("45s", "3m", "2h").
std::string renderPoolTable(const std::vector<client::PoolStatusJson>& statuses, bool wide,
                            std::chrono::system_clock::time_point now);

// A kubectl-style age: "12s", "5m", "3h", "2d"; "<unknown>" for a timestamp
// that is not RFC 3339.
std::string age(const std::string& rfc3339, std::chrono::system_clock::time_point now);

// A DryRunResult as a diff, per pool:
//   gpu.example.com/node-a: publish at generation 3 (generation bumped), 2 slices
//     ~ update gpu.example.com-node-a-x7k2p (index 0): spec.devices[gpu-1].attributes.model.string
//     + create (index 1)
//     - delete gpu.example.com-node-a-p2m9q
// or "gpu.example.com/node-a: no changes".
std::string renderDryRun(const client::DryRunResultJson& result);

// How many slice writes a DryRunResult plans, over all its pools.
size_t plannedWrites(const client::DryRunResultJson& result);

// The live slices as a table (NAME POOL GENERATION COUNT DEVICES NODE, and
// with `wide` the resourceVersion) followed by one line per pool:
// "pool node-a: complete (generation 3, 2 of 2 slices)" or why it is not.
std::string renderSlices(const std::vector<client::ResourceSlice>& slices, bool wide);

// Whether a pool's slices are complete: one generation, and as many slices as
// each says in resourceSliceCount. `why` says what is wrong otherwise.
bool poolComplete(const std::vector<const client::ResourceSlice*>& pool, std::string* why);

// An inventory API error answer as one line: "422 Invalid: 2 invalid fields
// (devices[0].name: must be ...; ...)"; a body that is no Error is quoted.
std::string errorLine(int code, const std::string& body);

// JSON as block-style YAML, as kubectl -o yaml prints.
std::string toYaml(const Json& value);

}  // namespace rsc::ctl
