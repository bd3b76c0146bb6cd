// ModelManager's views: the repository index (Triton's states) and the model
// listing of `inferd models`.
#include <algorithm>
#include <set>

#include "manager/model_manager.h"

namespace inferd {

std::vector<ModelManager::VersionRow> ModelManager::VersionRows(const Record& r) {
  std::vector<VersionRow> rows;
  for (const auto& [v, e] : r.versions)
    if (e.ready()) rows.push_back({v, ModelState::kReady, "", &e});
  const size_t ready = rows.size();
  for (const auto& [v, e] : r.versions) {
    if (e.ready() || e.state.state == ModelState::kUnavailable) continue;  // UNAVAILABLE: only still draining
    rows.push_back({v, e.state.state, e.state.state == ModelState::kFailed ? e.failed_why : e.state.reason, &e});
  }
  std::sort(rows.begin() + static_cast<std::ptrdiff_t>(ready), rows.end(),
            [](const VersionRow& a, const VersionRow& b) { return a.version < b.version; });
  return rows;
}

std::set<std::string> ModelManager::KnownNamesLocked(const std::vector<std::string>& repository_names) const {
  std::set<std::string> all(repository_names.begin(), repository_names.end());
  for (const auto& [n, r] : models_) all.insert(n);
  return all;
}

Result<std::vector<RepositoryIndexEntry>> ModelManager::RepositoryIndex(bool ready_only) const {
  INFERD_ASSIGN_OR_RETURN(std::vector<std::string> names, repository_->ListModels());
  ReaderLock g(&mu_);
  std::vector<RepositoryIndexEntry> out;
  for (const auto& n : KnownNamesLocked(names)) {
    auto it = models_.find(n);
    if (it != models_.end() && it->second.Serving()) {
      const Record& r = it->second;
      const std::string note = r.plan_error.empty()
                                   ? ""
                                   : "the repository's config of this model no longer loads (this version keeps "
                                     "serving): " +
                                         r.plan_error;
      for (const VersionRow& row : VersionRows(r)) {
        if (ready_only && row.state != ModelState::kReady) break;  // READY rows come first
        std::string reason = row.reason;
        if (row.state == ModelState::kReady) {
          reason = note;
          const std::string q = Describe(row.entry->version->quantization());  // int8 or why FP32 serves
          if (!q.empty()) reason += (reason.empty() ? "" : "; ") + q;
        }
        out.push_back({n, std::to_string(row.version), WireName(row.state), std::move(reason)});
      }
      continue;
    }
    if (ready_only) continue;
    RepositoryIndexEntry e{n, "", "UNAVAILABLE", "unloaded"};
    if (it != models_.end()) {
      e.state = WireName(it->second.status.state);
      e.reason = it->second.status.reason;
    }
    if (loader_ && loader_->IsPending(n)) e.state = "LOADING";
    out.push_back(std::move(e));
  }
  return out;
}

ModelListing ModelManager::ListModels() const {
  ModelListing out;
  out.residency = options_.residency == Residency::kOnDemand ? "on-demand" : "eager";
  out.budget_bytes = options_.memory_budget_bytes;
  auto names = repository_->ListModels();
  const TimePoint now = clock_->Now();
  ReaderLock g(&mu_);
  for (const auto& n : KnownNamesLocked(names.ok() ? *names : std::vector<std::string>())) {
    ModelListing::Model m;
    m.name = n;
    m.state = "UNAVAILABLE";
    m.reason = "unloaded";
    auto it = models_.find(n);
    if (it != models_.end()) {
      const Record& r = it->second;
      m.reason = r.status.reason;
      m.pinned = r.pinned;
      m.backend = r.backend;
      if (r.Serving()) {
        m.state = "READY";
        m.default_version = std::to_string(r.DefaultVersion());
        m.resident_bytes = r.ResidentBytes();
        m.idle_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - r.LastUsed()).count();
        out.used_bytes += m.resident_bytes;
      } else if (r.status.state == ModelState::kLoading || r.status.state == ModelState::kUnloading) {
        m.state = StateName(r.status.state);
      }
      for (const VersionRow& row : VersionRows(r)) {
        if (row.state == ModelState::kUnloading) continue;  // draining: no longer part of the model
        const VersionEntry* s = row.state == ModelState::kReady ? row.entry : nullptr;
        m.versions.push_back(
            {std::to_string(row.version), WireName(row.state), s ? Describe(s->version->quantization()) : row.reason,
             s ? s->version->resident_bytes() : 0, s ? s->version->size_source() : "", s ? s->load_seconds : 0});
      }
      std::sort(m.versions.begin(), m.versions.end(), [](const auto& a, const auto& b) {
        return std::make_pair(a.version.size(), a.version) < std::make_pair(b.version.size(), b.version);
      });
      for (const auto& [l, v] : r.labels.labels) m.labels.emplace_back(l, std::to_string(v));
    }
    if (m.state != "READY" && loader_ && loader_->IsPending(n)) m.state = "LOADING";
    out.models.push_back(std::move(m));
  }
  return out;
}

}  // namespace inferd
