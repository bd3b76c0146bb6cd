// NodeRecord: what a node of the cluster publishes about itself under its
// lease (key <prefix>nodes/<id>): where to reach it, its memory budget and
// use, its load and the models it holds. Encoded as JSON; Parse checks every
// field and bound (records come from the store, written by other processes:
// parsed like any untrusted input, fuzzed in fuzz/fuzz_cluster_records.cc).
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace inferd::cluster {

struct NodeRecord {
  std::string id;                   // unique in the cluster: [A-Za-z0-9._:-], 1..128 bytes
  std::string http_address;         // host:port of its HTTP API (what a peer forwards to)
  std::string grpc_address;         // host:port of its gRPC API ("" = none)
  uint64_t budget_bytes = 0;        // 0 = no budget
  uint64_t used_bytes = 0;          // bytes its loaded models hold (estimates)
  int64_t in_flight = 0;            // requests accepted and not yet answered
  int64_t started_unix_ms = 0;      // when the process started (a restart shows as a new value)
  std::vector<std::string> models;  // models it holds (serving), sorted
  // Requests per second it served over its last round, for the models it
  // serves at half the cluster's copy rate or more (the rest: not listed).
  std::map<std::string, uint64_t> rates;
};

// Bounds on what Parse accepts.
inline constexpr size_t kMaxNodeRecordBytes = 8u << 20;
inline constexpr size_t kMaxNodeRecordModels = 200000;
inline constexpr size_t kMaxNodeIdBytes = 128;
inline constexpr uint64_t kMaxNodeRecordRate = 1'000'000'000;

std::string EncodeNodeRecord(const NodeRecord& r);
Result<NodeRecord> ParseNodeRecord(std::string_view json);

// INVALID_ARGUMENT unless `id` is a valid node id.
Status CheckNodeId(std::string_view id);

}  // namespace inferd::cluster
