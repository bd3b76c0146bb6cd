// The load generator behind `inferd bench`: closed loop (N concurrent
// clients, each sending its next request when the previous one answers) or
// open loop (Poisson arrivals at a fixed rate, latency measured from each
// request's scheduled time, so client-side queueing counts).
//
// A run is a warm-up, then measurement windows until the last
// `stable_windows` agree within `tolerance` (perf_analyzer's rule) or
// `max_windows` pass; or, with `duration_s`, windows for that long.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/host_stall_probe.h"
#include "bench/http_client.h"
#include "bench/request_builder.h"
#include "bench/stats.h"

namespace inferd::bench {

// One client connection of the load generator: each worker thread owns one.
class Sender {
 public:
  virtual ~Sender() = default;
  // Sends one request and waits for the whole answer. False, with *error
  // set, when it failed or the server answered with an error.
  virtual bool Send(const PreparedRequest& request, std::string* error) = 0;
};
using SenderFactory = std::function<std::unique_ptr<Sender>()>;

// HTTP/1.1 keep-alive: POST request.path with request.body and headers.
SenderFactory HttpSenderFactory(std::string host, uint16_t port, std::shared_ptr<TlsClientContext> tls = nullptr);

// A closed loop driven by one event loop instead of a thread per client
// (gRPC: async calls over a few channels, grpc/grpc_bench_client.h): keeps
// `concurrency` requests in flight, cycling through `requests`, recording
// each answer with `record` (a sample and, when it failed, why), until
// `stop` is raised; then returns once the calls in flight ended.
using ClosedLoopDriver = std::function<void(const std::vector<PreparedRequest>& requests, int concurrency,
                                            std::chrono::steady_clock::time_point t0, const std::atomic<bool>& stop,
                                            const SampleSink& record)>;

struct LoadOptions {
  SenderFactory make_sender;  // one per worker
  // Closed loop: when set, drives the load instead of make_sender's threads.
  ClosedLoopDriver closed_loop_driver;
  // Open loop over plain HTTP: the server's host and port. When set, one
  // event-loop thread drives up to max_connections connections
  // (open_loop_http.h) instead of a worker thread per connection.
  std::string http_host;
  uint16_t http_port = 0;

  std::vector<PreparedRequest> requests;  // cycled through
  int concurrency = 1;                    // closed loop
  double request_rate = 0;                // > 0: open loop, requests per second
  int max_connections = 64;               // open loop: client connections
  double warmup_s = 1.0;
  double window_s = 2.0;
  int stable_windows = 3;
  double tolerance = 0.10;
  int max_windows = 10;
  // > 0: measure exactly this long, in windows that divide it (about
  // window_s each); stability is reported but does not end the run.
  double duration_s = 0;
  uint64_t seed = 1;
  // Runs a HostStallProbe beside the load and summarizes, besides all
  // requests, those sent outside the host's stalls and `stall_guard_s` after.
  bool host_stall_probe = false;
  double stall_guard_s = 0.2;
};

struct LoadResult {
  Summary summary;               // over the reported windows
  std::vector<Summary> windows;  // every measurement window
  bool stable = false;
  int reported_windows = 0;
  std::string first_error;  // the first error message seen, if any
  HostStalls host_stalls;
};

LoadResult RunLoad(const LoadOptions& options);

}  // namespace inferd::bench
