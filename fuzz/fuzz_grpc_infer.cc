// KServe v2 gRPC: a serialized inference.ModelInferRequest, decoded by the
// gRPC codec; what decodes is encoded back as typed and as raw outputs.
#include <cstddef>
#include <cstdint>

#include "frontends/grpc/grpc_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest msg;
  if (!msg.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto r = inferd::grpcfe::DecodeInferRequest(&msg);
  if (r.ok()) {
    inferd::InferResponse resp;
    resp.outputs = (*r)->inputs;
    inference::ModelInferResponse typed, raw;
    inferd::grpcfe::EncodeInferResponse(resp, false, &typed);
    inferd::grpcfe::EncodeInferResponse(resp, true, &raw);
  }
  return 0;
}
