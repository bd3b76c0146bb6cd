#include "server/rollout_controller.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>

#include <cmath>

namespace inferd {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

// The q-quantile of the observations between two cumulative snapshots,
// interpolated linearly within its bucket.
double Quantile(const Histogram::Snapshot& before, const Histogram::Snapshot& now, double q) {
  const size_t n = now.cumulative.size();
  if (n == 0 || before.cumulative.size() != n) return 0;
  const uint64_t total = now.cumulative[n - 1] - before.cumulative[n - 1];
  if (total == 0) return 0;
  const double rank = q * static_cast<double>(total);
  uint64_t below = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t upto = now.cumulative[i] - before.cumulative[i];
    if (static_cast<double>(upto) >= rank) {
      const double lo = i == 0 ? 0 : now.bounds[i - 1];
      const double hi = i < now.bounds.size() ? now.bounds[i] : lo * 2;  // +Inf: twice the last bound
      const uint64_t in = upto - below;
      return in == 0 ? hi : lo + (hi - lo) * (rank - static_cast<double>(below)) / static_cast<double>(in);
    }
    below = upto;
  }
  return now.bounds.empty() ? 0 : now.bounds.back();
}

Status Bad(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("rollout: '" + field + "' " + why);
}

TrafficPolicy SplitFor(uint32_t canary_percent, double shadow_percent) {
  TrafficPolicy p;
  if (canary_percent < 100) p.split.push_back({"stable", 100 - canary_percent});
  if (canary_percent > 0) p.split.push_back({"canary", canary_percent});
  if (shadow_percent > 0) {
    p.shadow_target = "canary";
    p.shadow_percent = shadow_percent;
  }
  return p;
}

void WriteRequest(Writer& w, const RolloutSpec& s, double shadow_percent) {
  w.StartObject();
  w.Key("version");
  w.String(s.version.c_str());
  w.Key("steps");
  w.StartArray();
  for (uint32_t p : s.steps) w.Uint(p);
  w.EndArray();
  w.Key("interval_seconds");
  w.Double(std::chrono::duration<double>(s.interval).count());
  w.Key("min_requests");
  w.Uint64(s.min_requests);
  w.Key("shadow_percent");
  w.Double(shadow_percent);
  w.Key("checks");
  w.StartObject();
  w.Key("max_error_rate_increase");
  w.Double(s.checks.max_error_rate_increase);
  w.Key("max_p99_ratio");
  w.Double(s.checks.max_p99_ratio);
  w.Key("min_p99_increase_ms");
  w.Double(s.checks.min_p99_increase_ms);
  w.Key("min_agreement");
  w.Double(s.checks.min_agreement);
  w.EndObject();
  w.EndObject();
}

}  // namespace

IntervalStats Difference(const VersionCounters& before, const VersionCounters& now) {
  IntervalStats s;
  s.requests = now.requests - std::min(now.requests, before.requests);
  s.errors = now.errors - std::min(now.errors, before.errors);
  s.p99_us = Quantile(before.latency_us, now.latency_us, 0.99);
  const uint64_t agreed = now.shadow_agreed - std::min(now.shadow_agreed, before.shadow_agreed);
  const uint64_t disagreed = now.shadow_disagreed - std::min(now.shadow_disagreed, before.shadow_disagreed);
  if (agreed + disagreed > 0) s.agreement = static_cast<double>(agreed) / static_cast<double>(agreed + disagreed);
  return s;
}

Result<RolloutRequest> ParseRolloutRequestJson(std::string_view json) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::InvalidArgument("rollout: not a JSON object");
  RolloutRequest r;
  for (const auto& m : doc.GetObject()) {
    const std::string key(m.name.GetString(), m.name.GetStringLength());
    const auto& v = m.value;
    if (key == "version") {
      if (v.IsString())
        r.spec.version.assign(v.GetString(), v.GetStringLength());
      else if (v.IsInt64() && v.GetInt64() > 0)
        r.spec.version = std::to_string(v.GetInt64());
      else
        return Bad(key, "must be a version number");
      if (r.spec.version.empty() || r.spec.version.size() > 18 ||
          r.spec.version.find_first_not_of("0123456789") != std::string::npos || r.spec.version[0] == '0')
        return Bad(key, "must be a version number, not '" + r.spec.version + "'");
    } else if (key == "steps") {
      if (!v.IsArray()) return Bad(key, "must be a list of percents");
      r.spec.steps.clear();
      for (const auto& p : v.GetArray()) {
        if (!p.IsUint() || p.GetUint() > 100) return Bad(key, "must hold integers 1..100");
        r.spec.steps.push_back(p.GetUint());
      }
    } else if (key == "interval_seconds") {
      if (!v.IsNumber() || !(v.GetDouble() > 0) || v.GetDouble() > 86400 * 30) return Bad(key, "must be > 0 seconds");
      r.spec.interval = std::chrono::duration_cast<Duration>(std::chrono::duration<double>(v.GetDouble()));
    } else if (key == "min_requests") {
      if (!v.IsUint64()) return Bad(key, "must be a non-negative integer");
      r.spec.min_requests = v.GetUint64();
    } else if (key == "shadow_percent") {
      if (!v.IsNumber() || !(v.GetDouble() >= 0 && v.GetDouble() <= 100)) return Bad(key, "must be in 0..100");
      r.shadow_percent = v.GetDouble();
    } else if (key == "checks") {
      if (!v.IsObject()) return Bad(key, "must be an object");
      for (const auto& c : v.GetObject()) {
        const std::string ck(c.name.GetString(), c.name.GetStringLength());
        if (!c.value.IsNumber()) return Bad("checks." + ck, "must be a number");
        const double d = c.value.GetDouble();
        if (ck == "max_error_rate_increase")
          r.spec.checks.max_error_rate_increase = d;
        else if (ck == "max_p99_ratio")
          r.spec.checks.max_p99_ratio = d;
        else if (ck == "min_p99_increase_ms")
          r.spec.checks.min_p99_increase_ms = d;
        else if (ck == "min_agreement")
          r.spec.checks.min_agreement = d;
        else
          return Bad("checks." + ck,
                     "is not a check (max_error_rate_increase, max_p99_ratio, min_p99_increase_ms, min_agreement)");
      }
    } else {
      return Bad(key, "is not a field");
    }
  }
  INFERD_RETURN_IF_ERROR(ValidateRolloutSpec(r.spec));
  return r;
}

std::string RolloutStateToJson(const std::string& model, const RolloutState& s) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("model");
  w.String(model.c_str());
  w.Key("version");
  w.String(s.spec.version.c_str());
  w.Key("phase");
  const std::string phase(RolloutPhaseName(s.phase));
  w.String(phase.c_str());
  w.Key("step");
  w.Uint64(s.step + 1);
  w.Key("canary_percent");
  w.Uint(s.canary_percent());
  w.Key("reason");
  w.String(s.reason.c_str());
  w.Key("events");
  w.StartArray();
  for (const auto& e : s.events) w.String(e.what.c_str());
  w.EndArray();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

RolloutController::RolloutController(RolloutHost* host, ControlStateStore* state, Clock* clock)
    : host_(host), store_(state), clock_(clock) {}

void RolloutController::Persist(const std::string& model, const RolloutState& s) {
  rapidjson::StringBuffer sb;
  Writer w(sb);
  w.StartObject();
  w.Key("request");
  double shadow = 0;
  {
    MutexLock g(&mu_);
    if (auto it = running_.find(model); it != running_.end()) shadow = it->second.shadow_percent;
  }
  WriteRequest(w, s.spec, shadow);
  w.Key("step");
  w.Uint64(s.step);
  w.Key("phase");
  const std::string phase(RolloutPhaseName(s.phase));
  w.String(phase.c_str());
  w.EndObject();
  Status st = store_->Put(model, "rollout", std::string(sb.GetString(), sb.GetSize()));
  if (!st.ok()) spdlog::warn("model '{}': cannot persist the rollout: {}", model, st.message());
}

Status RolloutController::Apply(const std::string& model, const Running& r) {
  switch (r.state.phase) {
    case RolloutPhase::kRunning:
      return host_->SetTraffic(model, SplitFor(r.state.canary_percent(), r.shadow_percent));
    case RolloutPhase::kPromoted: {
      INFERD_RETURN_IF_ERROR(host_->SetLabel(model, "stable", r.canary));
      INFERD_RETURN_IF_ERROR(host_->ClearTraffic(model));
      return host_->DeleteLabel(model, "canary");
    }
    default:
      INFERD_RETURN_IF_ERROR(host_->ClearTraffic(model));  // the canary gets nothing; stable stays the default
      return host_->DeleteLabel(model, "canary");
  }
}

void RolloutController::Finished(RolloutPhase phase) {
  MutexLock g(&mu_);
  if (phase == RolloutPhase::kPromoted) ++counts_.promoted;
  if (phase == RolloutPhase::kRolledBack) ++counts_.rolled_back;
  if (phase == RolloutPhase::kAborted) ++counts_.aborted;
}

Result<RolloutState> RolloutController::Start(const std::string& model, RolloutRequest request) {
  INFERD_RETURN_IF_ERROR(ValidateRolloutSpec(request.spec));
  MutexLock serial(&apply_mu_);
  {
    MutexLock g(&mu_);
    if (running_.count(model))
      return Status::FailedPrecondition("model '" + model + "' is already rolling out; abort it first");
  }
  int64_t version = 0;
  for (char c : request.spec.version) {
    if (c < '0' || c > '9' || version > (INT64_MAX - 9) / 10)
      return Bad("version", "must be a version number, not '" + request.spec.version + "'");
    version = version * 10 + (c - '0');
  }
  if (version < 1) return Bad("version", "must be a version number >= 1");
  auto stable = host_->LabelVersion(model, "stable");
  if (!stable.ok()) {
    INFERD_ASSIGN_OR_RETURN(int64_t d, host_->DefaultVersion(model));
    INFERD_RETURN_IF_ERROR(host_->SetLabel(model, "stable", d));
    stable = d;
  }
  if (*stable == version) return Bad("version", "is already the stable version " + std::to_string(version));
  INFERD_RETURN_IF_ERROR(host_->SetLabel(model, "canary", version));  // loads (and warms up) it first
  Running r;
  r.state = StartRollout(std::move(request.spec), clock_->Now());
  r.shadow_percent = request.shadow_percent;
  r.stable = *stable;
  r.canary = version;
  INFERD_ASSIGN_OR_RETURN(r.stable_at, host_->Counters(model, r.stable));
  INFERD_ASSIGN_OR_RETURN(r.canary_at, host_->Counters(model, r.canary));
  INFERD_RETURN_IF_ERROR(Apply(model, r));
  RolloutState state = r.state;
  {
    MutexLock g(&mu_);
    running_[model] = std::move(r);
    ++counts_.started;
  }
  Persist(model, state);
  spdlog::info("model '{}': rollout of version {} started at {}%", model, state.spec.version, state.canary_percent());
  return state;
}

Result<RolloutState> RolloutController::Get(const std::string& model) const {
  MutexLock g(&mu_);
  if (auto it = running_.find(model); it != running_.end()) return it->second.state;
  if (auto it = finished_.find(model); it != finished_.end()) return it->second;
  return Status::NotFound("model '" + model + "' has no rollout");
}

std::map<std::string, RolloutState> RolloutController::All() const {
  MutexLock g(&mu_);
  std::map<std::string, RolloutState> all = finished_;
  for (const auto& [model, r] : running_) all.insert_or_assign(model, r.state);
  return all;
}

Result<RolloutState> RolloutController::Abort(const std::string& model, const std::string& why) {
  MutexLock serial(&apply_mu_);
  Running r;
  {
    MutexLock g(&mu_);
    auto it = running_.find(model);
    if (it == running_.end()) return Status::NotFound("model '" + model + "' has no running rollout");
    r = std::move(it->second);
    running_.erase(it);
  }
  r.state = AbortRollout(std::move(r.state), why, clock_->Now());
  Status st = Apply(model, r);
  if (!st.ok()) spdlog::warn("model '{}': ending the rollout: {}", model, st.message());
  Persist(model, r.state);
  Finished(r.state.phase);
  spdlog::warn("model '{}': rollout of version {} aborted: {}", model, r.state.spec.version, why);
  MutexLock g(&mu_);
  finished_[model] = r.state;
  return r.state;
}

void RolloutController::Tick() {
  MutexLock serial(&apply_mu_);
  const TimePoint now = clock_->Now();
  // Every running rollout: one whose version stopped serving ends at once;
  // the others are judged when their interval has ended.
  std::vector<std::pair<std::string, Running>> running;
  {
    MutexLock g(&mu_);
    running.assign(running_.begin(), running_.end());
  }
  for (auto& [model, r] : running) {
    auto canary = host_->Counters(model, r.canary);
    auto stable = host_->Counters(model, r.stable);
    const bool serving = canary.ok() && stable.ok();
    if (serving && now - r.state.step_started < r.state.spec.interval) continue;
    RolloutState before = r.state;
    if (!canary.ok() || !stable.ok()) {
      r.state = AbortRollout(std::move(r.state),
                             "version " + std::to_string(!canary.ok() ? r.canary : r.stable) +
                                 " no longer serves: " + (!canary.ok() ? canary.status() : stable.status()).message(),
                             now);
    } else {
      r.state =
          JudgeInterval(std::move(r.state), Difference(r.canary_at, *canary), Difference(r.stable_at, *stable), now);
      r.canary_at = std::move(*canary);
      r.stable_at = std::move(*stable);
    }
    Status st = Apply(model, r);
    if (!st.ok()) spdlog::warn("model '{}': applying the rollout's step: {}", model, st.message());
    const RolloutEvent& last = r.state.events.back();
    if (r.state.phase == RolloutPhase::kRunning) {
      if (r.state.step != before.step)
        spdlog::info("model '{}': rollout of version {}: {}", model, r.state.spec.version, last.what);
    } else {
      if (r.state.phase == RolloutPhase::kPromoted)
        spdlog::info("model '{}': rollout of version {}: {}", model, r.state.spec.version, last.what);
      else
        spdlog::warn("model '{}': rollout of version {}: {}", model, r.state.spec.version, last.what);
      Finished(r.state.phase);
    }
    {
      MutexLock g(&mu_);
      auto it = running_.find(model);
      if (it == running_.end()) continue;  // aborted meanwhile
      if (r.state.phase == RolloutPhase::kRunning) {
        it->second = r;
      } else {
        finished_[model] = r.state;
        running_.erase(it);
      }
    }
    Persist(model, r.state);
  }
}

void RolloutController::Resume() {
  MutexLock serial(&apply_mu_);
  for (const std::string& model : host_->ModelNames()) {
    auto doc = store_->Get(model, "rollout");
    if (!doc.ok() || !*doc) continue;
    rapidjson::Document d;
    d.Parse((*doc)->data(), (*doc)->size());
    if (d.HasParseError() || !d.IsObject() || !d.HasMember("request") || !d.HasMember("phase") ||
        !d["phase"].IsString() || std::string(d["phase"].GetString()) != "running" || !d.HasMember("step") ||
        !d["step"].IsUint64())
      continue;
    rapidjson::StringBuffer sb;
    Writer w(sb);
    d["request"].Accept(w);
    auto request = ParseRolloutRequestJson(std::string_view(sb.GetString(), sb.GetSize()));
    if (!request.ok()) {
      spdlog::warn("model '{}': the stored rollout is unreadable ({}); not resumed", model, request.status().message());
      continue;
    }
    const size_t step = std::min<size_t>(d["step"].GetUint64(), request->spec.steps.size() - 1);
    auto canary = host_->LabelVersion(model, "canary");
    auto stable = host_->LabelVersion(model, "stable");
    if (!canary.ok() || !stable.ok()) continue;
    Running r;
    r.state = StartRollout(request->spec, clock_->Now());
    r.state.step = step;
    r.state.events.push_back({clock_->Now(), "resumed after a restart at step " + std::to_string(step + 1)});
    r.shadow_percent = request->shadow_percent;
    r.canary = *canary;
    r.stable = *stable;
    auto ca = host_->Counters(model, r.canary);
    auto sa = host_->Counters(model, r.stable);
    if (!ca.ok() || !sa.ok()) continue;
    r.canary_at = std::move(*ca);
    r.stable_at = std::move(*sa);
    (void)Apply(model, r);
    spdlog::info("model '{}': rollout of version {} resumed at {}%", model, r.state.spec.version,
                 r.state.canary_percent());
    MutexLock g(&mu_);
    running_[model] = std::move(r);
  }
}

RolloutController::Counts RolloutController::counts() const {
  MutexLock g(&mu_);
  return counts_;
}

}  // namespace inferd
