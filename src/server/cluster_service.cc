#include "server/cluster_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "cluster/cluster_status.h"
#include "cluster/placement.h"
#include "manager/model_manager.h"
#include "manager/model_version.h"
#include "metrics/model_stats.h"
#include "metrics/prometheus.h"

namespace inferd {
namespace {

// A model served within this long counts as used: it is kept at two copies.
constexpr auto kRecentUse = std::chrono::minutes(10);
// One repair pass writes at most this many placements (in transactions of
// ClusterStore::kMaxWritesPerApply), and for at most a quarter of the lease
// TTL: the pass runs between the member's lease renewals, and thousands of
// writes at once (after a node died, or etcd came back to models loaded
// meanwhile) would let the lease expire. The rest waits for the next round,
// which then starts at once.
constexpr size_t kMaxPlacementWritesPerPass = 1024;

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return "[" + out + "]";
}

}  // namespace

ClusterService::ClusterService(cluster::ClusterOptions options, cluster::ClusterStore* store, ModelManager* manager,
                               uint64_t memory_budget_bytes, Clock* clock)
    : options_(std::move(options)),
      store_(store),
      manager_(manager),
      memory_budget_bytes_(memory_budget_bytes),
      clock_(clock),
      started_unix_ms_(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count()) {}

ClusterService::~ClusterService() { Leave(); }

Status ClusterService::Join(const std::string& http_address, const std::string& grpc_address) {
  if (joined_.load()) return Status::FailedPrecondition("already joined the cluster");
  options_.http_address = http_address;
  options_.grpc_address = grpc_address;
  if (Status st = cluster::CheckClusterOptions(options_); !st.ok()) return st;
  member_ = std::make_unique<cluster::ClusterMember>(
      options_, store_, clock_, [this] { return Describe(); },
      [this](const cluster::ClusterView& view) { RepairPlacements(view); });
  member_->Start();
  joined_ = true;
  spdlog::info("cluster: node '{}' ({}) in cluster '{}' over etcd {}", options_.node_id, http_address, options_.name,
               options_.endpoints.front());
  return Status::OK();
}

void ClusterService::Leave() {
  if (member_) member_->Stop();
}

cluster::NodeRecord ClusterService::Describe() const {
  cluster::NodeRecord r;
  r.budget_bytes = memory_budget_bytes_;
  r.started_unix_ms = started_unix_ms_;
  std::map<std::string, uint64_t> counts;  // requests per model so far
  for (const auto& v : manager_->ServingVersions()) {
    const ModelStats& st = *v->stats();
    // Demand, not only what was served: requests refused for a full queue or timed out in it count too.
    counts[v->spec().name] +=
        st.success_count() + st.failure_count(FailureReason::kRejected) + st.failure_count(FailureReason::kTimeout);
    r.used_bytes += v->resident_bytes();
    r.in_flight += static_cast<int64_t>(st.pending());
  }
  for (const auto& [name, _] : counts) r.models.push_back(name);
  if (options_.copy_rate > 0) r.rates = MeasureRates(std::move(counts));
  return r;
}

std::map<std::string, uint64_t> ClusterService::MeasureRates(std::map<std::string, uint64_t> counts) const {
  MutexLock l(&rates_mu_);
  const TimePoint now = clock_->Now();
  const double elapsed = std::chrono::duration<double>(now - rates_at_).count();
  if (rates_measured_ && elapsed < 0.25) return rates_;  // too short a window to say anything
  rates_.clear();
  if (rates_measured_) {
    for (const auto& [model, count] : counts) {
      auto before = rate_counts_.find(model);
      if (before == rate_counts_.end() || count < before->second) continue;  // new here, or reloaded
      const double rate = static_cast<double>(count - before->second) / elapsed;
      if (rate >= options_.copy_rate / 2)
        rates_[model] = static_cast<uint64_t>(std::min<double>(std::llround(rate), cluster::kMaxNodeRecordRate));
    }
  }
  rate_counts_ = std::move(counts);
  rates_at_ = now;
  rates_measured_ = true;
  return rates_;
}

std::set<std::string> ClusterService::DownNodes() const {
  MutexLock l(&down_mu_);
  if (down_.empty()) return {};
  const auto view = member_->View();
  const TimePoint now = clock_->Now();
  std::set<std::string> out;
  for (auto it = down_.begin(); it != down_.end();) {
    const cluster::NodeRecord* n = view->Find(it->first);
    // Down until its lease would have expired, or until it comes back as a new process.
    if (now >= it->second.until || (n && n->started_unix_ms != it->second.started_unix_ms)) {
      it = down_.erase(it);
    } else {
      out.insert(it->first);
      ++it;
    }
  }
  return out;
}

void ClusterService::MarkDown(const std::string& id) {
  if (!joined_.load()) return;
  const auto view = member_->View();
  const cluster::NodeRecord* n = view->Find(id);
  bool first = false;
  {
    MutexLock l(&down_mu_);
    Down& d = down_[id];
    first = d.until < clock_->Now();
    d.until = clock_->Now() + options_.lease_ttl;
    d.started_unix_ms = n ? n->started_unix_ms : 0;
  }
  if (first) spdlog::warn("cluster: node '{}' marked down (a forwarded request failed); routing around it", id);
}

// The requests per second a model gets across the cluster: what its live holders published.
uint64_t ClusterService::ClusterRate(const cluster::ClusterView& view, const std::string& model) {
  uint64_t sum = 0;
  for (const cluster::NodeRecord& n : view.nodes)
    if (auto it = n.rates.find(model); it != n.rates.end()) sum += it->second;
  return sum;
}

bool ClusterService::HasCopyElsewhere(const std::string& model) const {
  if (!joined_.load()) return false;
  const auto view = member_->View();
  // The model's home (the placement's first live node) keeps it: were both holders to prefer evicting it, both
  // copies could go at once.
  if (auto it = view->placements.find(model); it != view->placements.end()) {
    for (const std::string& id : it->second.nodes) {
      if (!view->Find(id)) continue;
      if (id == options_.node_id) return false;
      break;
    }
  }
  for (const cluster::NodeRecord& n : view->nodes)
    if (n.id != options_.node_id && std::binary_search(n.models.begin(), n.models.end(), model)) return true;
  return false;
}

ClusterService::Route ClusterService::RouteModel(const std::string& model) const {
  Route r;
  if (!joined_.load() || manager_->Serving(model)) return r;
  const auto view = member_->View();
  const cluster::RoutePlan plan = cluster::PlanRoute(*view, model, DownNodes());
  if (plan.local) return r;
  // A model the repository does not have is answered here (404), not forwarded.
  if (manager_->NotServing(model).code() == StatusCode::kNotFound) return r;
  r.local = false;
  for (const cluster::NodeRecord* n : plan.targets) r.targets.push_back({n->id, n->http_address, n->grpc_address});
  return r;
}

cluster::ConditionalWrite ClusterService::PlacementWrite::ToWrite(const std::string& prefix) const {
  cluster::ConditionalWrite w;
  w.key = prefix + model;
  w.expected = before.mod_revision;
  w.remove = after.nodes.empty();
  if (!w.remove) w.value = cluster::EncodePlacement(after);
  return w;
}

void ClusterService::Placed(const PlacementWrite& w) {
  counters_.placements.fetch_add(1, std::memory_order_relaxed);
  // A copy added: up to two it is a re-replication, beyond two a copy for the request rate.
  if (w.grew)
    (w.after.nodes.size() > cluster::kTargetCopies ? counters_.rate_copies : counters_.re_replications)
        .fetch_add(1, std::memory_order_relaxed);
  std::vector<std::string> dropped;  // released nodes that no longer hold the model
  for (const std::string& n : w.before.released)
    if (!w.after.Released(n) && !w.after.Has(n)) dropped.push_back(n);
  spdlog::info("cluster: model '{}' placed on {} (was {}){}{}{}", w.model, Joined(w.after.nodes),
               Joined(w.before.nodes), w.after.declined.empty() ? "" : "; declined by " + Joined(w.after.declined),
               w.after.released.empty() ? "" : "; released from " + Joined(w.after.released),
               dropped.empty() ? "" : "; the released copy on " + Joined(dropped) + " is gone");
}

bool ClusterService::WritePlacements(std::vector<PlacementWrite> writes, TimePoint stop_writing) {
  // A removal of a placement that does not exist is no write.
  writes.erase(
      std::remove_if(writes.begin(), writes.end(),
                     [](const PlacementWrite& w) { return w.after.nodes.empty() && w.before.mod_revision == 0; }),
      writes.end());
  const std::string prefix = options_.PlacementPrefix();
  for (size_t at = 0; at < writes.size(); at += cluster::ClusterStore::kMaxWritesPerApply) {
    if (clock_->Now() > stop_writing) return false;
    const size_t end = std::min(writes.size(), at + cluster::ClusterStore::kMaxWritesPerApply);
    std::vector<cluster::ConditionalWrite> batch;
    for (size_t i = at; i < end; ++i) batch.push_back(writes[i].ToWrite(prefix));
    Result<bool> applied = store_->ApplyIf(batch);
    if (!applied.ok()) return true;  // the store is unreachable: the next round tries again
    if (*applied) {
      for (size_t i = at; i < end; ++i) Placed(writes[i]);
      continue;
    }
    // Another node changed one of them first: each on its own, to write the others.
    for (size_t i = at; i < end; ++i) {
      Result<bool> one = store_->ApplyIf({batch[i - at]});
      if (!one.ok()) return true;
      if (*one) {
        Placed(writes[i]);
      } else {
        counters_.placement_conflicts.fetch_add(1, std::memory_order_relaxed);  // the next round sees its placement
      }
    }
  }
  return true;
}

void ClusterService::RepairPlacements(const cluster::ClusterView& view) {
  if (!view.store_reachable || !view.registered) return;
  const std::string& self = options_.node_id;
  std::set<std::string> live;
  for (const cluster::NodeRecord& n : view.nodes) live.insert(n.id);
  const std::set<std::string> down = DownNodes();
  const TimePoint now = clock_->Now();
  // The writes are batched into transactions after the pass (one commit each, not one per placement).
  std::vector<PlacementWrite> writes;
  bool cut_short = false;
  const auto write = [&](const std::string& model, const cluster::Placement& before, const cluster::Placement& after,
                         bool grew) {
    if (writes.size() >= kMaxPlacementWritesPerPass) {
      cut_short = true;  // the next round writes it
      return;
    }
    writes.push_back({model, before, after, grew});
  };
  std::map<std::string, TimePoint> held;  // model -> last use
  for (const auto& v : manager_->ServingVersions()) {
    TimePoint& t = held[v->spec().name];
    t = std::max(t, v->last_used());
  }
  const cluster::Placement none;
  for (const auto& [model, last_used] : held) {
    auto it = view.placements.find(model);
    const cluster::Placement& p = it == view.placements.end() ? none : it->second;
    if (p.Released(self) && !p.Has(self)) {
      // Released (the rate no longer needs this copy): evicted once idle; meanwhile routing prefers the placed
      // copies. Once it is gone this node takes itself off `released` (the loop over placements below).
      if (manager_->Evict(model)) {
        counters_.released_copies.fetch_add(1, std::memory_order_relaxed);
        spdlog::info("cluster: model '{}' released here (its request rate no longer needs this copy)", model);
      }
      continue;
    }
    cluster::Placement next;
    for (const std::string& n : p.nodes)
      if (live.count(n)) next.nodes.push_back(n);
    for (const std::string& n : p.declined)
      if (n != self) next.declined.push_back(n);  // holding it now: no longer declined
    for (const std::string& n : p.released)
      if (n != self && live.count(n)) next.released.push_back(n);
    if (!p.Has(self)) {
      // Held here but not placed here: the registry learns of it (after an etcd restart, a first use here, or a
      // request served here while etcd was down), also as a copy beyond the target: every copy is routed to.
      next.nodes.push_back(self);
      write(model, p, next, false);
      continue;
    }
    // The first live node of the placement looks after it (the others would only race it).
    if (next.nodes.empty() || next.nodes.front() != self) continue;
    // Two copies while the model is used; more while its copies each serve more than the copy rate (under
    // on-demand residency: eager nodes hold every model anyway).
    const uint64_t rate = ClusterRate(view, model);
    const bool by_rate = options_.copy_rate > 0 && manager_->on_demand();
    size_t want = now - last_used < kRecentUse ? cluster::kTargetCopies : 0;
    if (by_rate) want = std::max(want, static_cast<size_t>(std::ceil(static_cast<double>(rate) / options_.copy_rate)));
    bool grew = false;
    if (next.nodes.size() < want) {
      std::set<std::string> exclude(next.nodes.begin(), next.nodes.end());
      exclude.insert(next.declined.begin(), next.declined.end());
      const std::string add = cluster::ChooseNode(view, exclude, down);
      if (!add.empty()) {
        next.nodes.push_back(add);
        grew = true;
        if (next.nodes.size() > cluster::kTargetCopies) {
          spdlog::info("cluster: model '{}' gets copy {} on '{}' ({} requests/s across its copies)", model,
                       next.nodes.size(), add, rate);
        }
      }
    } else if (by_rate && next.nodes.size() > cluster::kTargetCopies &&
               static_cast<double>(rate) < 0.75 * options_.copy_rate * static_cast<double>(next.nodes.size() - 1)) {
      // One fewer copy would each serve under 3/4 of the rate: the newest copy goes.
      next.released.push_back(next.nodes.back());
      next.nodes.pop_back();
    }
    // A released node placed again leaves the list (a dead one left it above; one whose copy is gone takes
    // itself off).
    next.released.erase(std::remove_if(next.released.begin(), next.released.end(),
                                       [&next](const std::string& id) { return next.Has(id); }),
                        next.released.end());
    if (next.nodes != p.nodes || next.declined != p.declined || next.released != p.released)
      write(model, p, next, grew);
  }
  for (const auto& [model, p] : view.placements) {
    if (held.count(model)) continue;
    // Loading, or queued behind other loads (thousands at once after a node died): not a failure.
    const bool loading = manager_->ModelStateOf(model).state == ModelState::kLoading || manager_->LoadPending(model);
    if (p.Released(self) && !p.Has(self) && !loading) {
      // The released copy is gone (evicted above, or never finished loading): this node says so itself -- its
      // record alone cannot tell a copy that is gone from one still loading.
      cluster::Placement next = p;
      next.released.erase(std::remove(next.released.begin(), next.released.end(), self), next.released.end());
      write(model, p, next, false);
      continue;
    }
    if (!p.Has(self) || loading) continue;
    auto tried = loaded_for_revision_.find(model);
    // Under eager residency every model this node can load is loaded already: one placed here that is not held
    // failed here, and gives its place up at once.
    const bool can_load = manager_->on_demand();
    if (can_load && (tried == loaded_for_revision_.end() || tried->second != p.mod_revision)) {
      loaded_for_revision_[model] = p.mod_revision;
      counters_.placement_loads.fetch_add(1, std::memory_order_relaxed);
      manager_->LoadInBackground(model, std::nullopt);
      continue;
    }
    // Loaded for this placement before and not held now (evicted, or the load failed): give the place up, and
    // say so, so that this node is not asked again for this model.
    cluster::Placement next = p;
    next.nodes.erase(std::remove(next.nodes.begin(), next.nodes.end(), self), next.nodes.end());
    next.declined.push_back(self);
    write(model, p, next, false);
  }
  if (!WritePlacements(std::move(writes), now + std::chrono::milliseconds(options_.lease_ttl) / 4)) cut_short = true;
  if (cut_short && member_) member_->Poke();  // more to write: the next round at once, after the lease's renewal
}

Result<std::string> ClusterService::StatusJson() const {
  if (!joined_.load()) return Status::Unavailable("this node is joining its cluster; try again");
  return cluster::ClusterStatusJson(*member_->View(), member_->stats(), clock_->Now());
}

void ClusterService::WriteMetrics(PrometheusWriter& w) const {
  if (!joined_.load()) return;
  const auto view = member_->View();
  const auto& s = member_->stats();
  const auto series = [&w](const char* type, const char* name, const char* help, double value) {
    w.Family(name, type, help);
    w.Sample(name, {}, value);
  };
  const auto count = [&series](const char* name, const char* help, uint64_t value) {
    series("counter", name, help, static_cast<double>(value));
  };
  series("gauge", "inferd_cluster_nodes", "Live nodes in this node's view of the cluster",
         static_cast<double>(view->nodes.size()));
  series("gauge", "inferd_cluster_store_reachable", "1 when the last round reached etcd",
         view->store_reachable ? 1.0 : 0.0);
  series("gauge", "inferd_cluster_placed_models", "Models with a placement in this node's view",
         static_cast<double>(view->placements.size()));
  count("inferd_cluster_rounds_total", "Rounds this node ran (renew, publish, read the members and placements)",
        s.rounds.load());
  count("inferd_cluster_store_errors_total", "Calls to etcd that failed", s.store_errors.load());
  count("inferd_cluster_registrations_total", "Leases this node took (1, plus one per re-registration)",
        s.registrations.load());
  count("inferd_cluster_placement_keys_read_total",
        "Placements read from etcd (only those changed since the last round, plus the full reads)",
        s.placement_keys_read.load());
  count("inferd_cluster_placement_full_reads_total",
        "Reads of every placement (the first, every 30 s, after a failed round, or when the changes did not add up)",
        s.placement_full_reads.load());
  const ClusterCounters& c = counters_;
  count("inferd_cluster_forwarded_requests_total", "Requests this node sent to the peer holding their model",
        c.forwarded.load());
  count("inferd_cluster_forward_failures_total", "Forwards a peer refused or dropped (the peer is marked down)",
        c.forward_failures.load());
  count("inferd_cluster_forward_fallbacks_total", "Requests served here after every peer holding the model failed",
        c.forward_fallbacks.load());
  series("counter", "inferd_cluster_forward_seconds_total",
         "Time from sending a forwarded request to its answer's first byte, summed (with the forwarded count: the "
         "mean forward latency)",
         static_cast<double>(c.forward_ns.load()) / 1e9);
  count("inferd_cluster_placements_total", "Placements this node wrote (new or changed)", c.placements.load());
  count("inferd_cluster_placement_conflicts_total", "Placement writes another node changed first (retried)",
        c.placement_conflicts.load());
  count("inferd_cluster_re_replications_total", "Copies this node added to models below two live copies",
        c.re_replications.load());
  count("inferd_cluster_placement_loads_total", "Loads started because a placement named this node",
        c.placement_loads.load());
  count("inferd_cluster_rate_copies_total",
        "Copies this node added beyond two because a model's copies each served more than --cluster-copy-rate",
        c.rate_copies.load());
  count("inferd_cluster_released_copies_total",
        "Copies this node evicted after their placement released them (the request rate fell)",
        c.released_copies.load());
}

}  // namespace inferd
