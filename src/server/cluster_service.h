// ClusterService: this server's part in a cluster (`inferd serve --cluster`).
// It joins once the front ends listen (so peers never route to a node that
// cannot answer), publishes what the ModelManager holds (models serving,
// resident bytes, requests pending) through a ClusterMember, and leaves first
// on shutdown. It is also placement's source for the ModelManager: after
// each round it repairs placements (docs/cluster.md):
// - a model this node holds whose placement does not name it gets this node
//   added (compare-and-swap; also beyond two copies): the registry is rebuilt
//   from what nodes hold;
// - a placement that names dead nodes drops them; a model used recently that
//   has fewer than two live copies gets another node (ChooseNode); one whose
//   copies each serve more than the copy rate (the holders' published
//   request rates, summed) gets another, and a copy beyond two is released
//   when the rate falls (the released node evicts it once idle, then takes
//   itself off the list; routing prefers the placed copies meanwhile);
// - a model placed here and not held is loaded (once per placement
//   revision; under on-demand residency); one placed here that this node
//   evicted since, or failed to load, is given up.
// Its writes go in transactions, at most 1,024 per pass and for a quarter of
// the lease TTL (the lease is renewed between passes); more waits for the
// next round, which then comes at once.
// And the request path asks it where a request goes (Route: local or the
// peers to forward to), and tells it when a peer failed (MarkDown: routed
// around at once, not after its lease expires).
//
// Thread-safety: all methods are thread-safe after Join; Join and Leave are
// called by the server's owner (serve_command) and InferenceServer::Shutdown.
// Ownership: the manager, store and clock are not owned; they outlive it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_member.h"
#include "cluster/cluster_store.h"
#include "cluster/placement.h"
#include "core/mutex.h"
#include "core/status.h"

namespace inferd {

class ModelManager;
class PrometheusWriter;

struct ClusterCounters {
  std::atomic<uint64_t> forwarded{0};            // requests sent to a peer
  std::atomic<uint64_t> forward_failures{0};     // peers that refused or dropped a forwarded request
  std::atomic<uint64_t> forward_fallbacks{0};    // requests served here after every peer failed
  std::atomic<uint64_t> forward_ns{0};           // time to a forwarded answer's first byte, summed
  std::atomic<uint64_t> placements{0};           // placements this node wrote (new or changed)
  std::atomic<uint64_t> placement_conflicts{0};  // compare-and-swap lost to another node
  std::atomic<uint64_t> re_replications{0};      // copies added for models below two live copies
  std::atomic<uint64_t> placement_loads{0};      // loads started because a placement named this node
  std::atomic<uint64_t> rate_copies{0};          // copies added beyond two for the request rate
  std::atomic<uint64_t> released_copies{0};      // copies this node was released from and evicted
};

class ClusterService {
 public:
  // A peer to forward to.
  struct Target {
    std::string id;
    std::string http_address;
    std::string grpc_address;  // "" = the peer has no gRPC API (gRPC requests skip it)
  };
  struct Route {
    bool local = true;
    std::vector<Target> targets;  // in order; after the last, serve here
  };

  ClusterService(cluster::ClusterOptions options, cluster::ClusterStore* store, ModelManager* manager,
                 uint64_t memory_budget_bytes, Clock* clock);
  ~ClusterService();

  // Registers this node with the addresses its front ends listen at (host:port;
  // grpc "" = none) and starts the member's rounds.
  Status Join(const std::string& http_address, const std::string& grpc_address);
  // Leaves the cluster (revokes the lease). Idempotent.
  void Leave();
  const std::string& node_id() const { return options_.node_id; }

  // Where a request for `model` goes now (from the last view; never blocks on
  // the store). Local before Join, for a model held or placed here, and for
  // a model the repository does not have (answered here: 404).
  Route RouteModel(const std::string& model) const;
  // Whether a live node other than this one holds `model` and this node is
  // not its home (the placement's first live node), by the last view: the
  // cheaper eviction victim. Takes only the view's lock.
  bool HasCopyElsewhere(const std::string& model) const;
  // A forward to `id` failed (refused, connection dropped, 503): route around
  // it until its lease expires or it re-registers.
  void MarkDown(const std::string& id);
  ClusterCounters& counters() { return counters_; }

  // GET /v2/cluster: UNAVAILABLE before Join (the front ends listen a moment before).
  Result<std::string> StatusJson() const;
  // inferd_cluster_* families.
  void WriteMetrics(PrometheusWriter& w) const;

  // One placement repair pass over `view` (the member's thread after each
  // round; tests call it directly).
  void RepairPlacements(const cluster::ClusterView& view);

 private:
  cluster::NodeRecord Describe() const;
  // Requests per second per model since the last call at least a quarter
  // second before (from `counts`, each model's requests so far), for the
  // models at half the copy rate or more.
  std::map<std::string, uint64_t> MeasureRates(std::map<std::string, uint64_t> counts) const;
  static uint64_t ClusterRate(const cluster::ClusterView& view, const std::string& model);
  std::set<std::string> DownNodes() const;
  // A placement change the repair pass makes: `after` over `before` (its revision; 0: none); `grew`: a copy added.
  struct PlacementWrite {
    std::string model;
    cluster::Placement before, after;
    bool grew = false;
    cluster::ConditionalWrite ToWrite(const std::string& prefix) const;
  };
  // Writes them, in transactions, until `stop_writing`; false when time ran out first.
  bool WritePlacements(std::vector<PlacementWrite> writes, TimePoint stop_writing);
  void Placed(const PlacementWrite& w);  // counted and logged

  cluster::ClusterOptions options_;
  cluster::ClusterStore* const store_;
  ModelManager* const manager_;
  const uint64_t memory_budget_bytes_;
  Clock* const clock_;
  const int64_t started_unix_ms_;
  std::unique_ptr<cluster::ClusterMember> member_;  // set by Join
  std::atomic<bool> joined_{false};
  ClusterCounters counters_;

  // Peers a forward failed to, until when (and their process start, to see a restart).
  struct Down {
    TimePoint until;
    int64_t started_unix_ms = 0;
  };
  mutable Mutex down_mu_;
  mutable std::map<std::string, Down> down_ TSA_GUARDED_BY(down_mu_);  // expired entries leave on read

  // The request counts the last rates were measured from.
  mutable Mutex rates_mu_;
  mutable std::map<std::string, uint64_t> rate_counts_ TSA_GUARDED_BY(rates_mu_);
  mutable std::map<std::string, uint64_t> rates_ TSA_GUARDED_BY(rates_mu_);
  mutable TimePoint rates_at_ TSA_GUARDED_BY(rates_mu_);
  mutable bool rates_measured_ TSA_GUARDED_BY(rates_mu_) = false;

  // The repair pass's memory (its thread only): the placement revision at
  // which this node last started a load for a model placed here.
  std::map<std::string, int64_t> loaded_for_revision_;
};

}  // namespace inferd
