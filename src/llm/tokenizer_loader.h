// LoadTokenizer: the tokenizer of a Hugging Face model folder, and what
// tokenizer_config.json says about it (chat template family, BOS/EOS texts,
// whether BOS is added).
//
// Order: tokenizer.json (byte-level BPE), else tokenizer.model
// (SentencePiece), else vocab.json + merges.txt (GPT-2's files).
//
// Thread-safety: pure function; the result is immutable.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "llm/chat_template.h"
#include "llm/tokenizer.h"

namespace inferd::llm {

struct TokenizerBundle {
  std::shared_ptr<const Tokenizer> tokenizer;
  std::optional<ChatTemplate> chat_template;  // recognised from tokenizer_config.json's Jinja
  bool has_jinja_template = false;            // it had one (recognised or not)
  std::string bos_text, eos_text;             // tokenizer_config.json's bos_token / eos_token
  std::optional<bool> add_bos;                // tokenizer_config.json's add_bos_token
};

Result<TokenizerBundle> LoadTokenizer(const std::string& dir);

}  // namespace inferd::llm
