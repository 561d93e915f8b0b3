// The inventory API's answers as JSON (controller/inventory/openapi.json, schemas PoolStatus and
// DryRunResult): one codec table each, which the controller writes with and resourceslicectl
// reads with, so that the two cannot drift; and the Lease annotations that say where the
// leader's inventory API is. Wire shapes only: what a phase means is the
// controller's (reconcile/). Plain values and constant tables: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "client/codec.h"

namespace rsc::client {

// Written by the leader on its Lease, for the other replicas and resourceslicectl to reach its
// inventory API: the URL (https://POD_IP:PORT with TLS), and the name its certificate carries
// (--inventory-server-name, the Service's DNS name), which the pod address is verified against.
inline constexpr char kInventoryUrlAnnotation[] = "resourceslice.dra.k8s.io/inventory-url";
inline constexpr char kInventoryServerNameAnnotation[] =
    "resourceslice.dra.k8s.io/inventory-server-name";

// Why a pool's last attempt failed: a reason word and the message.
struct PoolStatusError {
  std::string reason;
  std::string message;
};

struct PoolStatusJson {
  std::string driver;
  std::string pool;
  std::string phase;  // Pending, Published, Failed, Held, Withdrawing, Withdrawn
  int64_t desired_generation = 0;
  int64_t published_generation = 0;
  // Counters of pushed content: published_version reaching desired_version means published.
  int64_t desired_version = 0;
  int64_t published_version = 0;
  std::vector<std::string> slice_names;
  std::optional<PoolStatusError> last_error;
  // A held pool's reason and message (phase Held).
  std::optional<std::string> reason;
  std::optional<std::string> message;
  std::optional<std::string> last_push_time;  // RFC 3339 with microseconds
  std::vector<std::string> dropped_fields;
  std::optional<int64_t> lease_seconds;
  std::string leader;
};

// One slice write a dry run plans, in the order it would be made.
struct PlannedWriteJson {
  std::string verb;                         // create, update, delete
  std::string slice;                        // the live slice; empty for a create
  std::optional<int64_t> index;             // the slice's index; unset for a delete
  std::vector<std::string> changed_fields;  // an update's: never empty
};

struct PoolDryRunJson {
  std::string pool;
  std::string action;  // publish, withdraw
  int64_t live_generation = 0;
  std::vector<PlannedWriteJson> writes;
  // Publish only.
  std::optional<int64_t> generation;
  std::optional<bool> generation_bumped;
  std::optional<int64_t> slice_count;
};

struct DryRunResultJson {
  bool dry_run = true;
  std::string driver;
  std::vector<PoolDryRunJson> pools;
};

namespace codec {

template <>
struct Table<PlannedWriteJson> : TableOf<PlannedWriteJson> {
  static constexpr auto kFields = std::tuple{
      field("changedFields", &PlannedWriteJson::changed_fields, Strings{}),
      field("index", &PlannedWriteJson::index, Opt<Int64>{}),
      field("slice", &PlannedWriteJson::slice, Str{}),
      field("verb", &PlannedWriteJson::verb, Str{}, Omit::kNever),
  };
};

template <>
struct Table<PoolDryRunJson> : TableOf<PoolDryRunJson> {
  static constexpr auto kFields = std::tuple{
      field("action", &PoolDryRunJson::action, Str{}, Omit::kNever),
      field("generation", &PoolDryRunJson::generation, Opt<Int64>{}),
      field("generationBumped", &PoolDryRunJson::generation_bumped, Opt<Bool>{}),
      field("liveGeneration", &PoolDryRunJson::live_generation, Int64{}, Omit::kNever),
      field("pool", &PoolDryRunJson::pool, Str{}, Omit::kNever),
      field("sliceCount", &PoolDryRunJson::slice_count, Opt<Int64>{}),
      field("writes", &PoolDryRunJson::writes, ListOf<Obj<PlannedWriteJson>>{}, Omit::kNever),
  };
};

template <>
struct Table<DryRunResultJson> : TableOf<DryRunResultJson> {
  static constexpr auto kFields = std::tuple{
      field("driver", &DryRunResultJson::driver, Str{}, Omit::kNever),
      field("dryRun", &DryRunResultJson::dry_run, Bool{}, Omit::kNever),
      field("pools", &DryRunResultJson::pools, ListOf<Obj<PoolDryRunJson>>{}, Omit::kNever),
  };
};

template <>
struct Table<PoolStatusError> : TableOf<PoolStatusError> {
  static constexpr auto kFields = std::tuple{
      field("message", &PoolStatusError::message, Str{}, Omit::kNever),
      field("reason", &PoolStatusError::reason, Str{}, Omit::kNever),
  };
};

template <>
struct Table<PoolStatusJson> : TableOf<PoolStatusJson> {
  static constexpr auto kFields = std::tuple{
      field("desiredGeneration", &PoolStatusJson::desired_generation, Int64{}, Omit::kNever),
      field("desiredVersion", &PoolStatusJson::desired_version, Int64{}, Omit::kNever),
      field("driver", &PoolStatusJson::driver, Str{}, Omit::kNever),
      field("droppedFields", &PoolStatusJson::dropped_fields, Strings{}, Omit::kNever),
      field("lastError", &PoolStatusJson::last_error, Opt<Obj<PoolStatusError>>{}),
      field("lastPushTime", &PoolStatusJson::last_push_time, Opt<Str>{}),
      field("leader", &PoolStatusJson::leader, Str{}, Omit::kNever),
      field("leaseSeconds", &PoolStatusJson::lease_seconds, Opt<Int64>{}),
      field("message", &PoolStatusJson::message, Opt<Str>{}),
      field("phase", &PoolStatusJson::phase, Str{}, Omit::kNever),
      field("pool", &PoolStatusJson::pool, Str{}, Omit::kNever),
      field("publishedGeneration", &PoolStatusJson::published_generation, Int64{}, Omit::kNever),
      field("publishedVersion", &PoolStatusJson::published_version, Int64{}, Omit::kNever),
      field("reason", &PoolStatusJson::reason, Opt<Str>{}),
      field("sliceNames", &PoolStatusJson::slice_names, Strings{}, Omit::kNever),
  };
};

}  // namespace codec

inline Json toJson(const PoolStatusJson& status) { return codec::toJson<PoolStatusJson>(status); }

// Reads a status a controller answered: fields a newer controller adds are skipped, a field of
// the wrong type is an InvalidArgument naming it.
inline StatusOr<PoolStatusJson> poolStatusFromJson(const Json& j) {
  codec::DecodeOptions options;
  options.unknown = codec::Unknown::kSkip;
  return codec::decode<PoolStatusJson>(j, "", options);
}

inline Json toJson(const PoolDryRunJson& pool) { return codec::toJson<PoolDryRunJson>(pool); }
inline Json toJson(const DryRunResultJson& result) {
  return codec::toJson<DryRunResultJson>(result);
}

// Reads a dry run's answer, as poolStatusFromJson reads a status.
inline StatusOr<DryRunResultJson> dryRunResultFromJson(const Json& j) {
  codec::DecodeOptions options;
  options.unknown = codec::Unknown::kSkip;
  return codec::decode<DryRunResultJson>(j, "", options);
}

}  // namespace rsc::client
