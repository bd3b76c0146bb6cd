#include "cluster/placement.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <limits>

#include "cluster/cluster_view.h"

namespace inferd::cluster {

bool Placement::Has(const std::string& id) const { return std::find(nodes.begin(), nodes.end(), id) != nodes.end(); }

bool Placement::Released(const std::string& id) const {
  return std::find(released.begin(), released.end(), id) != released.end();
}

std::string EncodePlacement(const Placement& p) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  w.Key("nodes");
  w.StartArray();
  for (const std::string& n : p.nodes) w.String(n.c_str(), static_cast<rapidjson::SizeType>(n.size()));
  w.EndArray();
  const auto list = [&w](const char* key, const std::vector<std::string>& ids) {
    if (ids.empty()) return;
    w.Key(key);
    w.StartArray();
    for (const std::string& n : ids) w.String(n.c_str(), static_cast<rapidjson::SizeType>(n.size()));
    w.EndArray();
  };
  list("declined", p.declined);
  list("released", p.released);
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

Result<Placement> ParsePlacement(std::string_view json) {
  if (json.size() > 64 * 1024) return Status::InvalidArgument("placement: too large");
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseStopWhenDoneFlag>(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("nodes") || !doc["nodes"].IsArray())
    return Status::InvalidArgument("placement: expected {\"nodes\": [...]}");
  Placement p;
  auto read = [](const rapidjson::Value& list, std::vector<std::string>* out) -> Status {
    if (!list.IsArray()) return Status::InvalidArgument("placement: expected a list of node ids");
    if (list.Size() > kMaxPlacementNodes) return Status::InvalidArgument("placement: too many nodes");
    for (const auto& n : list.GetArray()) {
      if (!n.IsString()) return Status::InvalidArgument("placement: node ids are strings");
      std::string id(n.GetString(), n.GetStringLength());
      if (Status st = CheckNodeId(id); !st.ok()) return Status::InvalidArgument("placement: " + st.message());
      if (std::find(out->begin(), out->end(), id) != out->end())
        return Status::InvalidArgument("placement: node '" + id + "' twice");
      out->push_back(std::move(id));
    }
    return Status::OK();
  };
  if (Status st = read(doc["nodes"], &p.nodes); !st.ok()) return st;
  if (doc.HasMember("declined"))
    if (Status st = read(doc["declined"], &p.declined); !st.ok()) return st;
  if (doc.HasMember("released"))
    if (Status st = read(doc["released"], &p.released); !st.ok()) return st;
  return p;
}

std::string ChooseNode(const ClusterView& view, const std::set<std::string>& exclude,
                       const std::set<std::string>& down) {
  const NodeRecord* best = nullptr;
  auto free_bytes = [](const NodeRecord& n) {
    if (n.budget_bytes == 0) return std::numeric_limits<uint64_t>::max();
    return n.budget_bytes > n.used_bytes ? n.budget_bytes - n.used_bytes : 0;
  };
  auto better = [&](const NodeRecord& a, const NodeRecord& b) {
    if (free_bytes(a) != free_bytes(b)) return free_bytes(a) > free_bytes(b);
    if (a.models.size() != b.models.size()) return a.models.size() < b.models.size();
    if (a.in_flight != b.in_flight) return a.in_flight < b.in_flight;
    return a.id < b.id;
  };
  for (const NodeRecord& n : view.nodes) {
    if (exclude.count(n.id) || down.count(n.id)) continue;
    if (best == nullptr || better(n, *best)) best = &n;
  }
  return best ? best->id : std::string();
}

RoutePlan PlanRoute(const ClusterView& view, const std::string& model, const std::set<std::string>& down) {
  RoutePlan plan;
  auto placed = view.placements.find(model);
  const Placement* p = placed == view.placements.end() ? nullptr : &placed->second;
  if (p && p->Has(view.self)) {
    plan.local = true;
    return plan;
  }
  std::vector<const NodeRecord*> holding, loading, releasing;
  for (const NodeRecord& n : view.nodes) {
    if (n.id == view.self || down.count(n.id)) continue;
    if (std::binary_search(n.models.begin(), n.models.end(), model)) {
      (p && p->Released(n.id) ? releasing : holding).push_back(&n);
    } else if (p && p->Has(n.id)) {
      loading.push_back(&n);
    }
  }
  std::stable_sort(holding.begin(), holding.end(),
                   [](const NodeRecord* a, const NodeRecord* b) { return a->in_flight < b->in_flight; });
  plan.targets = holding;
  plan.targets.insert(plan.targets.end(), loading.begin(), loading.end());
  plan.targets.insert(plan.targets.end(), releasing.begin(), releasing.end());
  if (!plan.targets.empty()) return plan;
  // Nobody live holds it or is placed to: its new home takes it.
  const NodeRecord* home = view.Find(ChooseNode(view, {}, down));
  if (home == nullptr || home->id == view.self) {
    plan.local = true;
  } else {
    plan.targets.push_back(home);
  }
  return plan;
}

}  // namespace inferd::cluster
