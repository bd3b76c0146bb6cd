// EtcdStore: the ClusterStore over etcd's v3 gRPC API (KV and Lease), the
// only file that sees gRPC for the cluster (this header is gRPC-free).
//
// Each call has a deadline (`timeout`); a call that cannot reach its endpoint
// moves to the next of `endpoints` for the following calls (etcd forwards
// writes to its leader itself). A lease keep-alive is one round trip on
// etcd's LeaseKeepAlive stream.
//
// Thread-safety: thread-safe (gRPC channels and stubs are).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_store.h"

namespace inferd::cluster {

class EtcdStore final : public ClusterStore {
 public:
  // `endpoints`: host:port, at least one.
  EtcdStore(std::vector<std::string> endpoints, std::chrono::milliseconds timeout);
  ~EtcdStore() override;

  Result<int64_t> GrantLease(std::chrono::seconds ttl) override;
  Status KeepAlive(int64_t lease) override;
  Status RevokeLease(int64_t lease) override;
  Status Put(const std::string& key, const std::string& value, int64_t lease) override;
  Result<bool> ApplyIf(const std::vector<ConditionalWrite>& writes) override;
  Result<std::vector<StoredKey>> List(const std::string& prefix) override;
  Result<PrefixChanges> ListChanged(const std::string& prefix, int64_t after) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace inferd::cluster
