#include "scheduler/structured_decoding.h"

#include <algorithm>
#include <chrono>
#include <limits>

namespace inferd {

SequenceGrammar::SequenceGrammar(std::shared_ptr<llm::GrammarMatcher> matcher, const llm::TokenTrie* trie,
                                 const std::vector<std::string>* bytes, GenerativeStats* stats)
    : matcher_(std::move(matcher)), trie_(trie), bytes_(bytes), stats_(stats), state_(matcher_->Start()) {}

Status SequenceGrammar::Mask(std::span<float> logits, std::span<const int32_t> end_ids) {
  const auto start = std::chrono::steady_clock::now();
  end_logits_.clear();
  for (int32_t e : end_ids) {
    end_logits_.push_back(e >= 0 && static_cast<size_t>(e) < logits.size() ? logits[static_cast<size_t>(e)] : 0.f);
  }
  const std::span<const uint64_t> allowed = matcher_->Mask(state_, *trie_);
  if (!matcher_->health().ok()) return matcher_->health();
  constexpr float kRefused = -std::numeric_limits<float>::infinity();
  size_t open = 0;  // tokens the mask allows, end tokens aside (below)
  for (size_t w = 0; w < allowed.size(); ++w) {
    uint64_t bits = allowed[w];
    open += static_cast<size_t>(__builtin_popcountll(bits));
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(logits.size(), w * 64 + 64);
    for (size_t t = w * 64; t < end; ++t, bits >>= 1) {
      if ((bits & 1) == 0) logits[t] = kRefused;
    }
  }
  for (size_t t = allowed.size() * 64; t < logits.size(); ++t) logits[t] = kRefused;
  // End tokens only where the text may end, with the model's own logit (a
  // chat's end token may also spell text the grammar allows: it still ends).
  const bool may_end = llm::GrammarMatcher::Complete(state_);
  bool any_end = false;
  for (size_t k = 0; k < end_ids.size(); ++k) {
    const auto e = static_cast<size_t>(end_ids[k]);
    if (end_ids[k] < 0 || e >= logits.size()) continue;
    const bool repeated = std::find(end_ids.begin(), end_ids.begin() + static_cast<std::ptrdiff_t>(k), end_ids[k]) !=
                          end_ids.begin() + static_cast<std::ptrdiff_t>(k);
    if (!repeated && e / 64 < allowed.size() && (allowed[e / 64] >> (e % 64) & 1)) --open;
    logits[e] = may_end ? end_logits_[k] : kRefused;
    any_end = any_end || may_end;
  }
  const bool any = open > 0 || any_end;
  stats_->structured_masks.fetch_add(1, std::memory_order_relaxed);
  stats_->structured_mask_ns.fetch_add(
      static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()),
      std::memory_order_relaxed);
  if (!any) return Status::FailedPrecondition("no token of the vocabulary can continue the structured output");
  return Status::OK();
}

Status SequenceGrammar::Accept(int32_t token) {
  const std::string empty;
  const std::string& b =
      token >= 0 && static_cast<size_t>(token) < bytes_->size() ? (*bytes_)[static_cast<size_t>(token)] : empty;
  if (b.empty() || !matcher_->AcceptBytes(&state_, b)) {
    if (!matcher_->health().ok()) return matcher_->health();
    return Status::Internal("token " + std::to_string(token) + " does not continue the structured output");
  }
  return Status::OK();
}

StructuredDecoding::StructuredDecoding(const llm::Tokenizer* tokenizer, int64_t vocab, GenerativeStats* stats,
                                       size_t max_grammars)
    : tokenizer_(tokenizer), vocab_(vocab), stats_(stats), max_grammars_(max_grammars) {}

Result<std::unique_ptr<SequenceGrammar>> StructuredDecoding::Start(const llm::StructuredOutput& s) {
  stats_->structured_requests.fetch_add(1, std::memory_order_relaxed);
  if (!trie_) {
    bytes_.resize(static_cast<size_t>(vocab_));
    const int64_t known = tokenizer_->vocab_size();
    for (int64_t id = 0; id < vocab_ && id < known; ++id) {
      bytes_[static_cast<size_t>(id)] = tokenizer_->TokenBytes(static_cast<int32_t>(id));
    }
    trie_ = std::make_unique<llm::TokenTrie>(bytes_);
  }
  std::string key = s.CacheKey();
  auto it = grammars_.find(key);
  if (it != grammars_.end()) {
    stats_->structured_cache_hits.fetch_add(1, std::memory_order_relaxed);
    lru_.splice(lru_.begin(), lru_, it->second.at);
    // A matcher whose node table grew large (or past its limits) is replaced; running sequences keep the old one.
    llm::GrammarMatcher& m = *it->second.matcher;
    if (!m.health().ok() || m.num_nodes() > llm::GrammarMatcherLimits{}.max_nodes / 2) {
      it->second.matcher = std::make_shared<llm::GrammarMatcher>(it->second.grammar);
    }
  } else {
    const auto start = std::chrono::steady_clock::now();
    INFERD_ASSIGN_OR_RETURN(std::shared_ptr<const llm::Grammar> g, llm::CompileStructuredOutput(s));
    stats_->structured_compile_s.Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (grammars_.size() >= max_grammars_) {
      grammars_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    it = grammars_.emplace(std::move(key), Entry{g, std::make_shared<llm::GrammarMatcher>(g), lru_.begin()}).first;
  }
  auto seq = std::make_unique<SequenceGrammar>(it->second.matcher, trie_.get(), &bytes_, stats_);
  if (!it->second.matcher->health().ok()) return it->second.matcher->health();
  return seq;
}

}  // namespace inferd
