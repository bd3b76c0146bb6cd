// ClusterView: the cluster as one node last read it from the store (members
// and placements), immutable once published (ClusterMember::View).
//
// Thread-safety: a plain value; shared read-only between threads.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "cluster/node_record.h"
#include "cluster/placement.h"
#include "core/clock.h"

namespace inferd::cluster {

// The members as last read from the store.
struct ClusterView {
  std::string self;                             // this node's id
  std::vector<NodeRecord> nodes;                // live members (their lease holds), by id
  std::map<std::string, Placement> placements;  // by model (placed nodes may be dead: check `nodes`)
  std::vector<std::string> unreadable;          // keys whose records did not parse (logged once each)
  bool store_reachable = false;                 // the last round reached the store
  bool registered = false;                      // this node's record is in the store under a live lease
  TimePoint read_at{};                          // when `nodes` was read (the last good round)

  const NodeRecord* Find(const std::string& id) const {
    auto it = std::lower_bound(nodes.begin(), nodes.end(), id,
                               [](const NodeRecord& n, const std::string& key) { return n.id < key; });
    return it != nodes.end() && it->id == id ? &*it : nullptr;
  }
};

}  // namespace inferd::cluster
