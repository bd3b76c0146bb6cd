#include "llm/tokenizer.h"
#include "llm/unicode_tables.h"

namespace inferd::llm {

void EncodeAroundVerbatim(std::string_view text, std::span<const VerbatimToken> verbatim,
                          const std::function<void(std::string_view, std::vector<int32_t>*)>& encode_part,
                          std::vector<int32_t>* out) {
  size_t start = 0;  // text not yet encoded begins here
  for (size_t i = 0; i < text.size() && !verbatim.empty();) {
    const VerbatimToken* hit = nullptr;
    for (const VerbatimToken& v : verbatim) {
      if (text.compare(i, v.text.size(), v.text) == 0) {
        hit = &v;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    if (i > start) encode_part(text.substr(start, i - start), out);
    out->push_back(hit->id);
    i += hit->text.size();
    start = i;
  }
  if (start < text.size()) encode_part(text.substr(start), out);
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer* tokenizer, std::span<const int32_t> prompt_tail,
                                       bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {
  const size_t keep = std::min<size_t>(prompt_tail.size(), 5);
  ids_.assign(prompt_tail.end() - static_cast<std::ptrdiff_t>(keep), prompt_tail.end());
  prefix_ = 0;
  read_ = ids_.size();
}

// Bytes at the end of `s` that may still become part of a character: an
// unfinished UTF-8 sequence, or the U+FFFD a decoder put for one.
static size_t PendingTail(std::string_view s) {
  size_t n = IncompleteUtf8Tail(s);
  if (n > 0) return n;
  // At most three: the bytes a 4-byte character has before its last.
  while (n < 9 && n + 3 <= s.size() && s.compare(s.size() - n - 3, 3, "\xEF\xBF\xBD") == 0) n += 3;
  return n;
}

std::string IncrementalDecoder::Push(int32_t id) {
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  const std::string before = tokenizer_->Decode(all.subspan(prefix_, read_ - prefix_), skip_special_);
  const std::string now = tokenizer_->Decode(all.subspan(prefix_), skip_special_);
  if (now.size() <= before.size()) return "";
  // Send what is final: all but the bytes of a character still arriving (so
  // one multi-byte character never holds back the text before it).
  const size_t tail = PendingTail(now);
  const size_t from = before.size() + sent_;
  const size_t to = now.size() - tail;
  std::string out = to > from ? now.substr(from, to - from) : std::string();
  if (tail > 0) {
    sent_ = std::max(sent_, to > before.size() ? to - before.size() : size_t{0});
    return out;
  }
  // Everything is final: the window moves on (the new text starts after read_).
  prefix_ = read_;
  read_ = ids_.size();
  sent_ = 0;
  if (prefix_ > 64) {  // drop ids no longer needed as context
    ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_));
    read_ -= prefix_;
    prefix_ = 0;
  }
  return out;
}

std::string IncrementalDecoder::Flush() {
  std::span<const int32_t> all(ids_);
  const std::string before = tokenizer_->Decode(all.subspan(prefix_, read_ - prefix_), skip_special_);
  const std::string now = tokenizer_->Decode(all.subspan(prefix_), skip_special_);
  const size_t from = before.size() + sent_;
  read_ = prefix_ = ids_.size();
  sent_ = 0;
  if (now.size() <= from) return "";
  return SanitizeUtf8(std::string_view(now).substr(from));
}

}  // namespace inferd::llm
