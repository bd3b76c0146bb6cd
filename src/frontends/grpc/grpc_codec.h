// KServe v2 gRPC codec: inference.ModelInferRequest / ModelInferResponse
// messages <-> the server facade's InferRequest / InferResponse.
//
// Pure functions over protobuf messages (no channels, no server, no gRPC
// headers); fuzzed by fuzz/fuzz_grpc_infer.cc.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <memory>
#include <string>

#include "core/infer_request.h"
#include "core/status.h"
#include "grpc_service.pb.h"

namespace inferd::grpcfe {

// Decodes a request: tensors from typed `contents` or from
// `raw_input_contents` (one buffer per input, then no input may carry
// contents). Raw buffers are moved out of `msg` (no copy): the caller must not
// read them afterwards. Errors are INVALID_ARGUMENT (malformed) or
// UNIMPLEMENTED (shared memory, classification).
Result<std::unique_ptr<InferRequest>> DecodeInferRequest(inference::ModelInferRequest* msg);

// Encodes a response. `raw`: outputs go to raw_output_contents (what a
// client that sent raw inputs reads); otherwise to typed contents (FP16 and
// BF16 as fp32_contents).
void EncodeInferResponse(const InferResponse& response, bool raw, inference::ModelInferResponse* out);

// Typed contents -> tensor bytes, checking the field matches the datatype and
// the element count matches the shape.
Result<Tensor> DecodeContents(const inference::InferTensorContents& contents, DataType dtype, Shape shape,
                              std::string name);

}  // namespace inferd::grpcfe
