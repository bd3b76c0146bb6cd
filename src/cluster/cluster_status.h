// The cluster's status as JSON, for GET /v2/cluster and `inferd cluster
// status`: this node's view of the members (address, models held, memory,
// load), the copies per model, and whether the store is reachable.
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "cluster/cluster_member.h"

namespace inferd::cluster {

std::string ClusterStatusJson(const ClusterView& view, const ClusterMemberStats& stats, TimePoint now);

}  // namespace inferd::cluster
