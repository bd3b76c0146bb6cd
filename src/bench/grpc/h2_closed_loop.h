// The closed loop of `inferd bench --protocol grpc` on libnghttp2 (the
// HTTP/2 library h2load is built on) rather than gRPC's C++ client: unary
// gRPC calls are an HTTP/2 POST with a length-prefixed body and a
// grpc-status trailer, and gRPC's client spent 30-40 us of its own per call
// at concurrency 1 (0.75-0.79x h2load's rate against the same server). One
// thread, `channels` TCP connections, the requests in flight spread over
// them as streams; each request's framed body is made once.
//
// A call succeeds on HTTP 200 with grpc-status 0; anything else is an error
// sample carrying the grpc-status and grpc-message (or the connection's
// failure). A connection that fails is opened again for the next call.
#pragma once

#include <string>

#include "bench/load_generator.h"

namespace inferd::bench {

// `target`: "host:port".
ClosedLoopDriver H2GrpcClosedLoopDriver(std::string target, int channels);

}  // namespace inferd::bench
