// The gRPC client of `inferd bench --protocol grpc`, behind gRPC-free
// signatures (the CLI includes this header).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/load_generator.h"
#include "bench/request_builder.h"
#include "core/status.h"
#include "core/tensor.h"

namespace inferd::bench {

// A serialized inference.ModelInferRequest carrying `inputs` as
// raw_input_contents (what Triton's client libraries send).
PreparedRequest EncodeBenchRequest(const std::string& model, const std::string& version,
                                   const std::vector<Tensor>& inputs);

// Senders calling ModelInfer at `target` ("host:port"), each over its own
// channel and HTTP/2 connection (like one HTTP keep-alive connection each).
SenderFactory GrpcSenderFactory(std::string target);

// The closed loop over gRPC as h2load drives it: `channels` HTTP/2
// connections (at most one per request in flight), the requests in flight
// spread over them as streams, all driven by one thread through gRPC's async
// API (a completion queue), each request's bytes serialized once and sent
// as they are (the generic stub: no protobuf work per call on the client).
// Every call has a 60 s deadline.
ClosedLoopDriver GrpcClosedLoopDriver(std::string target, int channels);

}  // namespace inferd::bench
