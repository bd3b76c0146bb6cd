#include "bench/load_generator.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "bench/http_client.h"
#include "bench/open_loop_http.h"
#include "core/mutex.h"

namespace inferd::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Samples of one client thread; the main thread reads them between windows.
struct Recorder {
  Mutex mu;
  std::vector<Sample> samples TSA_GUARDED_BY(mu);
  std::string first_error TSA_GUARDED_BY(mu);
  void Add(const Sample& s) {
    MutexLock g(&mu);
    samples.push_back(s);
  }
};

class HttpSender final : public Sender {
 public:
  HttpSender(const std::string& host, uint16_t port, std::shared_ptr<TlsClientContext> tls)
      : client_(host, port, std::move(tls)) {}
  bool Send(const PreparedRequest& req, std::string* error) override {
    auto r = client_.Request("POST", req.path, req.body, req.headers);
    if (!r.ok()) {
      if (error->empty()) *error = r.status().ToString();
      return false;
    }
    if (r->status != 200) {
      if (error->empty()) *error = "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300);
      return false;
    }
    return true;
  }

 private:
  HttpClient client_;
};

}  // namespace

SenderFactory HttpSenderFactory(std::string host, uint16_t port, std::shared_ptr<TlsClientContext> tls) {
  return [host = std::move(host), port, tls = std::move(tls)] { return std::make_unique<HttpSender>(host, port, tls); };
}

LoadResult RunLoad(const LoadOptions& o) {
  const bool open_loop = o.request_rate > 0;
  const bool driven = !open_loop && o.closed_loop_driver;
  const bool event_loop = (open_loop && !o.http_host.empty()) || driven;
  const int workers = event_loop ? 1 : open_loop ? o.max_connections : o.concurrency;
  const double planned_s = o.warmup_s + (o.duration_s > 0 ? o.duration_s : o.window_s * o.max_windows) + 1.0;
  const std::vector<double> arrivals =
      open_loop ? PoissonArrivals(o.request_rate, planned_s, o.seed) : std::vector<double>();
  std::atomic<size_t> next_arrival{0};
  std::atomic<bool> stop{false};
  std::vector<Recorder> recorders(static_cast<size_t>(workers));
  const Clock::time_point t0 = Clock::now();
  std::optional<HostStallProbe> probe;
  if (o.host_stall_probe) probe.emplace(t0, HostStallProbeOptions{});

  auto worker = [&](int id) {
    std::unique_ptr<Sender> sender = o.make_sender();
    Recorder& rec = recorders[static_cast<size_t>(id)];
    std::string error;
    size_t k = static_cast<size_t>(id);
    while (!stop.load(std::memory_order_relaxed)) {
      const PreparedRequest& req = o.requests[k++ % o.requests.size()];
      Clock::time_point start;
      if (open_loop) {
        const size_t i = next_arrival.fetch_add(1);
        if (i >= arrivals.size()) break;
        start = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i]));
        std::this_thread::sleep_until(start);  // the schedule, not a wait for an event
        if (stop.load(std::memory_order_relaxed)) break;
      } else {
        start = Clock::now();
      }
      const bool ok = sender->Send(req, &error);
      const Clock::time_point end = Clock::now();
      rec.Add({Seconds(t0, end), std::chrono::duration<double, std::micro>(end - start).count(), ok});
      if (!ok) {
        MutexLock g(&rec.mu);
        if (rec.first_error.empty()) rec.first_error = error;
      }
    }
  };
  auto loop = [&] {
    Recorder& rec = recorders[0];
    auto record = [&rec](const Sample& s, const std::string& error) {
      MutexLock g(&rec.mu);
      rec.samples.push_back(s);
      if (!s.ok && rec.first_error.empty()) rec.first_error = error;
    };
    if (driven) return o.closed_loop_driver(o.requests, o.concurrency, t0, stop, record);
    RunOpenLoopHttp({o.http_host, o.http_port, o.max_connections}, o.requests, arrivals, t0, stop, record);
  };
  std::vector<std::thread> threads;
  if (event_loop) {
    threads.emplace_back(loop);
  } else {
    for (int i = 0; i < workers; ++i) threads.emplace_back(worker, i);
  }

  // The samples so far: each call moves in what the recorders gathered since
  // the previous one (a sender waits on its recorder's lock only that long).
  std::vector<Sample> all;
  auto collect = [&]() -> const std::vector<Sample>& {
    for (auto& r : recorders) {
      std::vector<Sample> fresh;
      {
        MutexLock g(&r.mu);
        fresh.swap(r.samples);
      }
      all.insert(all.end(), fresh.begin(), fresh.end());
    }
    return all;
  };

  LoadResult result;
  double window_start = o.warmup_s;
  std::this_thread::sleep_until(
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(window_start)));
  // With a duration, the windows divide it exactly (as close to window_s as
  // they can be), so the measurement lasts duration_s, not a rounded multiple.
  const int max_windows =
      o.duration_s > 0 ? std::max(1, static_cast<int>(std::ceil(o.duration_s / o.window_s - 1e-9))) : o.max_windows;
  const double window_s = o.duration_s > 0 ? o.duration_s / max_windows : o.window_s;
  while (static_cast<int>(result.windows.size()) < max_windows) {
    const double window_end = window_start + window_s;
    std::this_thread::sleep_until(
        t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(window_end)));
    result.windows.push_back(Summarize(collect(), window_start, window_end));
    window_start = window_end;
    if (o.duration_s <= 0 && IsStable(result.windows, o.stable_windows, o.tolerance)) {
      result.stable = true;
      break;
    }
  }
  // A fixed-duration run does not stop for stability, but says whether its
  // last windows were stable (too few windows to judge: not stable).
  if (o.duration_s > 0) result.stable = IsStable(result.windows, o.stable_windows, o.tolerance);
  stop = true;
  for (auto& t : threads) t.join();

  const int n = static_cast<int>(result.windows.size());
  // Stable (closed loop until stable): the stable windows; otherwise (a
  // fixed duration, or stability never reached) every window.
  result.reported_windows = (result.stable && o.duration_s <= 0) ? std::min(n, o.stable_windows) : n;
  const double from = o.warmup_s + window_s * (n - result.reported_windows);
  const double to = o.warmup_s + window_s * n;
  result.summary = Summarize(collect(), from, to);
  if (probe) result.host_stalls = SummarizeStalls(probe->Stop(), all, from, to, o.stall_guard_s);
  for (auto& r : recorders) {
    MutexLock g(&r.mu);
    if (!r.first_error.empty()) {
      result.first_error = r.first_error;
      break;
    }
  }
  return result;
}

}  // namespace inferd::bench
