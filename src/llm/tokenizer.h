// Tokenizer: text <-> token ids for a generative model. Implementations:
// ByteLevelBpe (GPT-2's byte-level BPE from tokenizer.json or vocab.json +
// merges.txt; bpe_tokenizer.h) and SentencePieceTokenizer (tokenizer.model
// through libsentencepiece; sentencepiece/). LoadTokenizer (tokenizer_loader.h)
// picks one from a model folder.
//
// Thread-safety: a loaded tokenizer is immutable; every method is const and
// may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace inferd::llm {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // The ids of `text`. With `parse_special`, special tokens spelt out in the
  // text ("<|im_start|>", "</s>") become their ids (chat templates need it);
  // without, they are ordinary text. No BOS is added here.
  virtual std::vector<int32_t> Encode(std::string_view text, bool parse_special) const = 0;
  // The bytes the ids spell (may end inside a UTF-8 sequence, and may hold
  // invalid UTF-8 when the ids do). Special tokens are left out when
  // `skip_special`. Ids outside the vocabulary spell nothing.
  virtual std::string Decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  // The bytes token `id` adds to text that already has some (SentencePiece's
  // word-boundary mark as a space, a byte piece as its byte): what a grammar
  // sees. Empty for special tokens and ids outside the vocabulary.
  virtual std::string TokenBytes(int32_t id) const {
    if (IsSpecial(id)) return {};
    return Decode(std::span<const int32_t>(&id, 1), true);
  }
  // The id of a token given by its text (special tokens: "</s>"), if any.
  virtual std::optional<int32_t> TokenId(std::string_view token) const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;
  // What the tokenizer file says (-1 when it says nothing); the model's
  // config.json may override these.
  virtual int32_t bos_id() const { return -1; }
  virtual int32_t eos_id() const { return -1; }
  // Whether a sequence starts with BOS when encoded for this model (Llama: yes).
  virtual bool adds_bos() const { return false; }
};

// A token matched verbatim in text before the tokenizer's own splitting
// (special and added tokens).
struct VerbatimToken {
  std::string text;
  int32_t id;
};

// Encodes `text` whose spans equal to one of `verbatim` (longest first: the
// first match at a position wins) become that token's id; the text between
// them goes to `encode_part`, which appends its ids to `out`.
void EncodeAroundVerbatim(std::string_view text, std::span<const VerbatimToken> verbatim,
                          const std::function<void(std::string_view, std::vector<int32_t>*)>& encode_part,
                          std::vector<int32_t>* out);

// Streams text out of generated ids: each Push returns the text that became
// final (never half a UTF-8 character; a tokenizer whose pieces depend on
// their neighbours, like SentencePiece's leading-space rule, decodes a small
// window so the text is the same as decoding everything at once).
class IncrementalDecoder {
 public:
  // `prompt_tail`: the last few prompt ids (context for the first pieces).
  IncrementalDecoder(const Tokenizer* tokenizer, std::span<const int32_t> prompt_tail, bool skip_special);
  std::string Push(int32_t id);
  // What is left (an incomplete character at the end becomes U+FFFD).
  std::string Flush();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_ = 0;  // ids_[prefix_, read_) were decoded and emitted already
  size_t read_ = 0;
  size_t sent_ =
      0;  // bytes past the decoding of ids_[prefix_, read_) already returned (text before a partial character)
};

}  // namespace inferd::llm
