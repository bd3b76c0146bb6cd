// The open-loop HTTP driver of `inferd bench --request-rate`: one thread and
// an epoll loop send each scheduled request on a free keep-alive connection
// (opening one, up to a limit, when none is free) and read the answers as
// they come.
//
// Why not a thread per connection: on a 2-core machine shared with the
// server, 64 client threads that each sleep, send and block on recv add
// three thread wake-ups per request, and at high rates the scheduler's delays
// in waking them (milliseconds) showed up as the measured tail. One loop
// thread does the same work with a few system calls and no hand-offs.
//
// Latency runs from the request's scheduled time, so a request that waited
// for a free connection counts that wait (no coordinated omission).
//
// Thread-safety: Run() blocks its calling thread; `stop` and `record` are
// the only things it shares (record is called on that thread).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/request_builder.h"
#include "bench/stats.h"

namespace inferd::bench {

struct OpenLoopHttpOptions {
  std::string host;
  uint16_t port = 0;
  int max_connections = 64;
};

// Sends requests[i % requests.size()] at t0 + arrivals[i] (seconds) until the
// arrivals run out (and their answers are in) or `stop` is set. Requests
// still unanswered at a stop are not recorded.
void RunOpenLoopHttp(const OpenLoopHttpOptions& options, const std::vector<PreparedRequest>& requests,
                     const std::vector<double>& arrivals, std::chrono::steady_clock::time_point t0,
                     const std::atomic<bool>& stop, const SampleSink& record);

}  // namespace inferd::bench
