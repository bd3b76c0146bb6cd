// KServe v2 (Open Inference Protocol) REST codec: JSON infer requests and
// responses, with the binary tensor data extension.
//
// Pure functions over bytes: no sockets, no server. Every function here has a
// fuzz target (fuzz/).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/infer_request.h"
#include "core/json_limits.h"
#include "core/status.h"

namespace inferd::v2 {

// Parses an infer request body. `header_length` is the value of the
// Inference-Header-Content-Length header, if present: the first
// `header_length` bytes are JSON and binary tensors follow. Binary tensor
// views share `body` (no copy).
Result<std::unique_ptr<InferRequest>> ParseInferRequest(std::shared_ptr<const std::string> body,
                                                        std::optional<size_t> header_length, std::string model_name,
                                                        std::string model_version, const JsonLimits& limits = {});

// How the client wants outputs: saved from the request before it is handed to
// the server.
struct OutputOptions {
  std::vector<RequestedOutput> outputs;
  bool binary_data_output = false;
};
OutputOptions OutputOptionsOf(const InferRequest& r);

struct EncodedResponse {
  std::string body;
  std::optional<size_t> header_length;  // set when binary outputs follow the JSON
};
EncodedResponse EncodeInferResponse(const InferResponse& response, const OutputOptions& options);

// {"error":"..."}
std::string EncodeError(std::string_view message);

}  // namespace inferd::v2
