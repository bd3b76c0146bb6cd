// ByteLevelBpe: GPT-2's byte-level BPE. Text is split by GPT-2's
// pre-tokenizer pattern ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
// ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+), each piece's bytes are mapped to
// printable characters and merged by rank. Added tokens (special or not) are
// matched exactly before splitting.
//
// Loaded from a Hugging Face tokenizer.json (model.type "BPE" with a
// ByteLevel pre-tokenizer and decoder) or from vocab.json + merges.txt.
//
// Thread-safety: immutable after loading.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "llm/tokenizer.h"

namespace inferd::llm {

// Limits on tokenizer files (a hostile file cannot exhaust memory).
inline constexpr size_t kMaxTokenizerFileBytes = 64u << 20;
inline constexpr size_t kMaxVocabEntries = 1u << 22;
inline constexpr size_t kMaxTokenBytes = 1024;

class ByteLevelBpe final : public Tokenizer {
 public:
  // tokenizer.json's text. INVALID_ARGUMENT for malformed files,
  // UNIMPLEMENTED for tokenizers of another kind (WordPiece, Unigram, a
  // pre-tokenizer that is not GPT-2's).
  static Result<std::unique_ptr<ByteLevelBpe>> FromTokenizerJson(std::string_view json);
  // vocab.json and merges.txt's texts.
  static Result<std::unique_ptr<ByteLevelBpe>> FromVocabAndMerges(std::string_view vocab_json,
                                                                  std::string_view merges_txt);

  std::vector<int32_t> Encode(std::string_view text, bool parse_special) const override;
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const override;
  std::optional<int32_t> TokenId(std::string_view token) const override;
  bool IsSpecial(int32_t id) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }

 private:
  struct Added {
    std::string content;
    int32_t id;
    bool special;
  };
  ByteLevelBpe();
  Status AddToken(std::string token, int32_t id);
  Status AddMerge(std::string_view left, std::string_view right);
  Status Finish();
  void EncodeText(std::string_view text, std::vector<int32_t>* out) const;
  void EncodePiece(std::string_view piece, std::vector<int32_t>* out) const;

  std::unordered_map<std::string, int32_t> token_to_id_;  // byte-mapped spelling
  std::vector<std::string> id_to_token_;                  // as raw bytes (decoded)
  std::vector<bool> has_token_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" (byte-mapped)
  std::vector<Added> added_;                             // longest first
  std::vector<VerbatimToken> all_added_, plain_added_;   // longest first; plain: not special
  std::vector<bool> special_;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  char32_t byte_to_char_[256];
  std::unordered_map<char32_t, uint8_t> char_to_byte_;
};

// GPT-2's pre-tokenizer: the pieces of `text`, in order (exposed for tests).
std::vector<std::string_view> SplitGpt2(std::string_view text);

}  // namespace inferd::llm
