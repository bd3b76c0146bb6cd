// LiveStats: the web console's charts (docs/console.md) from ring buffers in
// the server's own memory -- no Prometheus needed. Once a tick (1 s) it reads
// every serving model version's statistics and keeps, per version, what the
// tick saw: requests and failures a second, p50 and p99 request latency
// (from the latency histogram's buckets, as Prometheus' histogram_quantile
// computes them) and the mean queue time. `history` ticks are kept per
// version, for at most `max_series` versions (the ones idle longest give way;
// versions unloaded are dropped once idle for the whole history).
//
// Thread-safety: thread-safe. Start runs the ticks on a thread of its own
// until Stop (or destruction); Sample runs one tick (tests call it directly).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "server/server_types.h"

namespace inferd::console {

struct LiveOptions {
  std::chrono::milliseconds interval{1000};
  size_t history = 300;     // ticks kept per model version (--console-history-secs at 1 s ticks)
  size_t max_series = 200;  // model versions charted (--console-max-models)
};

class LiveStats {
 public:
  // What a tick reads: the serving versions' statistics (InferenceServer::GetStatistics("", "")).
  using Source = std::function<std::vector<ModelStatsSnapshot>()>;
  LiveStats(LiveOptions options, Source source);
  ~LiveStats();
  LiveStats(const LiveStats&) = delete;
  LiveStats& operator=(const LiveStats&) = delete;

  void Start();
  void Stop();
  // One tick at `unix_ms`.
  void Sample(int64_t unix_ms);

  // {"interval_ms", "now_ms", "series": [{"model", "version", "t" (unix ms), "rps", "errors_ps", "p50_ms",
  // "p99_ms", "queue_ms"}]}: the versions of `model` ("" = every model), their last `points` ticks (0 = all).
  std::string Json(std::string_view model, size_t points) const;
  const LiveOptions& options() const { return options_; }

 private:
  struct Point {
    int64_t t_ms;
    float rps, errors_ps, p50_ms, p99_ms, queue_ms;
  };
  struct Series {
    std::string model, version;
    std::deque<Point> points;
    // The counters at the last tick.
    uint64_t ok = 0, failed = 0, queue_count = 0, queue_ns = 0;
    std::vector<uint64_t> buckets;  // cumulative, one per bound then +Inf
    int64_t last_ms = 0;            // the last tick
    int64_t active_ms = 0;          // the last tick that saw requests
    bool present = false;           // serving at the last tick
  };
  void Run();
  void AddPoint(Series& s, const ModelStatsSnapshot& snap, int64_t unix_ms) TSA_REQUIRES(mu_);
  // Room for one more series: false when every tracked one served requests within the history.
  bool MakeRoom(int64_t unix_ms) TSA_REQUIRES(mu_);

  const LiveOptions options_;
  const Source source_;
  mutable Mutex mu_;
  std::map<std::pair<std::string, std::string>, Series> series_ TSA_GUARDED_BY(mu_);
  int64_t now_ms_ TSA_GUARDED_BY(mu_) = 0;
  Mutex run_mu_;
  CondVar wake_;
  bool stop_ TSA_GUARDED_BY(run_mu_) = false;
  std::thread thread_;
};

// Prometheus' histogram_quantile over one interval's buckets: `q` in [0, 1]; `cumulative` has one count per bound
// then +Inf. The value in the bucket's unit; 0 without observations; the largest bound when it falls in +Inf.
double HistogramQuantile(double q, const std::vector<double>& bounds, const std::vector<uint64_t>& cumulative);

}  // namespace inferd::console
