// ClusterStore: the consistent key-value store a cluster of inferd nodes
// shares (etcd in production: cluster/etcd/etcd_store.h; a fake in unit
// tests: testing/fake_cluster_store.h). Keys carry revisions and may be
// attached to a lease that deletes them when it is not kept alive.
//
// Only what the cluster needs: leases, puts, prefix listings (whole, or the
// keys changed since a revision), and
// compare-and-swap on keys' modification revisions (ApplyIf, several keys in
// one transaction), so two nodes never both think they won a placement.
//
// Thread-safety: implementations are thread-safe.
// Errors: UNAVAILABLE or DEADLINE_EXCEEDED when the store cannot be reached
// (the caller keeps its last view and retries); NOT_FOUND from KeepAlive when
// the lease is gone.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace inferd::cluster {

struct StoredKey {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;  // compare-and-swap token
  int64_t lease = 0;         // 0 = none
};

// One write of ClusterStore::ApplyIf: `value` put at `key` (`remove`: the
// key deleted) if the key's modification revision is `expected` (0: absent).
struct ConditionalWrite {
  std::string key;
  std::string value;
  int64_t expected = 0;
  bool remove = false;
};

// What ClusterStore::ListChanged read, at one revision of the store.
struct PrefixChanges {
  std::vector<StoredKey> changed;  // the keys modified after the revision asked, in key order
  int64_t total = 0;               // how many keys the prefix has in all
  int64_t revision = 0;            // the store's revision at the read
};

class ClusterStore {
 public:
  virtual ~ClusterStore() = default;

  // A lease that expires `ttl` after its last keep-alive; its id.
  virtual Result<int64_t> GrantLease(std::chrono::seconds ttl) = 0;
  // Renews the lease; NOT_FOUND when it expired or was revoked (its keys are gone).
  virtual Status KeepAlive(int64_t lease) = 0;
  // Ends the lease now: its keys are deleted.
  virtual Status RevokeLease(int64_t lease) = 0;

  // Writes `key` (attached to `lease` unless 0).
  virtual Status Put(const std::string& key, const std::string& value, int64_t lease) = 0;
  // Every write of `writes` or none, in one transaction (one round trip, one
  // commit): true when every key's revision matched and all were applied,
  // false when any differed (nothing applied). At most kMaxWritesPerApply.
  virtual Result<bool> ApplyIf(const std::vector<ConditionalWrite>& writes) = 0;
  // etcd's default --max-txn-ops is 128 (compares and operations each).
  static constexpr size_t kMaxWritesPerApply = 64;
  // Every key that starts with `prefix`, in key order.
  virtual Result<std::vector<StoredKey>> List(const std::string& prefix) = 0;
  // The keys that start with `prefix` and were modified after revision
  // `after` (every one for 0), with the prefix's key count and the store's
  // revision, in one read: what keeps a copy of a large prefix current
  // without reading it whole (cluster/prefix_mirror.h).
  virtual Result<PrefixChanges> ListChanged(const std::string& prefix, int64_t after) = 0;
};

}  // namespace inferd::cluster
