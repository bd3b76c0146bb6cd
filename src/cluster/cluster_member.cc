#include "cluster/cluster_member.h"

#include <spdlog/spdlog.h>

#include <algorithm>

namespace inferd::cluster {
namespace {

// How often a node reads every placement even when their changes add up.
constexpr std::chrono::seconds kPlacementFullReadInterval{30};

}  // namespace

ClusterMember::ClusterMember(ClusterOptions options, ClusterStore* store, Clock* clock, Describe describe,
                             AfterRound after_round)
    : options_(std::move(options)),
      store_(store),
      clock_(clock),
      describe_(std::move(describe)),
      after_round_(std::move(after_round)),
      key_(options_.NodesPrefix() + options_.node_id),
      placements_(options_.PlacementPrefix()) {
  auto empty = std::make_shared<ClusterView>();
  empty->self = options_.node_id;
  MutexLock l(&view_mu_);
  view_ = std::move(empty);
}

ClusterMember::~ClusterMember() { Stop(); }

void ClusterMember::Start() {
  Step();
  thread_ = std::thread([this] { Run(); });
}

void ClusterMember::Run() {
  MutexLock l(&run_mu_);
  while (!stop_) {
    if (!poked_) run_cv_.WaitForReal(&run_mu_, options_.refresh);
    if (stop_) break;
    poked_ = false;
    l.Unlock();
    Step();
    l.Lock();
  }
}

void ClusterMember::Poke() {
  {
    MutexLock l(&run_mu_);
    poked_ = true;
  }
  run_cv_.NotifyAll();
}

void ClusterMember::Stop() {
  {
    MutexLock l(&run_mu_);
    stop_ = true;
  }
  run_cv_.NotifyAll();
  if (thread_.joinable()) thread_.join();
  if (left_) return;
  left_ = true;
  if (lease_ != 0) {
    if (Status st = store_->RevokeLease(lease_); st.ok()) {
      spdlog::info("cluster: node '{}' left (lease revoked)", options_.node_id);
    } else {
      stats_.store_errors.fetch_add(1, std::memory_order_relaxed);
      spdlog::warn("cluster: node '{}' could not revoke its lease ({}); peers drop it when the lease expires",
                   options_.node_id, st.message());
    }
    lease_ = 0;
  }
}

bool ClusterMember::EnsureRegistered(const std::string& record) {
  if (lease_ != 0) {
    Status st = store_->KeepAlive(lease_);
    if (st.code() == StatusCode::kNotFound) {
      spdlog::warn(
          "cluster: node '{}' lost its lease (the store was unreachable longer than the TTL, or lost "
          "its data); registering again",
          options_.node_id);
      lease_ = 0;
      published_.clear();
      read_all_placements_ = true;  // a store that lost its data may have counted back up to our revision
    } else if (!st.ok()) {
      stats_.store_errors.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
  }
  if (lease_ == 0) {
    auto lease = store_->GrantLease(options_.lease_ttl);
    if (!lease.ok()) {
      stats_.store_errors.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    lease_ = *lease;
    stats_.registrations.fetch_add(1, std::memory_order_relaxed);
  }
  if (record != published_) {
    if (Status st = store_->Put(key_, record, lease_); !st.ok()) {
      stats_.store_errors.fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    if (published_.empty()) {
      spdlog::info("cluster: node '{}' registered (lease {:x}, TTL {} s)", options_.node_id, lease_,
                   options_.lease_ttl.count());
    }
    published_ = record;
  }
  return true;
}

void ClusterMember::Step() {
  stats_.rounds.fetch_add(1, std::memory_order_relaxed);
  NodeRecord self = describe_();
  self.id = options_.node_id;
  self.http_address = options_.http_address;
  self.grpc_address = options_.grpc_address;
  std::sort(self.models.begin(), self.models.end());
  const bool registered = EnsureRegistered(EncodeNodeRecord(self));
  auto listed =
      registered ? store_->List(options_.NodesPrefix()) : Result<std::vector<StoredKey>>(std::vector<StoredKey>{});
  // Every placement again now and then: a safety net under the mirror's own checks.
  const uint64_t full_every = std::max<uint64_t>(
      1, static_cast<uint64_t>(kPlacementFullReadInterval / std::max(options_.refresh, std::chrono::milliseconds(1))));
  const bool full = read_all_placements_ || stats_.rounds.load() % full_every == 0;
  const Status placed = registered && listed.ok() ? placements_.Refresh(*store_, full) : Status::OK();
  read_all_placements_ = !registered || !listed.ok() || !placed.ok();
  stats_.placement_full_reads.store(placements_.full_reads(), std::memory_order_relaxed);
  stats_.placement_keys_read.store(placements_.keys_read(), std::memory_order_relaxed);
  if (read_all_placements_) {
    if (registered) stats_.store_errors.fetch_add(1, std::memory_order_relaxed);
    // Unreachable: keep the last view (stale), say so.
    auto stale = std::make_shared<ClusterView>(last_good_ ? *last_good_ : ClusterView{});
    stale->self = options_.node_id;
    stale->store_reachable = false;
    stale->registered = registered;
    const bool was_reachable = View()->store_reachable;
    if (was_reachable || stats_.rounds.load() == 1)
      spdlog::warn("cluster: etcd unreachable at {}: serving by the last view",
                   options_.endpoints.empty() ? std::string("?") : options_.endpoints.front());
    Publish(std::move(stale));
    return;
  }
  auto view = std::make_shared<ClusterView>();
  view->self = options_.node_id;
  view->store_reachable = true;
  view->registered = true;
  view->read_at = clock_->Now();
  for (const StoredKey& k : *listed) {
    auto r = ParseNodeRecord(k.value);
    if (!r.ok() || options_.NodesPrefix() + r->id != k.key) {
      view->unreadable.push_back(k.key);
      if (std::find(logged_unreadable_.begin(), logged_unreadable_.end(), k.key) == logged_unreadable_.end()) {
        logged_unreadable_.push_back(k.key);
        spdlog::warn("cluster: ignoring the record at {}: {}", k.key,
                     r.ok() ? std::string("its id does not match its key") : r.status().message());
      }
      continue;
    }
    view->nodes.push_back(std::move(*r));
  }
  for (const auto& [key, k] : placements_.keys()) {
    const std::string model = k.key.substr(options_.PlacementPrefix().size());
    // Unchanged since the last view: its parsed placement again (10,000 models: no 10,000 parses a round);
    // after a full read (perhaps of a store that started again), every one parsed.
    if (last_good_ && !placements_.last_read_full()) {
      auto it = last_good_->placements.find(model);
      if (it != last_good_->placements.end() && it->second.mod_revision == k.mod_revision) {
        view->placements.emplace(model, it->second);
        continue;
      }
    }
    auto p = ParsePlacement(k.value);
    if (!p.ok() || model.empty()) {
      view->unreadable.push_back(k.key);
      if (std::find(logged_unreadable_.begin(), logged_unreadable_.end(), k.key) == logged_unreadable_.end()) {
        logged_unreadable_.push_back(k.key);
        spdlog::warn("cluster: ignoring the placement at {}: {}", k.key,
                     p.ok() ? std::string("no model name") : p.status().message());
      }
      continue;
    }
    p->mod_revision = k.mod_revision;
    view->placements.emplace(model, std::move(*p));
  }
  // Our own key deleted under a live lease (by hand, say): write it again next round.
  if (std::none_of(view->nodes.begin(), view->nodes.end(),
                   [&](const NodeRecord& n) { return n.id == options_.node_id; }))
    published_.clear();
  std::sort(view->nodes.begin(), view->nodes.end(),
            [](const NodeRecord& a, const NodeRecord& b) { return a.id < b.id; });
  // Membership changes are lifecycle events: log who joined and who left.
  const auto before = View();
  for (const NodeRecord& n : view->nodes)
    if (!before->Find(n.id) && n.id != options_.node_id)
      spdlog::info("cluster: node '{}' joined ({})", n.id, n.http_address);
  for (const NodeRecord& n : before->nodes)
    if (!view->Find(n.id) && n.id != options_.node_id) spdlog::info("cluster: node '{}' left", n.id);
  if (!before->store_reachable && stats_.rounds.load() > 1) spdlog::info("cluster: etcd reachable again");
  last_good_ = view;
  Publish(view);
  if (after_round_) after_round_(*view);
}

void ClusterMember::Publish(std::shared_ptr<const ClusterView> view) {
  MutexLock l(&view_mu_);
  view_ = std::move(view);
}

std::shared_ptr<const ClusterView> ClusterMember::View() const {
  MutexLock l(&view_mu_);
  return view_;
}

}  // namespace inferd::cluster
