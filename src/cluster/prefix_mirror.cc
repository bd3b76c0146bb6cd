#include "cluster/prefix_mirror.h"

namespace inferd::cluster {

Status PrefixMirror::Refresh(ClusterStore& store, bool full) {
  last_read_full_ = false;
  if (!full && revision_ > 0) {
    INFERD_ASSIGN_OR_RETURN(PrefixChanges c, store.ListChanged(prefix_, revision_));
    keys_read_ += c.changed.size();
    if (c.revision >= revision_) {  // not a store that started again from revision 1
      for (StoredKey& k : c.changed) {
        std::string key = k.key;
        keys_[std::move(key)] = std::move(k);
      }
      if (keys_.size() == static_cast<size_t>(c.total)) {
        revision_ = c.revision;
        return Status::OK();
      }
      // More keys here than in the store: some were deleted. Read them all.
    }
  }
  INFERD_ASSIGN_OR_RETURN(PrefixChanges all, store.ListChanged(prefix_, 0));
  ++full_reads_;
  last_read_full_ = true;
  keys_read_ += all.changed.size();
  keys_.clear();
  for (StoredKey& k : all.changed) {
    std::string key = k.key;
    keys_.emplace(std::move(key), std::move(k));
  }
  revision_ = all.revision;
  return Status::OK();
}

}  // namespace inferd::cluster
