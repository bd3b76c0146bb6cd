// KServe v2 binary tensor extension: the first two bytes choose the
// Inference-Header-Content-Length, the rest is the body.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/codec/kserve_v2.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t header_length = static_cast<size_t>(data[0]) | (static_cast<size_t>(data[1]) << 8);
  auto body = std::make_shared<const std::string>(reinterpret_cast<const char*>(data + 2), size - 2);
  auto r = inferd::v2::ParseInferRequest(body, header_length, "m", "");
  if (r.ok()) {
    inferd::InferResponse resp;
    resp.outputs = (*r)->inputs;
    (void)inferd::v2::EncodeInferResponse(resp, {{}, true});
    (void)inferd::v2::EncodeInferResponse(resp, {{}, false});
  }
  return 0;
}
