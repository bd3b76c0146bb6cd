// Triton generate extension parsing (keys to inputs of several datatypes and
// ranks), then response encoding of what was parsed.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontends/codec/generate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<inferd::generate::InputInfo> inputs = {{"text_input", inferd::DataType::kBytes, {-1, 1}},
                                                                  {"max_tokens", inferd::DataType::kInt32, {1}},
                                                                  {"x", inferd::DataType::kFp32, {-1, 2, 2}},
                                                                  {"flag", inferd::DataType::kBool, {}}};
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto r = inferd::generate::ParseGenerateRequest(body, inputs, "m", "");
  if (!r.ok()) return 0;
  inferd::InferResponse resp;
  resp.outputs = (*r)->inputs;
  (void)inferd::generate::EncodeGenerateResponse(resp);
  return 0;
}
