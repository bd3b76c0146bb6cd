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

std::string IncrementalDecoder::Push(int32_t id) {
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  const std::string before = tokenizer_->Decode(all.subspan(prefix_, read_ - prefix_), skip_special_);
  const std::string now = tokenizer_->Decode(all.subspan(prefix_), skip_special_);
  // Wait while the text ends inside a character (raw bytes, or U+FFFD from a
  // decoder that replaces partial bytes) or has not grown past the context.
  if (now.size() <= before.size() || IncompleteUtf8Tail(now) > 0 ||
      (now.size() >= 3 && now.compare(now.size() - 3, 3, "\xEF\xBF\xBD") == 0)) {
    return "";
  }
  std::string out = now.substr(before.size());
  // Keep a short window of context: the new text starts after read_.
  prefix_ = read_;
  read_ = ids_.size();
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
  read_ = prefix_ = ids_.size();
  if (now.size() <= before.size()) return "";
  return SanitizeUtf8(std::string_view(now).substr(before.size()));
}

}  // namespace inferd::llm
