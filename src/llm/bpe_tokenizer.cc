#include "llm/bpe_tokenizer.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <climits>
#include <functional>

#include "llm/unicode_tables.h"

namespace inferd::llm {
namespace {

constexpr unsigned kTokenizerJsonFlags = rapidjson::kParseIterativeFlag | rapidjson::kParseValidateEncodingFlag;

// GPT-2's pattern as tokenizer.json spells it in a Split pre-tokenizer.
constexpr std::string_view kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

std::string_view Str(const rapidjson::Value& v) { return {v.GetString(), v.GetStringLength()}; }

bool IsOther(char32_t c) { return !IsWhiteSpace(c) && !IsLetter(c) && !IsNumber(c); }

}  // namespace

std::vector<std::string_view> SplitGpt2(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  auto cp_at = [&](size_t pos, size_t* next) {
    *next = pos;
    return NextCodePoint(text, next);
  };
  while (i < text.size()) {
    // Contractions.
    if (text[i] == '\'') {
      static constexpr std::string_view kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
      bool matched = false;
      for (std::string_view c : kContractions) {
        if (text.substr(i, c.size()) == c) {
          out.push_back(text.substr(i, c.size()));
          i += c.size();
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+".
    size_t j = i + (text[i] == ' ' ? 1 : 0);
    if (j < text.size()) {
      size_t next = 0;
      const char32_t c = cp_at(j, &next);
      bool (*cls)(char32_t) = IsLetter(c) ? &IsLetter : IsNumber(c) ? &IsNumber : IsOther(c) ? &IsOther : nullptr;
      if (cls != nullptr) {
        size_t end = next;
        while (end < text.size()) {
          size_t n2 = 0;
          if (!cls(cp_at(end, &n2))) break;
          end = n2;
        }
        out.push_back(text.substr(i, end - i));
        i = end;
        continue;
      }
    }
    // White space: "\s+(?!\S)" then "\s+".
    size_t end = i;
    size_t last_start = i;
    while (end < text.size()) {
      size_t n2 = 0;
      if (!IsWhiteSpace(cp_at(end, &n2))) break;
      last_start = end;
      end = n2;
    }
    if (end == i) {  // unreachable: every code point is in one class; guard anyway
      size_t n2 = 0;
      cp_at(i, &n2);
      out.push_back(text.substr(i, n2 - i));
      i = n2;
      continue;
    }
    if (end < text.size() && last_start > i) end = last_start;  // leave the last space to the next word
    out.push_back(text.substr(i, end - i));
    i = end;
  }
  return out;
}

ByteLevelBpe::ByteLevelBpe() {
  // GPT-2's bytes_to_unicode: printable bytes map to themselves, the others
  // to 256, 257... in byte order.
  char32_t n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_to_char_[b] = printable ? static_cast<char32_t>(b) : 256 + n++;
    char_to_byte_[byte_to_char_[b]] = static_cast<uint8_t>(b);
  }
}

Status ByteLevelBpe::AddToken(std::string token, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= kMaxVocabEntries) return Status::InvalidArgument("token id out of range");
  if (token.size() > kMaxTokenBytes) return Status::InvalidArgument("a token is longer than 1024 bytes");
  if (static_cast<size_t>(id) >= id_to_token_.size()) {
    id_to_token_.resize(static_cast<size_t>(id) + 1);
    has_token_.resize(static_cast<size_t>(id) + 1, false);
  }
  // Decoded spelling: each mapped character back to its byte; characters
  // outside the map (not byte-level) are kept as UTF-8.
  std::string raw;
  size_t pos = 0;
  while (pos < token.size()) {
    const size_t start = pos;
    const char32_t c = NextCodePoint(token, &pos);
    auto it = char_to_byte_.find(c);
    if (it != char_to_byte_.end()) {
      raw.push_back(static_cast<char>(it->second));
    } else {
      raw.append(token, start, pos - start);
    }
  }
  id_to_token_[static_cast<size_t>(id)] = std::move(raw);
  has_token_[static_cast<size_t>(id)] = true;
  token_to_id_[std::move(token)] = id;
  return Status::OK();
}

Status ByteLevelBpe::AddMerge(std::string_view left, std::string_view right) {
  if (left.empty() || right.empty()) return Status::InvalidArgument("a merge has an empty side");
  if (merge_rank_.size() >= kMaxVocabEntries) return Status::InvalidArgument("too many merges");
  std::string key(left);
  key.push_back(' ');
  key.append(right);
  merge_rank_.emplace(std::move(key), static_cast<int32_t>(merge_rank_.size()));
  return Status::OK();
}

Status ByteLevelBpe::Finish() {
  if (token_to_id_.empty()) return Status::InvalidArgument("tokenizer: the vocabulary is empty");
  special_.assign(id_to_token_.size(), false);
  for (const Added& a : added_) {
    if (a.content.empty()) return Status::InvalidArgument("tokenizer: an added token is empty");
    if (static_cast<size_t>(a.id) >= id_to_token_.size()) {
      id_to_token_.resize(static_cast<size_t>(a.id) + 1);
      has_token_.resize(static_cast<size_t>(a.id) + 1, false);
      special_.resize(static_cast<size_t>(a.id) + 1, false);
    }
    id_to_token_[static_cast<size_t>(a.id)] = a.content;
    has_token_[static_cast<size_t>(a.id)] = true;
    special_[static_cast<size_t>(a.id)] = a.special;
  }
  std::stable_sort(added_.begin(), added_.end(),
                   [](const Added& a, const Added& b) { return a.content.size() > b.content.size(); });
  // GPT-2 style tokenizers name their one special token for both ends.
  for (const Added& a : added_) {
    if (a.content == "<|endoftext|>" || a.content == "</s>" || a.content == "<|end_of_text|>") eos_id_ = a.id;
    if (a.content == "<s>" || a.content == "<|begin_of_text|>") bos_id_ = a.id;
  }
  for (const Added& a : added_) {
    all_added_.push_back({a.content, a.id});
    if (!a.special) plain_added_.push_back({a.content, a.id});
  }
  if (bos_id_ < 0 && eos_id_ >= 0 && id_to_token_[static_cast<size_t>(eos_id_)] == "<|endoftext|>") bos_id_ = eos_id_;
  return Status::OK();
}

Result<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::FromTokenizerJson(std::string_view json) {
  if (json.size() > kMaxTokenizerFileBytes) return Status::InvalidArgument("tokenizer.json is larger than 64 MiB");
  rapidjson::Document doc;
  doc.Parse<kTokenizerJsonFlags>(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::InvalidArgument("tokenizer.json is not a JSON object");
  auto model = doc.FindMember("model");
  if (model == doc.MemberEnd() || !model->value.IsObject())
    return Status::InvalidArgument("tokenizer.json has no model");
  const auto& m = model->value;
  auto type = m.FindMember("type");
  if (type == m.MemberEnd() || !type->value.IsString() || Str(type->value) != "BPE") {
    return Status::Unimplemented("tokenizer.json: only BPE models are supported");
  }
  // The pre-tokenizer must be GPT-2's: ByteLevel (with its regex), or a
  // Split with GPT-2's pattern followed by ByteLevel without one.
  auto pre = doc.FindMember("pre_tokenizer");
  bool gpt2 = false;
  if (pre != doc.MemberEnd() && pre->value.IsObject()) {
    auto is_byte_level = [](const rapidjson::Value& p, bool want_regex) {
      auto t = p.FindMember("type");
      if (t == p.MemberEnd() || !t->value.IsString() || Str(t->value) != "ByteLevel") return false;
      auto r = p.FindMember("use_regex");
      const bool regex = r == p.MemberEnd() || !r->value.IsBool() || r->value.GetBool();
      auto ap = p.FindMember("add_prefix_space");
      const bool prefix = ap != p.MemberEnd() && ap->value.IsBool() && ap->value.GetBool();
      return regex == want_regex && !prefix;
    };
    const auto& p = pre->value;
    if (is_byte_level(p, true)) gpt2 = true;
    auto t = p.FindMember("type");
    auto list = p.FindMember("pretokenizers");
    if (t != p.MemberEnd() && t->value.IsString() && Str(t->value) == "Sequence" && list != p.MemberEnd() &&
        list->value.IsArray() && list->value.Size() == 2 && list->value[0].IsObject() && list->value[1].IsObject()) {
      const auto& split = list->value[0];
      auto st = split.FindMember("type");
      auto pat = split.FindMember("pattern");
      if (st != split.MemberEnd() && st->value.IsString() && Str(st->value) == "Split" && pat != split.MemberEnd() &&
          pat->value.IsObject()) {
        auto re = pat->value.FindMember("Regex");
        if (re != pat->value.MemberEnd() && re->value.IsString() && Str(re->value) == kGpt2Pattern &&
            is_byte_level(list->value[1], false)) {
          gpt2 = true;
        }
      }
    }
  }
  if (!gpt2) return Status::Unimplemented("tokenizer.json: only GPT-2's byte-level pre-tokenizer is supported");
  std::unique_ptr<ByteLevelBpe> t(new ByteLevelBpe());
  auto vocab = m.FindMember("vocab");
  if (vocab == m.MemberEnd() || !vocab->value.IsObject())
    return Status::InvalidArgument("tokenizer.json: no model.vocab");
  if (vocab->value.MemberCount() > kMaxVocabEntries) return Status::InvalidArgument("tokenizer.json: vocab too large");
  for (auto it = vocab->value.MemberBegin(); it != vocab->value.MemberEnd(); ++it) {
    if (!it->value.IsInt()) return Status::InvalidArgument("tokenizer.json: a vocab id is not an integer");
    INFERD_RETURN_IF_ERROR(t->AddToken(std::string(Str(it->name)), it->value.GetInt()));
  }
  auto merges = m.FindMember("merges");
  if (merges == m.MemberEnd() || !merges->value.IsArray())
    return Status::InvalidArgument("tokenizer.json: no model.merges");
  for (const auto& mg : merges->value.GetArray()) {
    if (mg.IsString()) {
      std::string_view s = Str(mg);
      const size_t sp = s.find(' ');
      if (sp == std::string_view::npos) return Status::InvalidArgument("tokenizer.json: a merge is not 'left right'");
      INFERD_RETURN_IF_ERROR(t->AddMerge(s.substr(0, sp), s.substr(sp + 1)));
    } else if (mg.IsArray() && mg.Size() == 2 && mg[0].IsString() && mg[1].IsString()) {
      INFERD_RETURN_IF_ERROR(t->AddMerge(Str(mg[0]), Str(mg[1])));
    } else {
      return Status::InvalidArgument("tokenizer.json: a merge is neither 'left right' nor [left, right]");
    }
  }
  auto added = doc.FindMember("added_tokens");
  if (added != doc.MemberEnd() && added->value.IsArray()) {
    if (added->value.Size() > 1u << 16) return Status::InvalidArgument("tokenizer.json: too many added tokens");
    for (const auto& a : added->value.GetArray()) {
      if (!a.IsObject()) return Status::InvalidArgument("tokenizer.json: an added token is not an object");
      auto id = a.FindMember("id");
      auto content = a.FindMember("content");
      auto special = a.FindMember("special");
      if (id == a.MemberEnd() || !id->value.IsInt() || id->value.GetInt() < 0 ||
          static_cast<size_t>(id->value.GetInt()) >= kMaxVocabEntries || content == a.MemberEnd() ||
          !content->value.IsString() || content->value.GetStringLength() > kMaxTokenBytes) {
        return Status::InvalidArgument("tokenizer.json: an added token needs an id and its content");
      }
      t->added_.push_back({std::string(Str(content->value)), id->value.GetInt(),
                           special != a.MemberEnd() && special->value.IsBool() && special->value.GetBool()});
    }
  }
  INFERD_RETURN_IF_ERROR(t->Finish());
  return t;
}

Result<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::FromVocabAndMerges(std::string_view vocab_json,
                                                                       std::string_view merges_txt) {
  if (vocab_json.size() > kMaxTokenizerFileBytes || merges_txt.size() > kMaxTokenizerFileBytes) {
    return Status::InvalidArgument("vocab.json or merges.txt is larger than 64 MiB");
  }
  rapidjson::Document doc;
  doc.Parse<kTokenizerJsonFlags>(vocab_json.data(), vocab_json.size());
  if (doc.HasParseError() || !doc.IsObject()) return Status::InvalidArgument("vocab.json is not a JSON object");
  if (doc.MemberCount() > kMaxVocabEntries) return Status::InvalidArgument("vocab.json: too many entries");
  std::unique_ptr<ByteLevelBpe> t(new ByteLevelBpe());
  for (auto it = doc.MemberBegin(); it != doc.MemberEnd(); ++it) {
    if (!it->value.IsInt()) return Status::InvalidArgument("vocab.json: an id is not an integer");
    INFERD_RETURN_IF_ERROR(t->AddToken(std::string(Str(it->name)), it->value.GetInt()));
  }
  size_t pos = 0;
  while (pos < merges_txt.size()) {
    size_t eol = merges_txt.find('\n', pos);
    if (eol == std::string_view::npos) eol = merges_txt.size();
    std::string_view line = merges_txt.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.starts_with("#version")) continue;
    const size_t sp = line.find(' ');
    if (sp == std::string_view::npos) return Status::InvalidArgument("merges.txt: a line is not 'left right'");
    INFERD_RETURN_IF_ERROR(t->AddMerge(line.substr(0, sp), line.substr(sp + 1)));
  }
  // GPT-2's special token lives in the vocabulary itself.
  if (auto it = t->token_to_id_.find("<|endoftext|>"); it != t->token_to_id_.end()) {
    t->added_.push_back({"<|endoftext|>", it->second, true});
  }
  INFERD_RETURN_IF_ERROR(t->Finish());
  return t;
}

void ByteLevelBpe::EncodePiece(std::string_view piece, std::vector<int32_t>* out) const {
  // GPT-2's bpe() merges the lowest-ranked adjacent pair (every occurrence, left to right) until none has a
  // merge; done by rescanning the word it is O(n^2) in the piece's length (a 64 KB word without spaces: ~1 s).
  // Here the symbols are a linked list and the pairs with a merge a min-heap by (rank, position): O(n log n).
  // The occurrences of one rank are merged together before the pairs they form are queued, as GPT-2 does (a
  // pair formed may rank before the one merged where two merges make the same token: merging at once would
  // differ).
  // A symbol is a range of the piece in the byte-to-character mapping (merging two extends the left one).
  struct Symbol {
    int32_t begin, size, prev, next;  // size 0: merged into its left neighbour
  };
  const int32_t n = static_cast<int32_t>(piece.size());
  if (n == 0) return;
  using Pair = std::pair<int32_t, int32_t>;  // (rank, position): the lowest rank first, then the leftmost
  // Scratch kept per thread: a piece allocates nothing once they have grown (most pieces are short words).
  thread_local struct {
    std::string mapped, key;
    std::vector<Symbol> sym;
    std::vector<Pair> heap;
    std::vector<int32_t> merged;
  } scratch;
  std::string& mapped = scratch.mapped;
  std::string& key = scratch.key;
  std::vector<Symbol>& sym = scratch.sym;
  std::vector<Pair>& heap = scratch.heap;  // a min-heap (std::greater)
  std::vector<int32_t>& merged = scratch.merged;
  mapped.clear();
  sym.clear();
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t begin = static_cast<int32_t>(mapped.size());
    AppendUtf8(&mapped, byte_to_char_[static_cast<unsigned char>(piece[static_cast<size_t>(i)])]);
    sym.push_back({begin, static_cast<int32_t>(mapped.size()) - begin, i - 1, i + 1 < n ? i + 1 : -1});
  }
  const auto text = [&](const Symbol& x) {
    return std::string_view(mapped).substr(static_cast<size_t>(x.begin), static_cast<size_t>(x.size));
  };
  auto rank_at = [&](int32_t a) -> int32_t {  // the merge rank of the pair that starts at symbol a; -1: none
    const Symbol& x = sym[static_cast<size_t>(a)];
    if (x.next < 0) return -1;
    key.assign(text(x));
    key.push_back(' ');
    key.append(text(sym[static_cast<size_t>(x.next)]));
    auto it = merge_rank_.find(key);
    return it == merge_rank_.end() ? -1 : it->second;
  };
  const auto push = [&heap](int32_t rank, int32_t at) {
    heap.emplace_back(rank, at);
    std::push_heap(heap.begin(), heap.end(), std::greater<Pair>());
  };
  for (int32_t i = 0; i + 1 < n; ++i)
    if (const int32_t r = rank_at(i); r >= 0) push(r, i);
  while (!heap.empty()) {
    const int32_t rank = heap.front().first;
    merged.clear();
    while (!heap.empty() && heap.front().first == rank) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<Pair>());
      const int32_t a = heap.back().second;
      heap.pop_back();
      // Stale: merged into its left neighbour, or the pair there is another one now.
      if (sym[static_cast<size_t>(a)].size == 0 || rank_at(a) != rank) continue;
      Symbol& x = sym[static_cast<size_t>(a)];
      Symbol& y = sym[static_cast<size_t>(x.next)];
      x.size += y.size;
      y.size = 0;
      x.next = y.next;
      if (y.next >= 0) sym[static_cast<size_t>(y.next)].prev = a;
      merged.push_back(a);
    }
    for (const int32_t a : merged) {
      if (const int32_t p = sym[static_cast<size_t>(a)].prev; p >= 0)
        if (const int32_t r = rank_at(p); r >= 0) push(r, p);
      if (const int32_t r = rank_at(a); r >= 0) push(r, a);
    }
  }
  for (int32_t i = 0; i >= 0; i = sym[static_cast<size_t>(i)].next) {
    const std::string_view word = text(sym[static_cast<size_t>(i)]);
    key.assign(word);
    auto it = token_to_id_.find(key);
    if (it != token_to_id_.end()) {
      out->push_back(it->second);
      continue;
    }
    // Not in the vocabulary (an incomplete file): its characters one by one.
    size_t pos = 0;
    while (pos < word.size()) {
      const size_t start = pos;
      NextCodePoint(word, &pos);
      key.assign(word.substr(start, pos - start));
      auto c = token_to_id_.find(key);
      if (c != token_to_id_.end()) out->push_back(c->second);
    }
  }
  if (sym.capacity() > (size_t{1} << 16)) scratch = {};  // a huge piece's scratch is not kept
}

void ByteLevelBpe::EncodeText(std::string_view text, std::vector<int32_t>* out) const {
  for (std::string_view piece : SplitGpt2(text)) EncodePiece(piece, out);
}

std::vector<int32_t> ByteLevelBpe::Encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  EncodeAroundVerbatim(
      text, parse_special ? all_added_ : plain_added_,
      [this](std::string_view part, std::vector<int32_t>* ids) { EncodeText(part, ids); }, &out);
  return out;
}

std::string ByteLevelBpe::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_token_[static_cast<size_t>(id)]) continue;
    if (skip_special && special_[static_cast<size_t>(id)]) continue;
    out.append(id_to_token_[static_cast<size_t>(id)]);
  }
  return out;
}

std::optional<int32_t> ByteLevelBpe::TokenId(std::string_view token) const {
  for (const Added& a : added_)
    if (a.content == token) return a.id;
  auto it = token_to_id_.find(std::string(token));
  if (it == token_to_id_.end()) return std::nullopt;
  return it->second;
}

bool ByteLevelBpe::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[static_cast<size_t>(id)];
}

}  // namespace inferd::llm
