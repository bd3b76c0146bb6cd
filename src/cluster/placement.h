// Placement: which nodes should hold a model (key <prefix>placement/<model>,
// JSON {"nodes": ["a", "b"], "declined": ["c"], "released": ["d"]}), written with
// compare-and-swap so two nodes never both think they placed it; and the
// pure choices made over a
// ClusterView: where a new copy goes, and where a request for a model goes.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace inferd::cluster {

struct ClusterView;
struct NodeRecord;

// The copies a used model is kept at (on distinct nodes).
inline constexpr size_t kTargetCopies = 2;
inline constexpr size_t kMaxPlacementNodes = 64;
inline constexpr size_t kMaxModelNameBytes = 1024;

struct Placement {
  std::vector<std::string> nodes;     // distinct; the first is the model's home
  std::vector<std::string> declined;  // nodes that gave their place up (load failed, evicted): not asked again
  std::vector<std::string> released;  // nodes asked to drop a copy the request rate no longer needs
  int64_t mod_revision = 0;           // the store's revision of the key (0: none written)

  bool Has(const std::string& id) const;
  bool Released(const std::string& id) const;
};

std::string EncodePlacement(const Placement& p);
Result<Placement> ParsePlacement(std::string_view json);

// The node a new copy of a model goes to: among the live nodes not in
// `exclude` and not `down`, the one with the most free budget (a node without
// a budget counts as having room), then the fewest models, then the fewest
// requests in flight, then the smallest id. "" when there is none.
std::string ChooseNode(const ClusterView& view, const std::set<std::string>& exclude,
                       const std::set<std::string>& down);

// Where a request for `model` goes, seen from node view.self:
// - local: the model is placed here, or no other node can take it (then it
//   loads here);
// - otherwise `targets`, in the order to try: live nodes that hold it (fewest
//   requests in flight first), then live nodes it is placed on that are still
//   loading it, then holders whose copy is released (so that it can drain);
//   after them the request is served locally.
// When no live node holds it or is placed to hold it, it goes to the node a
// new copy would go to (ChooseNode), which then places it on itself.
// The caller has checked that this node does not serve the model.
struct RoutePlan {
  bool local = false;
  std::vector<const NodeRecord*> targets;  // point into the view
};
RoutePlan PlanRoute(const ClusterView& view, const std::string& model, const std::set<std::string>& down);

}  // namespace inferd::cluster
