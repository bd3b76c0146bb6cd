// Generative models (backend.h contract 13): a backend whose models generate
// text declares scheduler_kind() "generative", and its instances are
// GenerativeInstances. The generative scheduler (scheduler/
// generative_scheduler.h) drives the decoder step by step and does the
// tokenizing, sampling and streaming itself; Execute is never called.
//
// Thread-safety: an instance is used by the scheduler's loop thread only;
// `info` is immutable after load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "llm/chat_template.h"
#include "llm/decoder.h"
#include "llm/tokenizer.h"

namespace inferd {

struct GenerativeModelInfo {
  std::shared_ptr<const llm::Tokenizer> tokenizer;
  llm::ChatTemplate chat_template = llm::ChatTemplate::kPlain;
  std::string bos_text, eos_text;  // the texts chat templates use for BOS and EOS
  int32_t bos_id = -1;             // prepended to prompts when add_bos
  bool add_bos = false;
  std::vector<int32_t> end_ids;       // tokens that end generation (config.json's and generation_config.json's EOS)
  std::vector<int32_t> chat_end_ids;  // also end a chat's answer (the template's turn end: <|im_end|>)
};

class GenerativeInstance : public ModelInstance {
 public:
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    (void)inputs;
    return Status::Unimplemented("a generative model answers through its generative scheduler");
  }
  virtual llm::DecoderModel& decoder() = 0;
  virtual const GenerativeModelInfo& info() const = 0;
};

}  // namespace inferd
