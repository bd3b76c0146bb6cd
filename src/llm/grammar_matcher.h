// GrammarMatcher: where a generated text stands in a Grammar, byte by byte,
// and which tokens may come next (the token mask applied before sampling).
//
// A position is a set of parse stacks (a pushdown automaton's configurations,
// the way llama.cpp's grammar sampler keeps them), plus the bytes of a UTF-8
// character begun but not finished. Stacks are hash-consed into a shared node
// table, so a stack is one integer, and transitions on a character are
// memoised: generation re-enters the same few positions again and again (the
// inside of a string, between two members). Masks are found by walking the
// vocabulary's byte trie (TokenTrie), cutting every subtree whose prefix the
// grammar refuses, and are cached by position.
//
// Thread-safety: a TokenTrie is immutable. A GrammarMatcher (its node table,
// memo and mask cache) is used by one thread at a time: the generative
// scheduler's loop, which owns it; GrammarState values are that thread's too.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "llm/grammar.h"

namespace inferd::llm {

// The vocabulary's tokens by the bytes they add to text, as a trie in
// preorder: node k's subtree is [k, end[k]).
class TokenTrie {
 public:
  // `bytes[id]`: what token id adds to text; empty: never allowed by a grammar.
  explicit TokenTrie(const std::vector<std::string>& bytes);

  size_t vocab_size() const { return vocab_; }
  size_t num_nodes() const { return byte_.size(); }

 private:
  friend class GrammarMatcher;
  size_t vocab_ = 0;
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;  // 1 for the first byte
  std::vector<uint32_t> end_;
  std::vector<uint32_t> ids_begin_;  // tokens ending at node k: ids_[ids_begin_[k], ids_begin_[k + 1])
  std::vector<int32_t> ids_;
};

struct GrammarState {
  std::vector<int32_t> stacks;  // sorted node ids; -1: the empty stack (the text is complete)
  uint32_t bits = 0;            // of a UTF-8 character begun
  uint8_t need = 0;             // its continuation bytes still to come
  uint8_t len = 0;              // its length in bytes
};

struct GrammarMatcherLimits {
  size_t max_nodes = 1 << 22;  // stack nodes (each 8 bytes)
  size_t max_stacks = 4096;    // stacks in one position (ambiguous grammars)
  size_t mask_cache_bytes = 64 << 20;
};

class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const Grammar> grammar, GrammarMatcherLimits limits = {});

  GrammarState Start();
  // The position after byte `b`; false when the grammar refuses it (`to` is
  // then unspecified).
  bool AcceptByte(const GrammarState& from, uint8_t b, GrammarState* to);
  bool AcceptBytes(GrammarState* state, std::string_view bytes);
  // The text so far is a whole sentence of the grammar.
  static bool Complete(const GrammarState& s) { return s.need == 0 && !s.stacks.empty() && s.stacks.front() == -1; }
  // ...and nothing may follow it.
  static bool Finished(const GrammarState& s) { return Complete(s) && s.stacks.size() == 1; }

  // Bit t of the result: token t may come next (the trie's tokens only; the
  // caller adds end-of-sequence tokens when Complete). The span stays valid
  // until the next call.
  std::span<const uint64_t> Mask(const GrammarState& s, const TokenTrie& trie);

  // RESOURCE_EXHAUSTED once the node table or a position outgrew the limits (the
  // request using it must end).
  const Status& health() const { return health_; }
  size_t num_nodes() const { return nodes_.size(); }

 private:
  struct Node {
    uint32_t pos;
    int32_t parent;
  };
  int32_t Cons(uint32_t pos, int32_t parent);
  // Every stack reached from "continue at `pos`, then return to `parent`"
  // (ExpandOnce: a position already expanded in this closure adds nothing).
  void Expand(uint32_t pos, int32_t parent, std::vector<int32_t>* out);
  void ExpandOnce(uint32_t pos, int32_t parent, std::vector<int32_t>* out);
  void Advance(const std::vector<int32_t>& from, uint32_t c, std::vector<int32_t>* to);
  bool Viable(const std::vector<int32_t>& stacks, uint32_t lo, uint32_t hi) const;

  std::shared_ptr<const Grammar> g_;
  GrammarMatcherLimits limits_;
  Status health_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> cons_;
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> memo_;  // (node, char) -> memo_pool_ range
  std::vector<int32_t> memo_pool_;
  std::unordered_map<std::string, std::vector<uint64_t>> masks_;
  size_t mask_bytes_ = 0;
  std::vector<GrammarState> walk_;  // per trie depth (Mask's scratch)
  std::vector<uint64_t> scratch_mask_;
  std::vector<int32_t> expand_;
  std::unordered_set<uint64_t> expanded_;  // ExpandOnce's closure
};

}  // namespace inferd::llm
