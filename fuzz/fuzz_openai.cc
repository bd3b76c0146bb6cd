// The OpenAI-compatible routes' request bodies (/v1/completions and
// /v1/chat/completions; the first byte picks the endpoint), then the answers
// built from what the parse produced. Invariants: no crash; a parsed request
// names its model and carries exactly one prompt input; the encoders always
// produce text (their JSON is checked in the unit and integration tests).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "frontends/codec/openai.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto endpoint = data[0] % 2 ? inferd::openai::Endpoint::kChat : inferd::openai::Endpoint::kCompletions;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto parsed = inferd::openai::ParseRequest(endpoint, body);
  if (!parsed.ok()) {
    if (inferd::openai::EncodeError(parsed.status()).empty()) std::abort();
    return 0;
  }
  if (parsed->model.empty() || parsed->request->inputs.size() != 1) std::abort();
  if (parsed->n < 1 || parsed->n > inferd::openai::kMaxChoices) std::abort();
  auto second = inferd::openai::ChoiceRequest(*parsed, parsed->n - 1);
  inferd::openai::Choice c;
  c.text = std::string(body.substr(0, 64));  // arbitrary bytes: the encoders must make them valid JSON text
  c.logprobs_json = std::string(body.substr(0, 128));
  c.finish_reason = "stop";
  inferd::openai::Usage u;
  (void)inferd::openai::EncodeResponse(endpoint, "id", 0, parsed->model, {c}, parsed->logprobs, u);
  (void)inferd::openai::EncodeChunk(endpoint, "id", 0, parsed->model, 0, true, c, parsed->logprobs, true);
  (void)second;
  return 0;
}
