// StructuredDecoding: structured outputs in the generative scheduler. It
// compiles a request's StructuredOutput (llm/structured_output.h) once per
// distinct request (an LRU of compiled grammars, each with its matcher's
// memo and mask cache), builds the vocabulary's byte trie on first use, and
// gives each sequence a SequenceGrammar that masks the logits before
// sampling and follows the sampled tokens.
//
// Thread-safety: not thread-safe; the scheduler's loop thread owns it and
// every SequenceGrammar it made (they share its matchers). Counters go to
// GenerativeStats (atomics).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "llm/grammar_matcher.h"
#include "llm/structured_output.h"
#include "llm/tokenizer.h"
#include "metrics/generative_stats.h"

namespace inferd {

class SequenceGrammar {
 public:
  // `trie` and `bytes` (each token's bytes) belong to the StructuredDecoding that made this.
  SequenceGrammar(std::shared_ptr<llm::GrammarMatcher> matcher, const llm::TokenTrie* trie,
                  const std::vector<std::string>* bytes, GenerativeStats* stats);

  // Sets the logits of the tokens the grammar refuses to -inf; `end_ids` stay
  // only where the text may end. FAILED_PRECONDITION when no token of the
  // vocabulary can continue the text.
  Status Mask(std::span<float> logits, std::span<const int32_t> end_ids);
  // Follows a sampled token (not an end id).
  Status Accept(int32_t token);
  // Nothing may follow the text: the answer is complete.
  bool finished() const { return llm::GrammarMatcher::Finished(state_); }

 private:
  std::shared_ptr<llm::GrammarMatcher> matcher_;
  const llm::TokenTrie* trie_;
  const std::vector<std::string>* bytes_;
  GenerativeStats* stats_;
  llm::GrammarState state_;
  std::vector<float> end_logits_;  // scratch
};

class StructuredDecoding {
 public:
  // `tokenizer` outlives this; `vocab` is the width of the model's logits.
  StructuredDecoding(const llm::Tokenizer* tokenizer, int64_t vocab, GenerativeStats* stats, size_t max_grammars = 64);

  // INVALID_ARGUMENT naming what the request asks that cannot be kept.
  Result<std::unique_ptr<SequenceGrammar>> Start(const llm::StructuredOutput& s);

 private:
  const llm::Tokenizer* tokenizer_;
  int64_t vocab_;
  GenerativeStats* stats_;
  size_t max_grammars_;
  std::vector<std::string> bytes_;  // each token's bytes (TokenBytes)
  std::unique_ptr<llm::TokenTrie> trie_;
  std::list<std::string> lru_;  // most recent first
  struct Entry {
    std::shared_ptr<const llm::Grammar> grammar;
    std::shared_ptr<llm::GrammarMatcher> matcher;
    std::list<std::string>::iterator at;
  };
  std::unordered_map<std::string, Entry> grammars_;
};

}  // namespace inferd
