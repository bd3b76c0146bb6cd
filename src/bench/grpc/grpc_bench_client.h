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

// The closed loop (`inferd bench --protocol grpc`): h2_closed_loop.h.

}  // namespace inferd::bench
