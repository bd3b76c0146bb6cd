// PrefixMirror: a copy of the keys under one prefix of the ClusterStore (the
// placements: one key per model, tens of thousands of them), kept current by
// reading only the keys modified since the last read. etcd's Range with
// min_mod_revision leaves the others out and still counts them all, so a key
// deleted since (the copy holds more keys than the store counts) is noticed
// too; that, a store whose revision went back (restarted without its data),
// and a caller's `full` read every key again.
//
// Thread-safety: not thread-safe; one owner (the member's thread).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "cluster/cluster_store.h"

namespace inferd::cluster {

class PrefixMirror {
 public:
  explicit PrefixMirror(std::string prefix) : prefix_(std::move(prefix)) {}

  // Brings the copy up to date: one read of the changes, or of every key
  // (`full`, the first time, or when the changes do not add up). On an error
  // the copy may hold some of the changes; the next Refresh reads them again.
  Status Refresh(ClusterStore& store, bool full);

  // The keys, by key.
  const std::map<std::string, StoredKey>& keys() const { return keys_; }
  // The store's revision at the last good read (0: none yet).
  int64_t revision() const { return revision_; }
  uint64_t full_reads() const { return full_reads_; }
  bool last_read_full() const { return last_read_full_; }
  uint64_t keys_read() const { return keys_read_; }  // keys transferred, full reads included

 private:
  const std::string prefix_;
  std::map<std::string, StoredKey> keys_;
  int64_t revision_ = 0;
  uint64_t full_reads_ = 0;
  uint64_t keys_read_ = 0;
  bool last_read_full_ = false;
};

}  // namespace inferd::cluster
