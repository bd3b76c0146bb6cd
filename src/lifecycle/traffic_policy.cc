#include "lifecycle/traffic_policy.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cmath>
#include <set>

namespace inferd {
namespace {

Status Bad(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("traffic policy: '" + field + "' " + why);
}

uint64_t Fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// splitmix64's finaliser: spreads FNV's bits.
uint64_t Mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform draw in (0, 1) from a key and a salt, the same on every run.
double KeyDraw(std::string_view key, std::string_view salt) {
  const uint64_t h = Mix(Fnv1a(salt, Fnv1a(key) ^ 0x9e3779b97f4a7c15ull));
  return (static_cast<double>(h >> 11) + 0.5) / 9007199254740992.0;  // 2^53
}

Status CheckSplit(const std::vector<TrafficSplit>& split, const std::string& field) {
  if (split.empty()) return Status::OK();
  std::set<std::string> seen;
  uint64_t total = 0;
  for (const auto& s : split) {
    if (s.target.empty()) return Bad(field, "has an empty target");
    if (!seen.insert(s.target).second) return Bad(field, "names '" + s.target + "' twice");
    total += s.weight;
  }
  if (total != 100) return Bad(field, "weights sum to " + std::to_string(total) + ", not 100");
  return Status::OK();
}

Status CheckShadow(const TrafficPolicy& p, const std::string& field) {
  if (p.shadow_target.empty()) return Status::OK();
  if (!(p.shadow_percent >= 0 && p.shadow_percent <= 100))
    return Bad(field, "percent must be in 0..100, not " + std::to_string(p.shadow_percent));
  return Status::OK();
}

Result<uint32_t> ParseWeight(std::string_view text, const std::string& field) {
  if (text.empty() || text.size() > 3) return Bad(field, "weight '" + std::string(text) + "' is not 0..100");
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return Bad(field, "weight '" + std::string(text) + "' is not 0..100");
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v > 100) return Bad(field, "weight '" + std::string(text) + "' is not 0..100");
  return v;
}

// "a=90,b=10" -> pairs.
Result<std::vector<std::pair<std::string, std::string>>> ParsePairs(std::string_view text, const std::string& field) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(at, comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      return Bad(field, "wants target=percent pairs separated by commas, not '" + std::string(item) + "'");
    out.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    at = comma + 1;
  }
  return out;
}

}  // namespace

Result<TrafficPolicy> ParseTrafficPolicyJson(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::InvalidArgument("traffic policy: not a JSON object");
  TrafficPolicy p;
  for (const auto& m : doc.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    const auto& v = m.value;
    if (key == "split") {
      if (!v.IsObject()) return Bad("split", "must be an object of target: weight");
      for (const auto& e : v.GetObject()) {
        if (!e.value.IsUint() || e.value.GetUint() > 100)
          return Bad("split", "weight of '" + std::string(e.name.GetString()) + "' must be an integer 0..100");
        p.split.push_back({std::string(e.name.GetString(), e.name.GetStringLength()), e.value.GetUint()});
      }
    } else if (key == "sticky_key") {
      if (!v.IsString()) return Bad("sticky_key", "must be a string");
      p.sticky_key.assign(v.GetString(), v.GetStringLength());
    } else if (key == "shadow") {
      if (v.IsNull()) continue;
      if (!v.IsObject()) return Bad("shadow", "must be {\"target\": ..., \"percent\": ...}");
      for (const auto& e : v.GetObject()) {
        const std::string k(e.name.GetString(), e.name.GetStringLength());
        if (k == "target" && e.value.IsString() && e.value.GetStringLength() > 0) {
          p.shadow_target.assign(e.value.GetString(), e.value.GetStringLength());
        } else if (k == "percent" && e.value.IsNumber()) {
          p.shadow_percent = e.value.GetDouble();
        } else {
          return Bad("shadow." + k, "is not a non-empty target string or a percent number");
        }
      }
      if (p.shadow_target.empty()) return Bad("shadow", "needs a target");
    } else {
      return Bad(key, "is not a field (split, sticky_key, shadow)");
    }
  }
  INFERD_RETURN_IF_ERROR(CheckSplit(p.split, "split"));
  INFERD_RETURN_IF_ERROR(CheckShadow(p, "shadow"));
  return p;
}

std::string TrafficAnswerJson(const std::string& model, const std::string& source, const std::string& policy_json) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("model");
  w.String(model.c_str(), static_cast<rapidjson::SizeType>(model.size()));
  w.Key("source");
  w.String(source.c_str(), static_cast<rapidjson::SizeType>(source.size()));
  w.Key("policy");
  w.RawValue(policy_json.c_str(), policy_json.size(), rapidjson::kObjectType);
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

std::string TrafficPolicyToJson(const TrafficPolicy& p) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("split");
  w.StartObject();
  for (const auto& s : p.split) {
    w.Key(s.target.c_str(), static_cast<rapidjson::SizeType>(s.target.size()));
    w.Uint(s.weight);
  }
  w.EndObject();
  w.Key("sticky_key");
  w.String(p.sticky_key.c_str(), static_cast<rapidjson::SizeType>(p.sticky_key.size()));
  w.Key("shadow");
  if (p.shadow_target.empty()) {
    w.Null();
  } else {
    w.StartObject();
    w.Key("target");
    w.String(p.shadow_target.c_str(), static_cast<rapidjson::SizeType>(p.shadow_target.size()));
    w.Key("percent");
    w.Double(p.shadow_percent);
    w.EndObject();
  }
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

Result<std::optional<TrafficPolicy>> TrafficPolicyFromParameters(const std::map<std::string, std::string>& params) {
  TrafficPolicy p;
  bool any = false;
  if (auto it = params.find("traffic.split"); it != params.end()) {
    any = true;
    INFERD_ASSIGN_OR_RETURN(auto pairs, ParsePairs(it->second, "parameters.traffic.split"));
    for (auto& [target, weight] : pairs) {
      INFERD_ASSIGN_OR_RETURN(uint32_t w, ParseWeight(weight, "parameters.traffic.split"));
      p.split.push_back({target, w});
    }
    INFERD_RETURN_IF_ERROR(CheckSplit(p.split, "parameters.traffic.split"));
  }
  if (auto it = params.find("traffic.sticky_key"); it != params.end()) {
    any = true;
    p.sticky_key = it->second;
  }
  if (auto it = params.find("traffic.shadow"); it != params.end()) {
    any = true;
    INFERD_ASSIGN_OR_RETURN(auto pairs, ParsePairs(it->second, "parameters.traffic.shadow"));
    if (pairs.size() != 1) return Bad("parameters.traffic.shadow", "names one target=percent");
    p.shadow_target = pairs[0].first;
    INFERD_ASSIGN_OR_RETURN(uint32_t pct, ParseWeight(pairs[0].second, "parameters.traffic.shadow"));
    p.shadow_percent = pct;
  }
  if (!any) return std::optional<TrafficPolicy>();
  return std::optional<TrafficPolicy>(std::move(p));
}

std::optional<size_t> PickSplit(const TrafficPolicy& p, const std::vector<bool>& serving,
                                std::optional<std::string_view> key, double random) {
  std::optional<size_t> best;
  if (key) {
    // Weighted rendezvous hashing: the highest weight / -ln(draw) wins.
    double best_score = 0;
    for (size_t i = 0; i < p.split.size(); ++i) {
      if (i >= serving.size() || !serving[i] || p.split[i].weight == 0) continue;
      const double score = static_cast<double>(p.split[i].weight) / -std::log(KeyDraw(*key, p.split[i].target));
      if (!best || score > best_score) {
        best = i;
        best_score = score;
      }
    }
    return best;
  }
  uint64_t total = 0;
  for (size_t i = 0; i < p.split.size(); ++i)
    if (i < serving.size() && serving[i]) total += p.split[i].weight;
  if (total == 0) return std::nullopt;
  double at = random * static_cast<double>(total);
  for (size_t i = 0; i < p.split.size(); ++i) {
    if (i >= serving.size() || !serving[i] || p.split[i].weight == 0) continue;
    best = i;
    if (at < p.split[i].weight) break;
    at -= p.split[i].weight;
  }
  return best;
}

bool PickShadow(const TrafficPolicy& p, std::optional<std::string_view> key, double random) {
  if (p.shadow_target.empty() || p.shadow_percent <= 0) return false;
  const double draw = key ? KeyDraw(*key, "\x01shadow") : random;
  return draw * 100.0 < p.shadow_percent;
}

}  // namespace inferd
