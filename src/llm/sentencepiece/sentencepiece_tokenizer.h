// SentencePieceTokenizer: a `tokenizer.model` (Llama, Mistral...) through
// Debian's libsentencepiece. sentencepiece headers stay in this folder.
//
// Special tokens spelt out in text ("<s>", "</s>", control pieces) are
// recognised when asked (parse_special): the text is split around them and
// each part encoded on its own, as Hugging Face's LlamaTokenizer does.
//
// Thread-safety: immutable after loading; const methods from any thread.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "llm/tokenizer.h"

namespace inferd::llm {

// INVALID_ARGUMENT when the file is not a sentencepiece model.
Result<std::unique_ptr<Tokenizer>> LoadSentencePiece(const std::string& path);
// A serialized model in memory (tests).
Result<std::unique_ptr<Tokenizer>> SentencePieceFromBytes(std::string_view bytes);

}  // namespace inferd::llm
