#include "console/live_stats.h"

#include <algorithm>
#include <charconv>

#include "core/json_text.h"

namespace inferd::console {
namespace {

// Counters that went backwards belong to a new statistics object (the version reloaded): all of it is new.
uint64_t Delta(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }

void AppendNumber(std::string* out, double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, 5);
  out->append(buf, r.ptr);
}

}  // namespace

double HistogramQuantile(double q, const std::vector<double>& bounds, const std::vector<uint64_t>& cumulative) {
  if (cumulative.empty() || bounds.empty() || cumulative.size() != bounds.size() + 1) return 0;
  const uint64_t total = cumulative.back();
  if (total == 0) return 0;
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  for (size_t i = 0; i < cumulative.size(); ++i) {
    if (static_cast<double>(cumulative[i]) < rank) continue;
    if (i == bounds.size()) return bounds.back();  // in +Inf: the largest bound, as Prometheus answers
    const double lower = i == 0 ? 0 : bounds[i - 1];
    const double below = i == 0 ? 0 : static_cast<double>(cumulative[i - 1]);
    const double in_bucket = static_cast<double>(cumulative[i]) - below;
    if (in_bucket <= 0) return bounds[i];
    return lower + (bounds[i] - lower) * ((rank - below) / in_bucket);
  }
  return bounds.back();
}

LiveStats::LiveStats(LiveOptions options, Source source) : options_(options), source_(std::move(source)) {}

LiveStats::~LiveStats() { Stop(); }

void LiveStats::Start() {
  MutexLock l(&run_mu_);
  if (thread_.joinable() || stop_) return;
  thread_ = std::thread([this] { Run(); });
}

void LiveStats::Stop() {
  {
    MutexLock l(&run_mu_);
    stop_ = true;
  }
  wake_.NotifyAll();
  if (thread_.joinable()) thread_.join();
}

void LiveStats::Run() {
  MutexLock l(&run_mu_);
  while (!stop_) {
    l.Unlock();
    const int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    Sample(now_ms);
    l.Lock();
    if (!stop_) wake_.WaitForReal(&run_mu_, options_.interval);
  }
}

void LiveStats::Sample(int64_t unix_ms) {
  std::vector<ModelStatsSnapshot> snaps = source_ ? source_() : std::vector<ModelStatsSnapshot>();
  MutexLock l(&mu_);
  now_ms_ = unix_ms;
  for (auto& [key, s] : series_) s.present = false;
  for (const ModelStatsSnapshot& snap : snaps) {
    auto key = std::make_pair(snap.name, snap.version);
    auto it = series_.find(key);
    if (it == series_.end()) {
      if (!MakeRoom(unix_ms)) continue;
      Series s;
      s.model = snap.name;
      s.version = snap.version;
      // The first tick only sets the baseline: the counters hold everything since the version loaded.
      s.ok = snap.success.count;
      s.failed = snap.fail.count;
      s.queue_count = snap.queue.count;
      s.queue_ns = snap.queue.ns;
      s.buckets = snap.request_us.cumulative;
      s.last_ms = s.active_ms = unix_ms;
      s.present = true;
      series_.emplace(std::move(key), std::move(s));
      continue;
    }
    AddPoint(it->second, snap, unix_ms);
  }
  const int64_t window_ms = static_cast<int64_t>(options_.history) * options_.interval.count();
  for (auto it = series_.begin(); it != series_.end();) {
    Series& s = it->second;
    if (!s.present && unix_ms - s.active_ms > window_ms) {
      it = series_.erase(it);
      continue;
    }
    if (!s.present) {  // unloaded: its chart goes on at zero until it leaves the history
      s.points.push_back(Point{unix_ms, 0, 0, 0, 0, 0});
      if (s.points.size() > options_.history) s.points.pop_front();
    }
    ++it;
  }
}

void LiveStats::AddPoint(Series& s, const ModelStatsSnapshot& snap, int64_t unix_ms) {
  s.present = true;
  const double secs = std::max<double>(unix_ms - s.last_ms, 1) / 1000.0;
  const uint64_t ok = Delta(snap.success.count, s.ok);
  const uint64_t failed = Delta(snap.fail.count, s.failed);
  const uint64_t queued = Delta(snap.queue.count, s.queue_count);
  const uint64_t queue_ns = Delta(snap.queue.ns, s.queue_ns);
  Point p{unix_ms, static_cast<float>((ok + failed) / secs), static_cast<float>(failed / secs), 0, 0, 0};
  const std::vector<uint64_t>& now = snap.request_us.cumulative;
  if (ok > 0 && now.size() == s.buckets.size()) {
    std::vector<uint64_t> interval(now.size());
    for (size_t i = 0; i < now.size(); ++i) interval[i] = Delta(now[i], s.buckets[i]);
    p.p50_ms = static_cast<float>(HistogramQuantile(0.5, snap.request_us.bounds, interval) / 1000.0);
    p.p99_ms = static_cast<float>(HistogramQuantile(0.99, snap.request_us.bounds, interval) / 1000.0);
  }
  if (queued > 0) p.queue_ms = static_cast<float>(static_cast<double>(queue_ns) / static_cast<double>(queued) / 1e6);
  s.points.push_back(p);
  if (s.points.size() > options_.history) s.points.pop_front();
  s.ok = snap.success.count;
  s.failed = snap.fail.count;
  s.queue_count = snap.queue.count;
  s.queue_ns = snap.queue.ns;
  s.buckets = now;
  s.last_ms = unix_ms;
  if (ok + failed > 0) s.active_ms = unix_ms;
}

bool LiveStats::MakeRoom(int64_t unix_ms) {
  if (series_.size() < options_.max_series) return true;
  if (options_.max_series == 0) return false;
  auto idlest = std::min_element(series_.begin(), series_.end(),
                                 [](const auto& a, const auto& b) { return a.second.active_ms < b.second.active_ms; });
  const int64_t window_ms = static_cast<int64_t>(options_.history) * options_.interval.count();
  if (unix_ms - idlest->second.active_ms <= window_ms) return false;
  series_.erase(idlest);
  return true;
}

std::string LiveStats::Json(std::string_view model, size_t points) const {
  std::string out;
  MutexLock l(&mu_);
  out.append("{\"interval_ms\":").append(std::to_string(options_.interval.count()));
  out.append(",\"now_ms\":").append(std::to_string(now_ms_)).append(",\"series\":[");
  bool first = true;
  for (const auto& entry : series_) {
    const Series& s = entry.second;  // not a structured binding: the lambda below captures it
    if (!model.empty() && s.model != model) continue;
    if (!first) out.push_back(',');
    first = false;
    out.append("{\"model\":");
    json::AppendEscaped(&out, s.model);
    out.append(",\"version\":");
    json::AppendEscaped(&out, s.version);
    const size_t from = points == 0 || points >= s.points.size() ? 0 : s.points.size() - points;
    auto field = [&](const char* name, auto get) {
      out.append(",\"").append(name).append("\":[");
      for (size_t i = from; i < s.points.size(); ++i) {
        if (i > from) out.push_back(',');
        AppendNumber(&out, get(s.points[i]));
      }
      out.push_back(']');
    };
    out.append(",\"t\":[");
    for (size_t i = from; i < s.points.size(); ++i) {
      if (i > from) out.push_back(',');
      out.append(std::to_string(s.points[i].t_ms));
    }
    out.push_back(']');
    field("rps", [](const Point& p) { return p.rps; });
    field("errors_ps", [](const Point& p) { return p.errors_ps; });
    field("p50_ms", [](const Point& p) { return p.p50_ms; });
    field("p99_ms", [](const Point& p) { return p.p99_ms; });
    field("queue_ms", [](const Point& p) { return p.queue_ms; });
    out.push_back('}');
  }
  out.append("]}");
  return out;
}

}  // namespace inferd::console
