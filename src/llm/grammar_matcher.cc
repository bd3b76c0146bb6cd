#include "llm/grammar_matcher.h"

#include <algorithm>

namespace inferd::llm {

TokenTrie::TokenTrie(const std::vector<std::string>& bytes) : vocab_(bytes.size()) {
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes.size(); ++id) {
    if (!bytes[id].empty() && bytes[id].size() < 65535) order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes[static_cast<size_t>(a)] < bytes[static_cast<size_t>(b)] ||
           (bytes[static_cast<size_t>(a)] == bytes[static_cast<size_t>(b)] && a < b);
  });
  // Tokens sorted by bytes are a preorder walk of the trie: open the nodes of
  // each token's bytes past what it shares with the path so far.
  std::vector<uint32_t> path;  // open nodes, by depth - 1
  std::vector<std::vector<int32_t>> ids;
  std::string_view prev;
  for (int32_t id : order) {
    const std::string_view s = bytes[static_cast<size_t>(id)];
    size_t common = 0;
    while (common < s.size() && common < path.size() && common < prev.size() && s[common] == prev[common]) ++common;
    while (path.size() > common) {
      end_[path.back()] = static_cast<uint32_t>(byte_.size());
      path.pop_back();
    }
    for (size_t k = common; k < s.size(); ++k) {
      path.push_back(static_cast<uint32_t>(byte_.size()));
      byte_.push_back(static_cast<uint8_t>(s[k]));
      depth_.push_back(static_cast<uint16_t>(k + 1));
      end_.push_back(0);
      ids.emplace_back();
    }
    ids[path.back()].push_back(id);
    prev = s;
  }
  while (!path.empty()) {
    end_[path.back()] = static_cast<uint32_t>(byte_.size());
    path.pop_back();
  }
  ids_begin_.reserve(ids.size() + 1);
  for (const auto& v : ids) {
    ids_begin_.push_back(static_cast<uint32_t>(ids_.size()));
    ids_.insert(ids_.end(), v.begin(), v.end());
  }
  ids_begin_.push_back(static_cast<uint32_t>(ids_.size()));
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, GrammarMatcherLimits limits)
    : g_(std::move(grammar)), limits_(limits) {}

int32_t GrammarMatcher::Cons(uint32_t pos, int32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | static_cast<uint32_t>(parent);
  auto [it, fresh] = cons_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (fresh) {
    if (nodes_.size() >= limits_.max_nodes) {
      health_ = Status::ResourceExhausted("the grammar's parse grew past " + std::to_string(limits_.max_nodes) +
                                          " stack nodes (nesting too deep)");
    }
    nodes_.push_back({pos, parent});
  }
  return it->second;
}

void GrammarMatcher::Expand(uint32_t pos, int32_t parent, std::vector<int32_t>* out) {
  expanded_.clear();
  ExpandOnce(pos, parent, out);
}

// Stacks whose top is a character class (or -1 when the text may end there).
void GrammarMatcher::ExpandOnce(uint32_t pos, int32_t parent, std::vector<int32_t>* out) {
  if (!expanded_.insert((uint64_t{pos} << 32) | static_cast<uint32_t>(parent)).second) return;
  const Grammar::Sym& s = g_->sym(pos);
  if (s.rule == Grammar::kEnd) {
    if (parent < 0) {
      out->push_back(-1);
      return;
    }
    const Node n = nodes_[static_cast<size_t>(parent)];
    ExpandOnce(n.pos, n.parent, out);
    return;
  }
  if (s.rule == Grammar::kChars) {
    out->push_back(Cons(pos, parent));
    return;
  }
  // A reference in tail position returns straight to the parent, so "x ::= a x | ε"
  // repeats without the stack growing.
  const int32_t ret = g_->sym(pos + 1).rule == Grammar::kEnd ? parent : Cons(pos + 1, parent);
  for (uint32_t alt : g_->alternatives(s.rule)) ExpandOnce(alt, ret, out);
}

GrammarState GrammarMatcher::Start() {
  GrammarState st;
  expanded_.clear();
  for (uint32_t alt : g_->alternatives(g_->root())) ExpandOnce(alt, -1, &st.stacks);
  std::sort(st.stacks.begin(), st.stacks.end());
  st.stacks.erase(std::unique(st.stacks.begin(), st.stacks.end()), st.stacks.end());
  return st;
}

void GrammarMatcher::Advance(const std::vector<int32_t>& from, uint32_t c, std::vector<int32_t>* to) {
  to->clear();
  for (int32_t id : from) {
    if (id < 0) continue;
    const uint64_t key = (static_cast<uint64_t>(id) << 21) | c;
    auto it = memo_.find(key);
    if (it == memo_.end()) {
      expand_.clear();
      const Node n = nodes_[static_cast<size_t>(id)];
      if (g_->Matches(n.pos, c)) Expand(n.pos + 1, n.parent, &expand_);
      if (memo_pool_.size() > (64u << 20) / sizeof(int32_t)) {  // the memo is only a cache
        memo_.clear();
        memo_pool_.clear();
      }
      const auto begin = static_cast<uint32_t>(memo_pool_.size());
      memo_pool_.insert(memo_pool_.end(), expand_.begin(), expand_.end());
      it = memo_.emplace(key, std::make_pair(begin, static_cast<uint32_t>(memo_pool_.size()))).first;
    }
    to->insert(to->end(), memo_pool_.begin() + it->second.first, memo_pool_.begin() + it->second.second);
  }
  if (to->size() > 1) {
    std::sort(to->begin(), to->end());
    to->erase(std::unique(to->begin(), to->end()), to->end());
  }
  if (to->size() > limits_.max_stacks && health_.ok()) {
    health_ = Status::ResourceExhausted("the grammar is too ambiguous: more than " +
                                        std::to_string(limits_.max_stacks) + " parses at once");
  }
}

bool GrammarMatcher::Viable(const std::vector<int32_t>& stacks, uint32_t lo, uint32_t hi) const {
  for (int32_t id : stacks) {
    if (id >= 0 && g_->MatchesSome(nodes_[static_cast<size_t>(id)].pos, lo, hi)) return true;
  }
  return false;
}

bool GrammarMatcher::AcceptByte(const GrammarState& from, uint8_t b, GrammarState* to) {
  if (!health_.ok()) return false;
  uint32_t bits = 0;
  uint8_t need = 0, len = 0;
  if (from.need == 0) {
    if (b < 0x80) {
      Advance(from.stacks, b, &to->stacks);
      to->need = to->len = 0;
      to->bits = 0;
      return !to->stacks.empty();
    }
    // Lead bytes of well-formed UTF-8 only (no overlong 0xC0/0xC1, nothing past U+10FFFF).
    if (b >= 0xC2 && b <= 0xDF) {
      bits = b & 0x1F;
      need = 1;
    } else if ((b & 0xF0) == 0xE0) {
      bits = b & 0x0F;
      need = 2;
    } else if (b >= 0xF0 && b <= 0xF4) {
      bits = b & 0x07;
      need = 3;
    } else {
      return false;
    }
    len = static_cast<uint8_t>(need + 1);
  } else {
    if ((b & 0xC0) != 0x80) return false;
    bits = (from.bits << 6) | (b & 0x3F);
    need = static_cast<uint8_t>(from.need - 1);
    len = from.len;
  }
  // The code points a character beginning with these bytes may still be:
  // shortest form only, no surrogates.
  const uint32_t min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
  uint32_t lo = bits << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
  lo = std::max(lo, min);
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo >= 0xD800 && hi <= 0xDFFF) return false;
  if (lo > hi) return false;
  if (need == 0) {
    Advance(from.stacks, bits, &to->stacks);
    to->need = to->len = 0;
    to->bits = 0;
    return !to->stacks.empty();
  }
  if (!Viable(from.stacks, lo, hi)) return false;
  to->stacks = from.stacks;
  to->bits = bits;
  to->need = need;
  to->len = len;
  return true;
}

bool GrammarMatcher::AcceptBytes(GrammarState* state, std::string_view bytes) {
  GrammarState next;
  for (char c : bytes) {
    if (!AcceptByte(*state, static_cast<uint8_t>(c), &next)) return false;
    std::swap(*state, next);
  }
  return true;
}

std::span<const uint64_t> GrammarMatcher::Mask(const GrammarState& s, const TokenTrie& trie) {
  const size_t words = (trie.vocab_ + 63) / 64;
  std::string key(reinterpret_cast<const char*>(s.stacks.data()), s.stacks.size() * sizeof(int32_t));
  key.append(reinterpret_cast<const char*>(&s.bits), sizeof(s.bits));
  key.push_back(static_cast<char>(s.need));
  key.push_back(static_cast<char>(s.len));
  if (auto it = masks_.find(key); it != masks_.end()) return it->second;
  scratch_mask_.assign(words, 0);
  if (walk_.empty()) walk_.resize(64);
  walk_[0] = s;
  const size_t n = trie.byte_.size();
  for (size_t k = 0; k < n;) {
    const size_t d = trie.depth_[k];
    if (d >= walk_.size()) walk_.resize(d + 1);
    if (!AcceptByte(walk_[d - 1], trie.byte_[k], &walk_[d])) {
      k = trie.end_[k];
      continue;
    }
    for (uint32_t j = trie.ids_begin_[k]; j < trie.ids_begin_[k + 1]; ++j) {
      const auto id = static_cast<uint32_t>(trie.ids_[j]);
      scratch_mask_[id / 64] |= uint64_t{1} << (id % 64);
    }
    ++k;
  }
  const size_t bytes = words * sizeof(uint64_t) + key.size();
  if (mask_bytes_ + bytes > limits_.mask_cache_bytes) {
    masks_.clear();
    mask_bytes_ = 0;
  }
  mask_bytes_ += bytes;
  return masks_.emplace(std::move(key), scratch_mask_).first->second;
}

}  // namespace inferd::llm
