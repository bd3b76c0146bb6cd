#include "cluster/cluster_status.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <map>

namespace inferd::cluster {
namespace {

void Str(rapidjson::Writer<rapidjson::StringBuffer>& w, const char* key, const std::string& v) {
  w.Key(key);
  w.String(v.c_str(), static_cast<rapidjson::SizeType>(v.size()));
}

}  // namespace

std::string ClusterStatusJson(const ClusterView& view, const ClusterMemberStats& stats, TimePoint now) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  w.StartObject();
  Str(w, "self", view.self);
  w.Key("store_reachable");
  w.Bool(view.store_reachable);
  w.Key("registered");
  w.Bool(view.registered);
  w.Key("view_age_ms");
  if (view.read_at == TimePoint{}) {
    w.Null();
  } else {
    w.Int64(std::chrono::duration_cast<std::chrono::milliseconds>(now - view.read_at).count());
  }
  w.Key("store_errors");
  w.Uint64(stats.store_errors.load(std::memory_order_relaxed));
  w.Key("registrations");
  w.Uint64(stats.registrations.load(std::memory_order_relaxed));
  std::map<std::string, int> copies;
  w.Key("nodes");
  w.StartArray();
  for (const NodeRecord& n : view.nodes) {
    w.StartObject();
    Str(w, "id", n.id);
    Str(w, "http", n.http_address);
    if (!n.grpc_address.empty()) Str(w, "grpc", n.grpc_address);
    w.Key("self");
    w.Bool(n.id == view.self);
    Str(w, "health", "up");
    w.Key("models");
    w.Uint64(n.models.size());
    w.Key("budget_bytes");
    w.Uint64(n.budget_bytes);
    w.Key("used_bytes");
    w.Uint64(n.used_bytes);
    w.Key("in_flight");
    w.Int64(n.in_flight);
    w.Key("started_unix_ms");
    w.Int64(n.started_unix_ms);
    w.EndObject();
    for (const std::string& m : n.models) ++copies[m];
  }
  w.EndArray();
  // How many models have 1, 2, ... copies across the live nodes.
  std::map<int, uint64_t> by_copies;
  for (const auto& [model, c] : copies) ++by_copies[c];
  w.Key("models");
  w.Uint64(copies.size());
  w.Key("models_by_copies");
  w.StartObject();
  for (const auto& [c, count] : by_copies) {
    const std::string key = std::to_string(c);
    w.Key(key.c_str(), static_cast<rapidjson::SizeType>(key.size()));
    w.Uint64(count);
  }
  w.EndObject();
  w.Key("unreadable_records");
  w.StartArray();
  for (const std::string& k : view.unreadable) w.String(k.c_str(), static_cast<rapidjson::SizeType>(k.size()));
  w.EndArray();
  w.EndObject();
  return std::string(buf.GetString(), buf.GetSize());
}

}  // namespace inferd::cluster
