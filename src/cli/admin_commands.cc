// `inferd models`, `inferd rollback`, `inferd traffic`, `inferd rollout` and
// `inferd cluster status`: clients of a running server's HTTP API (GET
// /v2/repository/models, POST .../{m}/rollback, GET/PUT/DELETE .../{m}/traffic,
// POST/GET/DELETE .../{m}/rollout, GET /v2/cluster), with the admin token when
// the server requires one (--admin-token-file / --admin-token-env).
#include <rapidjson/document.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "auth/access_policy.h"
#include "bench/http_client.h"
#include "cli/commands.h"
#include "core/byte_size.h"
#include "lifecycle/traffic_policy.h"

namespace inferd::cli {
namespace {

struct AdminFlags {
  std::string url = "http://127.0.0.1:8000";
  bool json = false;
  std::vector<std::string> models;    // `models`: filter; `rollback`: exactly one
  std::string token_file, token_env;  // the admin token, when the server requires one
  std::string cacert;                 // https:// URLs: the CA of the server's certificate ("" = the system's)
};

// Sends one request; prints the server's error and returns nullopt on failure.
std::optional<std::string> Call(const AdminFlags& f, const std::string& method, const std::string& path,
                                const std::string& body = "") {
  const std::string& url = f.url;
  auto token =
      auth::ReadToken(f.token_file, f.token_env, f.token_env.empty() ? nullptr : std::getenv(f.token_env.c_str()));
  if (!token.ok()) {
    std::cerr << "inferd: " << token.status().message() << "\n";
    return std::nullopt;
  }
  std::vector<std::pair<std::string, std::string>> headers;
  if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
  if (!token->empty()) headers.emplace_back("Authorization", "Bearer " + *token);
  auto hp = bench::ParseUrl(url);
  if (!hp.ok()) {
    std::cerr << "inferd: --url: " << hp.status().message() << "\n";
    return std::nullopt;
  }
  std::shared_ptr<bench::TlsClientContext> tls;
  if (bench::IsHttpsUrl(url)) {
    auto ctx = bench::MakeTlsClientContext(f.cacert);
    if (!ctx.ok()) {
      std::cerr << "inferd: --cacert: " << ctx.status().message() << "\n";
      return std::nullopt;
    }
    tls = std::move(*ctx);
  }
  bench::HttpClient client(hp->first, hp->second, tls);
  auto r = client.Request(method, path, body, headers);
  if (!r.ok()) {
    std::cerr << "inferd: cannot reach the server at " << url << ": " << r.status().message() << "\n";
    return std::nullopt;
  }
  if (r->status != 200) {
    rapidjson::Document doc;
    doc.Parse(r->body.data(), r->body.size());
    std::string why = r->body;
    if (!doc.HasParseError() && doc.IsObject() && doc.HasMember("error") && doc["error"].IsString())
      why = doc["error"].GetString();
    std::cerr << "inferd: " << method << " " << path << ": HTTP " << r->status << ": " << why << "\n";
    return std::nullopt;
  }
  return std::move(r->body);
}

// The server's JSON answer as an object, or nullopt with `*rc` set: 1 after
// an error (printed), 0 when --json printed the answer as is.
std::optional<rapidjson::Document> CallJson(const AdminFlags& f, const std::string& method, const std::string& path,
                                            int* rc, const std::string& request_body = "") {
  *rc = 1;
  auto body = Call(f, method, path, request_body);
  if (!body) return std::nullopt;
  if (f.json) {
    std::cout << *body << "\n";
    *rc = 0;
    return std::nullopt;
  }
  rapidjson::Document doc;
  doc.Parse(body->data(), body->size());
  if (doc.HasParseError() || !doc.IsObject()) {
    std::cerr << "inferd: unexpected answer from the server: " << *body << "\n";
    return std::nullopt;
  }
  return doc;
}

std::string Str(const rapidjson::Value& o, const char* key) {
  auto it = o.FindMember(key);
  return it != o.MemberEnd() && it->value.IsString() ? std::string(it->value.GetString()) : std::string();
}

uint64_t U64(const rapidjson::Value& o, const char* key) {
  auto it = o.FindMember(key);
  return it != o.MemberEnd() && it->value.IsUint64() ? it->value.GetUint64() : 0;
}

std::string LabelsText(const rapidjson::Value& o) {
  std::string out;
  auto it = o.FindMember("labels");
  if (it == o.MemberEnd() || !it->value.IsObject()) return out;
  for (const auto& l : it->value.GetObject()) {
    if (!out.empty()) out += ' ';
    out += std::string(l.name.GetString()) + "=" + (l.value.IsString() ? l.value.GetString() : "?");
  }
  return out;
}

// "running 4: step 2 of 4, canary 25%", "rolled back 4: error rate ...".
std::string RolloutText(const rapidjson::Value& r) {
  const std::string phase = Str(r, "phase");
  std::string text = phase + " " + Str(r, "version");
  if (phase == "running") {
    text += ": step " + std::to_string(U64(r, "step")) + " of " + std::to_string(U64(r, "steps")) + ", canary " +
            std::to_string(U64(r, "canary_percent")) + "%";
  }
  const std::string why = Str(r, "reason");
  if (!why.empty()) text += ": " + why;
  return text;
}

int Models(const AdminFlags& f) {
  int rc = 0;
  auto answer = CallJson(f, "GET", "/v2/repository/models", &rc);
  if (!answer) return rc;
  const rapidjson::Document& doc = *answer;
  if (!doc.HasMember("models") || !doc["models"].IsArray()) {
    std::cerr << "inferd: the server's answer has no \"models\" list\n";
    return 1;
  }
  // Names the server does not know are an error (exit 1), not an empty table.
  std::vector<std::string> unknown;
  for (const auto& want : f.models) {
    bool known = false;
    for (const auto& m : doc["models"].GetArray()) known = known || Str(m, "name") == want;
    if (!known) unknown.push_back(want);
  }
  if (!unknown.empty()) {
    std::string list;
    for (const auto& u : unknown) list += (list.empty() ? "'" : ", '") + u + "'";
    std::cerr << "inferd: no model " << list << " on " << f.url << "\n";
    return 1;
  }
  std::printf("%-24s %-11s %-7s %-16s %-22s %10s %9s\n", "MODEL", "STATE", "DEFAULT", "VERSIONS", "LABELS", "MEMORY",
              "IDLE");
  size_t shown = 0, loaded = 0;
  for (const auto& m : doc["models"].GetArray()) {
    const std::string name = Str(m, "name"), state = Str(m, "state");
    if (state == "READY") ++loaded;
    if (!f.models.empty() && std::find(f.models.begin(), f.models.end(), name) == f.models.end()) continue;
    ++shown;
    std::string versions, failed;
    if (m.HasMember("versions") && m["versions"].IsArray()) {
      for (const auto& v : m["versions"].GetArray()) {
        std::string& list = Str(v, "state") == "READY" ? versions : failed;
        list += (list.empty() ? "" : ",") + Str(v, "version");
      }
    }
    if (!failed.empty()) versions += (versions.empty() ? "" : " ") + std::string("failed:") + failed;
    const uint64_t bytes = U64(m, "resident_bytes");
    std::string idle = "-";
    if (m.HasMember("idle_ms") && m["idle_ms"].IsInt64() && m["idle_ms"].GetInt64() >= 0) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(m["idle_ms"].GetInt64()) / 1000);
      idle = buf;
    }
    const bool pinned = m.HasMember("pinned") && m["pinned"].IsBool() && m["pinned"].GetBool();
    std::printf("%-24s %-11s %-7s %-16s %-22s %10s %9s\n", name.c_str(), (state + (pinned ? "*" : "")).c_str(),
                Str(m, "default_version").c_str(), versions.c_str(), LabelsText(m).c_str(),
                bytes ? FormatBytes(bytes).c_str() : "-", idle.c_str());
    const std::string reason = Str(m, "reason");
    if (state != "READY" && !reason.empty()) std::printf("    %s\n", reason.c_str());
    if (m.HasMember("rollout") && m["rollout"].IsObject())
      std::printf("    rollout: %s\n", RolloutText(m["rollout"]).c_str());
  }
  const uint64_t budget = U64(doc, "memory_budget_bytes"), used = U64(doc, "resident_bytes");
  std::printf("\n%zu models (%zu shown), %zu loaded; residency %s; %s resident%s%s\n", size_t{doc["models"].Size()},
              shown, loaded, Str(doc, "residency").c_str(), FormatBytes(used).c_str(), budget ? " of a " : "",
              budget ? (FormatBytes(budget) + " budget").c_str() : "");
  std::printf("(* = pinned)\n");
  return 0;
}

int Rollback(const AdminFlags& f) {
  const std::string& model = f.models.at(0);
  int rc = 0;
  auto answer = CallJson(f, "POST", "/v2/repository/models/" + model + "/rollback", &rc);
  if (!answer) return rc;
  const rapidjson::Document& doc = *answer;
  std::printf("model '%s': rolled back from version %s to version %s (the default now; labels: %s)\n", model.c_str(),
              Str(doc, "rolled_back_from").c_str(), Str(doc, "rolled_back_to").c_str(), LabelsText(doc).c_str());
  return 0;
}

struct TrafficFlags {
  AdminFlags admin;
  std::string split, sticky_key, shadow;
  bool clear = false;
};

// GET (no change asked), DELETE (--clear) or PUT the policy the flags give.
int Traffic(const TrafficFlags& f) {
  const std::string path = "/v2/repository/models/" + f.admin.models.at(0) + "/traffic";
  std::string method = "GET", body;
  if (f.clear) {
    method = "DELETE";
  } else if (!f.split.empty() || !f.sticky_key.empty() || !f.shadow.empty()) {
    std::map<std::string, std::string> params;
    if (!f.split.empty()) params["traffic.split"] = f.split;
    if (!f.sticky_key.empty()) params["traffic.sticky_key"] = f.sticky_key;
    if (!f.shadow.empty()) params["traffic.shadow"] = f.shadow;
    auto policy = TrafficPolicyFromParameters(params);
    if (!policy.ok()) {
      std::cerr << "inferd: " << policy.status().message() << "\n";
      return 2;
    }
    method = "PUT";
    body = TrafficPolicyToJson(**policy);
  }
  auto answer = Call(f.admin, method, path, body);
  if (!answer) return 1;
  std::cout << *answer << "\n";
  return 0;
}

struct RolloutFlags {
  AdminFlags admin;
  std::string to, steps = "5,25,50,100";
  double interval_s = 60, shadow_percent = 0;
  uint64_t min_requests = 100;
  bool abort = false;
};

// Starts (--to), aborts (--abort) or shows a model's rollout.
int Rollout(const RolloutFlags& f) {
  const std::string path = "/v2/repository/models/" + f.admin.models.at(0) + "/rollout";
  std::string method = "GET", body;
  if (f.abort) {
    method = "DELETE";
  } else if (!f.to.empty()) {
    method = "POST";
    body = "{\"version\":\"" + f.to + "\",\"steps\":[" + f.steps +
           "],\"interval_seconds\":" + std::to_string(f.interval_s) +
           ",\"min_requests\":" + std::to_string(f.min_requests) +
           ",\"shadow_percent\":" + std::to_string(f.shadow_percent) + "}";
  }
  auto answer = Call(f.admin, method, path, body);
  if (!answer) return 1;
  std::cout << *answer << "\n";
  return 0;
}

void AddUrlFlags(CLI::App* cmd, AdminFlags* f) {
  cmd->add_option("--url", f->url, "The running inferd server's HTTP address (https://... over TLS)")
      ->capture_default_str();
  cmd->add_option("--cacert", f->cacert, "https:// URLs: PEM file of the CA of the server's certificate")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--json", f->json, "Print the server's JSON answer as is");
  cmd->add_option("--admin-token-file", f->token_file, "File holding the server's admin token (if it requires one)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--admin-token-env", f->token_env, "Environment variable holding the server's admin token");
}

int64_t I64(const rapidjson::Value& o, const char* key) {
  auto it = o.FindMember(key);
  return it != o.MemberEnd() && it->value.IsInt64() ? it->value.GetInt64() : 0;
}

// `inferd cluster status`: the members as the node at --url sees them.
int ClusterStatus(const AdminFlags& f) {
  int rc = 0;
  auto answer = CallJson(f, "GET", "/v2/cluster", &rc);
  if (!answer) return rc;
  const rapidjson::Document& doc = *answer;
  if (!doc.HasMember("nodes") || !doc["nodes"].IsArray()) {
    std::cerr << "inferd: the server's answer has no \"nodes\" list\n";
    return 1;
  }
  const bool reachable =
      doc.HasMember("store_reachable") && doc["store_reachable"].IsBool() && doc["store_reachable"].GetBool();
  std::printf("seen from node %s: %zu nodes, etcd %s", Str(doc, "self").c_str(),
              static_cast<size_t>(doc["nodes"].Size()), reachable ? "reachable" : "UNREACHABLE (last view)");
  if (doc.HasMember("view_age_ms") && doc["view_age_ms"].IsInt64())
    std::printf(", view %.1f s old", static_cast<double>(doc["view_age_ms"].GetInt64()) / 1000.0);
  std::printf("\n%-24s %-6s %-22s %-22s %7s %10s %10s %9s\n", "NODE", "HEALTH", "HTTP", "GRPC", "MODELS", "USED",
              "BUDGET", "IN-FLIGHT");
  for (const auto& n : doc["nodes"].GetArray()) {
    const bool self = n.HasMember("self") && n["self"].IsBool() && n["self"].GetBool();
    const uint64_t budget = U64(n, "budget_bytes");
    std::printf("%-24s %-6s %-22s %-22s %7llu %10s %10s %9lld\n", (Str(n, "id") + (self ? " *" : "")).c_str(),
                Str(n, "health").c_str(), Str(n, "http").c_str(), Str(n, "grpc").empty() ? "-" : Str(n, "grpc").c_str(),
                static_cast<unsigned long long>(U64(n, "models")), FormatBytes(U64(n, "used_bytes")).c_str(),
                budget ? FormatBytes(budget).c_str() : "none", static_cast<long long>(I64(n, "in_flight")));
  }
  std::string copies;
  auto by = doc.FindMember("models_by_copies");
  if (by != doc.MemberEnd() && by->value.IsObject()) {
    for (const auto& c : by->value.GetObject()) {
      if (!copies.empty()) copies += ", ";
      copies += std::string(c.name.GetString()) + (std::string(c.name.GetString()) == "1" ? " copy: " : " copies: ") +
                std::to_string(c.value.IsUint64() ? c.value.GetUint64() : 0);
    }
  }
  std::printf("models: %llu%s%s%s\n", static_cast<unsigned long long>(U64(doc, "models")), copies.empty() ? "" : " (",
              copies.c_str(), copies.empty() ? "" : ")");
  return 0;
}

}  // namespace

void AddAdminCommands(CLI::App& app, std::function<int()>* run) {
  auto models = std::make_shared<AdminFlags>();
  CLI::App* m = app.add_subcommand("models", "List a running server's models: state, versions, labels, memory");
  AddUrlFlags(m, models.get());
  m->add_option("model", models->models, "Only these models (default: all)");
  m->callback([models, run] { *run = [models] { return Models(*models); }; });

  auto rollback = std::make_shared<AdminFlags>();
  CLI::App* r = app.add_subcommand(
      "rollback", "Make a model's previous default version the default again (sets its 'stable' label)");
  AddUrlFlags(r, rollback.get());
  r->add_option("model", rollback->models, "The model to roll back")->required()->expected(1);
  r->callback([rollback, run] { *run = [rollback] { return Rollback(*rollback); }; });

  auto traffic = std::make_shared<TrafficFlags>();
  CLI::App* t = app.add_subcommand(
      "traffic", "Show or set a model's traffic policy (split between versions or labels, sticky key, shadow)");
  AddUrlFlags(t, &traffic->admin);
  t->add_option("model", traffic->admin.models, "The model")->required()->expected(1);
  t->add_option("--split", traffic->split, "target=percent pairs summing to 100 (\"stable=90,canary=10\")");
  t->add_option("--sticky-key", traffic->sticky_key, "Request parameter whose value keeps a user on one version");
  t->add_option("--shadow", traffic->shadow, "target=percent of requests also run there (\"canary=10\")");
  t->add_flag("--clear", traffic->clear, "Drop the run-time policy (the config's applies again)");
  t->callback([traffic, run] { *run = [traffic] { return Traffic(*traffic); }; });

  auto rollout = std::make_shared<RolloutFlags>();
  CLI::App* o = app.add_subcommand(
      "rollout", "Roll a version out step by step, rolled back automatically when it does worse than stable");
  AddUrlFlags(o, &rollout->admin);
  o->add_option("model", rollout->admin.models, "The model")->required()->expected(1);
  o->add_option("--to", rollout->to, "The version to roll out (without --to: show the rollout)");
  o->add_option("--steps", rollout->steps, "Canary percents per step, ending at 100")->capture_default_str();
  o->add_option("--interval", rollout->interval_s, "Seconds per step")->capture_default_str();
  o->add_option("--min-requests", rollout->min_requests, "Canary requests a step needs before it is judged")
      ->capture_default_str();
  o->add_option("--shadow-percent", rollout->shadow_percent,
                "Also mirror this share of stable's requests to the "
                "canary and check that their answers agree")
      ->capture_default_str();
  o->add_flag("--abort", rollout->abort, "End the running rollout (the canary gets 0%)");
  o->callback([rollout, run] { *run = [rollout] { return Rollout(*rollout); }; });

  auto cluster = std::make_shared<AdminFlags>();
  CLI::App* c = app.add_subcommand("cluster", "A cluster of inferd nodes (docs/cluster.md)");
  c->require_subcommand(1);
  CLI::App* cs = c->add_subcommand("status", "The cluster's nodes, their health, models, memory and load");
  AddUrlFlags(cs, cluster.get());
  cs->callback([cluster, run] { *run = [cluster] { return ClusterStatus(*cluster); }; });
}

}  // namespace inferd::cli
