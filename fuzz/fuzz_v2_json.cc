// KServe v2 JSON infer request parsing (no binary section), then encoding of
// a response made from the parsed inputs.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/codec/kserve_v2.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto body = std::make_shared<const std::string>(reinterpret_cast<const char*>(data), size);
  auto r = inferd::v2::ParseInferRequest(body, std::nullopt, "m", "1");
  if (r.ok()) {
    inferd::InferResponse resp;
    resp.model_name = "m";
    resp.outputs = (*r)->inputs;
    inferd::v2::OutputOptions opts = inferd::v2::OutputOptionsOf(**r);
    (void)inferd::v2::EncodeInferResponse(resp, opts);
    opts.binary_data_output = !opts.binary_data_output;
    (void)inferd::v2::EncodeInferResponse(resp, opts);
  }
  return 0;
}
