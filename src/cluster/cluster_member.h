// ClusterMember: this node's membership in the cluster. It registers the
// node's record under a lease (key <prefix>nodes/<id>), keeps the lease
// alive, republishes the record when it changes (models held, memory, load),
// and reads every member's record and every placement into an immutable
// ClusterView (the placements by their changes since the last round, all of
// them every 30 s, after a failed round and after a lost lease:
// cluster/prefix_mirror.h).
//
// Failure handling, the part that matters:
// - The store unreachable: the last view stays (marked stale, with the time
//   of the last good read); the node keeps serving and retries each round.
// - The lease lost (the store was down longer than the TTL, or restarted
//   without its data): the node registers again with a new lease and its
//   current record, so the registry is rebuilt from what each node actually
//   holds.
// - Stop (graceful shutdown): the lease is revoked at once, so peers stop
//   routing here without waiting for the TTL.
//
// Thread-safety: View(), stats() and the accessors are thread-safe; Start,
// Stop and Step are called by one owner (Step also by the member's thread,
// which Start starts and Stop joins; a test calls Step without Start).
// Ownership: the store is not owned and must outlive the member.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_options.h"
#include "cluster/cluster_store.h"
#include "cluster/cluster_view.h"
#include "cluster/prefix_mirror.h"
#include "core/clock.h"
#include "core/mutex.h"

namespace inferd::cluster {

struct ClusterMemberStats {
  std::atomic<uint64_t> store_errors{0};   // calls to the store that failed
  std::atomic<uint64_t> registrations{0};  // leases granted (1 + re-registrations)
  std::atomic<uint64_t> rounds{0};         // Step calls
  // The placements are read by their changes (cluster/prefix_mirror.h):
  std::atomic<uint64_t> placement_full_reads{0};  // reads of every placement
  std::atomic<uint64_t> placement_keys_read{0};   // placements transferred, full reads included
};

class ClusterMember {
 public:
  // What this node publishes now; the member fills in id and addresses.
  using Describe = std::function<NodeRecord()>;
  // Called on the member's thread after each round that read the store
  // (placement repair; server/cluster_service.h).
  using AfterRound = std::function<void(const ClusterView&)>;

  ClusterMember(ClusterOptions options, ClusterStore* store, Clock* clock, Describe describe,
                AfterRound after_round = nullptr);
  ~ClusterMember();
  ClusterMember(const ClusterMember&) = delete;
  ClusterMember& operator=(const ClusterMember&) = delete;

  // Runs one round now (so the view is filled before the node serves), then
  // starts the thread that runs one every options.refresh. Never fails: a
  // store that cannot be reached is retried.
  void Start();
  // Runs the next round now instead of at the end of the refresh interval.
  void Poke();
  // Stops the thread and leaves the cluster (revokes the lease). Idempotent.
  void Stop();
  // One round: register if needed, renew the lease, publish a changed
  // record, read the members.
  void Step();

  std::shared_ptr<const ClusterView> View() const;
  const ClusterMemberStats& stats() const { return stats_; }
  const ClusterOptions& options() const { return options_; }

 private:
  void Run();
  bool EnsureRegistered(const std::string& record);
  void Publish(std::shared_ptr<const ClusterView> view);

  const ClusterOptions options_;
  ClusterStore* const store_;
  Clock* const clock_;
  const Describe describe_;
  const AfterRound after_round_;
  const std::string key_;

  // Touched only by Step (one caller at a time: the thread, or a test).
  int64_t lease_ = 0;
  std::string published_;  // the record last written under lease_
  std::vector<std::string> logged_unreadable_;
  std::shared_ptr<const ClusterView> last_good_;
  PrefixMirror placements_;
  // The next round reads every placement (after a failed round, or a lost lease).
  bool read_all_placements_ = false;

  mutable Mutex view_mu_;
  std::shared_ptr<const ClusterView> view_ TSA_GUARDED_BY(view_mu_);

  Mutex run_mu_;
  CondVar run_cv_;
  bool stop_ TSA_GUARDED_BY(run_mu_) = false;
  bool poked_ TSA_GUARDED_BY(run_mu_) = false;
  std::thread thread_;
  bool left_ = false;
  ClusterMemberStats stats_;
};

}  // namespace inferd::cluster
