// FakeClusterStore: an in-memory ClusterStore for unit tests, with the
// failures a test needs to cause: the store unreachable (SetReachable) and a
// lease that expires (ExpireLease). Integration tests use a real etcd.
//
// Thread-safety: thread-safe.
#pragma once

#include <map>
#include <set>

#include "cluster/cluster_store.h"
#include "core/mutex.h"

namespace inferd::testing {

class FakeClusterStore final : public cluster::ClusterStore {
 public:
  void SetReachable(bool reachable) {
    MutexLock l(&mu_);
    reachable_ = reachable;
  }
  // The lease expires now: its keys are deleted.
  void ExpireLease(int64_t lease) {
    MutexLock l(&mu_);
    DropLeaseLocked(lease);
  }
  // Forgets everything (an etcd restarted without its data: its revision starts again too).
  void Wipe() {
    MutexLock l(&mu_);
    keys_.clear();
    leases_.clear();
    revision_ = 0;
  }
  // Deletes `key` (by hand, or a bad etcd write: no lease).
  void Remove(const std::string& key) {
    MutexLock l(&mu_);
    keys_.erase(key);
    ++revision_;
  }
  void PutRaw(const std::string& key, const std::string& value) {
    MutexLock l(&mu_);
    Write(key, value, 0);
  }
  size_t calls() const {
    MutexLock l(&mu_);
    return calls_;
  }

  Result<int64_t> GrantLease(std::chrono::seconds) override {
    MutexLock l(&mu_);
    if (Status st = Reach(); !st.ok()) return st;
    leases_.insert(++next_lease_);
    return next_lease_;
  }
  Status KeepAlive(int64_t lease) override {
    MutexLock l(&mu_);
    if (Status st = Reach(); !st.ok()) return st;
    return leases_.count(lease) ? Status::OK() : Status::NotFound("lease expired");
  }
  Status RevokeLease(int64_t lease) override {
    MutexLock l(&mu_);
    if (Status st = Reach(); !st.ok()) return st;
    DropLeaseLocked(lease);
    return Status::OK();
  }
  Status Put(const std::string& key, const std::string& value, int64_t lease) override {
    MutexLock l(&mu_);
    if (Status st = Reach(); !st.ok()) return st;
    if (lease != 0 && !leases_.count(lease)) return Status::NotFound("lease not found");
    Write(key, value, lease);
    return Status::OK();
  }
  Result<bool> ApplyIf(const std::vector<cluster::ConditionalWrite>& writes) override {
    MutexLock l(&mu_);
    if (Status st = Reach(); !st.ok()) return st;
    for (const auto& w : writes) {
      auto it = keys_.find(w.key);
      if ((it == keys_.end() ? 0 : it->second.mod_revision) != w.expected) return false;
    }
    for (const auto& w : writes) {
      if (w.remove) {
        keys_.erase(w.key);
        ++revision_;
      } else {
        Write(w.key, w.value, 0);
      }
    }
    return true;
  }
  Result<std::vector<cluster::StoredKey>> List(const std::string& prefix) override {
    MutexLock l(&mu_);
    if (Status st = Reach(); !st.ok()) return st;
    std::vector<cluster::StoredKey> out;
    for (auto it = keys_.lower_bound(prefix); it != keys_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
         ++it)
      out.push_back(it->second);
    return out;
  }
  Result<cluster::PrefixChanges> ListChanged(const std::string& prefix, int64_t after) override {
    MutexLock l(&mu_);
    if (Status st = Reach(); !st.ok()) return st;
    cluster::PrefixChanges out;
    for (auto it = keys_.lower_bound(prefix); it != keys_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
         ++it) {
      ++out.total;
      if (it->second.mod_revision > after) out.changed.push_back(it->second);
    }
    out.revision = revision_;
    return out;
  }

 private:
  Status Reach() TSA_REQUIRES(mu_) {
    ++calls_;
    return reachable_ ? Status::OK() : Status::Unavailable("fake store unreachable");
  }
  void Write(const std::string& key, const std::string& value, int64_t lease) TSA_REQUIRES(mu_) {
    cluster::StoredKey& k = keys_[key];
    ++revision_;
    if (k.create_revision == 0) k.create_revision = revision_;
    k.key = key;
    k.value = value;
    k.mod_revision = revision_;
    k.lease = lease;
  }
  void DropLeaseLocked(int64_t lease) TSA_REQUIRES(mu_) {
    leases_.erase(lease);
    const size_t before = keys_.size();
    for (auto it = keys_.begin(); it != keys_.end();) it = it->second.lease == lease ? keys_.erase(it) : std::next(it);
    if (keys_.size() != before) ++revision_;  // etcd's deletes take a revision too
  }

  mutable Mutex mu_;
  bool reachable_ TSA_GUARDED_BY(mu_) = true;
  int64_t revision_ TSA_GUARDED_BY(mu_) = 0;
  int64_t next_lease_ TSA_GUARDED_BY(mu_) = 0x100;
  size_t calls_ TSA_GUARDED_BY(mu_) = 0;
  std::set<int64_t> leases_ TSA_GUARDED_BY(mu_);
  std::map<std::string, cluster::StoredKey> keys_ TSA_GUARDED_BY(mu_);
};

}  // namespace inferd::testing
