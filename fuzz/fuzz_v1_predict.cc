// TF Serving v1 :predict parsing (row and columnar) for one- and two-input
// models, then response encoding in both formats.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/codec/tfserving_v1.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<inferd::v1::InputInfo> one = {{"x", inferd::DataType::kFp32}};
  static const std::vector<inferd::v1::InputInfo> two = {{"a", inferd::DataType::kInt64},
                                                         {"b", inferd::DataType::kBytes}};
  std::string_view body(reinterpret_cast<const char*>(data), size);
  for (const auto* inputs : {&one, &two}) {
    auto r = inferd::v1::ParsePredictRequest(body, *inputs, "m", "");
    if (!r.ok()) continue;
    inferd::InferResponse resp;
    resp.outputs = r->request->inputs;
    (void)inferd::v1::EncodePredictResponse(resp, inferd::v1::Format::kRow);
    (void)inferd::v1::EncodePredictResponse(resp, inferd::v1::Format::kColumnar);
  }
  return 0;
}
