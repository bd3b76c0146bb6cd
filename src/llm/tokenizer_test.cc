// Tokenizers against their references (backends/llm/testdata/make_fixtures.py):
// byte-level BPE against OpenAI's GPT-2 encoding algorithm, SentencePiece
// against python3-sentencepiece; streaming decoding against decoding at once.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <climits>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "llm/bpe_tokenizer.h"
#include "llm/sentencepiece/sentencepiece_tokenizer.h"
#include "llm/tokenizer_loader.h"

namespace inferd::llm {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Sample {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
};

std::vector<Sample> Samples(const std::string& dir) {
  rapidjson::Document d;
  const std::string text = Read(dir + "/reference.json");
  d.Parse(text.data(), text.size());
  std::vector<Sample> out;
  for (const auto& s : d.GetArray()) {
    Sample x;
    x.text = s["text"].GetString();
    for (const auto& v : s["ids"].GetArray()) x.ids.push_back(v.GetInt());
    if (s.HasMember("decoded")) x.decoded = s["decoded"].GetString();
    out.push_back(std::move(x));
  }
  return out;
}

const std::string kFixtures = INFERD_LLM_FIXTURES;

void ExpectStreamsLikeWhole(const Tokenizer& t, const std::vector<int32_t>& ids) {
  IncrementalDecoder dec(&t, {}, false);
  std::string streamed;
  for (int32_t id : ids) streamed += dec.Push(id);
  streamed += dec.Flush();
  EXPECT_EQ(streamed, t.Decode(ids, false));
}

// Ids spell fixed bytes (a tokenizer with byte tokens, in miniature).
class TableTokenizer final : public Tokenizer {
 public:
  explicit TableTokenizer(std::vector<std::string> table) : table_(std::move(table)) {}
  std::vector<int32_t> Encode(std::string_view, bool) const override { return {}; }
  std::string Decode(std::span<const int32_t> ids, bool) const override {
    std::string out;
    for (int32_t id : ids) out += table_.at(static_cast<size_t>(id));
    return out;
  }
  std::optional<int32_t> TokenId(std::string_view) const override { return std::nullopt; }
  bool IsSpecial(int32_t) const override { return false; }
  int64_t vocab_size() const override { return static_cast<int64_t>(table_.size()); }

 private:
  std::vector<std::string> table_;
};

TEST(IncrementalDecoderTest, APartialCharacterHoldsBackOnlyItsOwnBytes) {
  TableTokenizer t({"Hello", " wor", "\xE2", "\x82", "\xAC", "ld", "ab\xE2"});
  IncrementalDecoder dec(&t, {}, false);
  EXPECT_EQ(dec.Push(0), "Hello");
  EXPECT_EQ(dec.Push(6), "ab");  // sent at once; the euro sign's first byte waits
  EXPECT_EQ(dec.Push(3), "");
  EXPECT_EQ(dec.Push(4), "\xE2\x82\xAC");
  EXPECT_EQ(dec.Push(1), " wor");
  EXPECT_EQ(dec.Push(2), "");
  EXPECT_EQ(dec.Push(5),
            "\xE2"
            "ld");  // a byte that never became a character goes out as it is (the JSON writers replace it)
  EXPECT_EQ(dec.Push(2), "");
  EXPECT_EQ(dec.Flush(), "\xEF\xBF\xBD");
  ExpectStreamsLikeWhole(t, {0, 6, 3, 4, 1, 5});
}

TEST(ByteLevelBpe, VocabAndMergesMatchGpt2Encoding) {
  auto t = ByteLevelBpe::FromVocabAndMerges(Read(kFixtures + "/bpe/vocab.json"), Read(kFixtures + "/bpe/merges.txt"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (const Sample& s : Samples(kFixtures + "/bpe")) {
    EXPECT_EQ((*t)->Encode(s.text, false), s.ids) << s.text;
    EXPECT_EQ((*t)->Decode(s.ids, false), s.text);
    ExpectStreamsLikeWhole(**t, s.ids);
  }
}

// GPT-2's bpe() as written (rescan, merge every occurrence of the lowest-ranked pair), on ASCII letters (which
// the byte-level mapping keeps as they are): the reference for the heap-based EncodePiece.
std::vector<std::string> ReferenceBpe(const std::string& word, const std::map<std::string, int>& ranks) {
  std::vector<std::string> w;
  for (char c : word) w.emplace_back(1, c);
  while (w.size() > 1) {
    int best = INT_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      auto it = ranks.find(w[i] + " " + w[i + 1]);
      if (it != ranks.end() && it->second < best) best = it->second, at = i;
    }
    if (best == INT_MAX) break;
    const std::string l = w[at], r = w[at + 1];
    std::vector<std::string> m;
    for (size_t i = 0; i < w.size();) {
      if (i + 1 < w.size() && w[i] == l && w[i + 1] == r) {
        m.push_back(l + r);
        i += 2;
      } else {
        m.push_back(w[i++]);
      }
    }
    w = std::move(m);
  }
  return w;
}

TEST(ByteLevelBpe, LongWordsMergeAsGpt2sAlgorithmDoes) {
  // A merges list made the way training makes one (a merge joins tokens that exist before it), over four letters.
  std::mt19937 rng(7);
  std::vector<std::string> tokens = {"a", "b", "c", "d"};
  std::map<std::string, int> ranks;
  std::string merges = "#version: 0.2\n";
  while (ranks.size() < 80) {
    const std::string& x = tokens[rng() % tokens.size()];
    const std::string& y = tokens[rng() % tokens.size()];
    const std::string pair = x + " " + y;
    if (x.size() + y.size() > 10 || ranks.count(pair)) continue;
    ranks.emplace(pair, static_cast<int>(ranks.size()));
    merges += pair + "\n";
    if (std::find(tokens.begin(), tokens.end(), x + y) == tokens.end()) tokens.push_back(x + y);
  }
  std::map<std::string, int> ids;
  std::string vocab = "{";
  for (const std::string& t : tokens) {
    vocab += (ids.empty() ? "\"" : ",\"") + t + "\":" + std::to_string(ids.size());
    ids.emplace(t, static_cast<int>(ids.size()));
  }
  vocab += "}";
  auto t = ByteLevelBpe::FromVocabAndMerges(vocab, merges);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (int k = 0; k < 300; ++k) {
    std::string word(1 + rng() % (k < 250 ? 40 : 2000), 'a');
    for (char& c : word) c = static_cast<char>('a' + rng() % 4);
    std::vector<int32_t> want;
    for (const std::string& sym : ReferenceBpe(word, ranks)) want.push_back(ids.at(sym));
    ASSERT_EQ((*t)->Encode(word, false), want) << word;
  }
}

TEST(ByteLevelBpe, EveryOccurrenceOfARankMergesBeforeThePairsItForms) {
  // "abc" is made by two merges ("ab c", rank 2; "a bc", rank 4). In "abcabc", after "b c" the word is
  // a|bc|a|bc; GPT-2 merges both "a bc" (abc|abc) before "abc a" (rank 3, formed by the first of them) -- merged
  // at once it would take the second "a" (abca|bc).
  auto t = ByteLevelBpe::FromVocabAndMerges(R"({"a":0,"b":1,"c":2,"bc":3,"ab":4,"abc":5,"abca":6})",
                                            "#version: 0.2\nb c\na b\nab c\nabc a\na bc\n");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->Encode("abcabc", false), (std::vector<int32_t>{5, 5}));
}

TEST(ByteLevelBpe, TokenizerJsonMatchesAndParsesSpecialTokens) {
  auto t = ByteLevelBpe::FromTokenizerJson(Read(kFixtures + "/bpe/tokenizer.json"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (const Sample& s : Samples(kFixtures + "/bpe")) EXPECT_EQ((*t)->Encode(s.text, false), s.ids) << s.text;
  const auto eot = (*t)->TokenId("<|endoftext|>");
  ASSERT_TRUE(eot.has_value());
  EXPECT_EQ((*t)->eos_id(), *eot);
  EXPECT_TRUE((*t)->IsSpecial(*eot));
  auto ids = (*t)->Encode("Hello<|endoftext|>world", true);
  ASSERT_NE(std::find(ids.begin(), ids.end(), *eot), ids.end());
  EXPECT_EQ((*t)->Decode(ids, false), "Hello<|endoftext|>world");
  EXPECT_EQ((*t)->Decode(ids, true), "Helloworld");
  auto plain = (*t)->Encode("Hello<|endoftext|>world", false);
  EXPECT_EQ(std::find(plain.begin(), plain.end(), *eot), plain.end());
}

TEST(ByteLevelBpe, RefusesOtherTokenizersAndMalformedFiles) {
  EXPECT_EQ(ByteLevelBpe::FromTokenizerJson(R"({"model": {"type": "WordPiece", "vocab": {}}})").status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(ByteLevelBpe::FromTokenizerJson("{").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ByteLevelBpe::FromVocabAndMerges(R"({"a": "x"})", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ByteLevelBpe::FromVocabAndMerges(R"({"a": 0})", "nospace\n").status().code(), StatusCode::kInvalidArgument);
}

TEST(SplitGpt2, SplitsLikeTheRegex) {
  auto pieces = SplitGpt2("Hello  world's 42!\n\nok ");
  std::vector<std::string> got(pieces.begin(), pieces.end());
  EXPECT_EQ(got, (std::vector<std::string>{"Hello", " ", " world", "'s", " 42", "!", "\n", "\n", "ok", " "}));
}

TEST(SentencePiece, MatchesPythonSentencePiece) {
  auto t = LoadSentencePiece(kFixtures + "/sentencepiece/tokenizer.model");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->bos_id(), 1);
  EXPECT_EQ((*t)->eos_id(), 2);
  EXPECT_TRUE((*t)->adds_bos());
  for (const Sample& s : Samples(kFixtures + "/sentencepiece")) {
    EXPECT_EQ((*t)->Encode(s.text, false), s.ids) << s.text;
    EXPECT_EQ((*t)->Decode(s.ids, false), s.decoded);
    ExpectStreamsLikeWhole(**t, s.ids);
  }
  auto ids = (*t)->Encode("hello</s>world", true);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 2), ids.end());
  // Each part gets sentencepiece's dummy prefix (Hugging Face's legacy Llama behaviour).
  EXPECT_EQ((*t)->Decode(ids, true), "hello world");
}

TEST(SentencePiece, RefusesGarbage) {
  EXPECT_EQ(SentencePieceFromBytes("not a model").status().code(), StatusCode::kInvalidArgument);
}

TEST(LoadTokenizer, PicksTheFilesOfTheFolder) {
  auto bpe = LoadTokenizer(kFixtures + "/bpe");
  ASSERT_TRUE(bpe.ok()) << bpe.status().ToString();
  auto sp = LoadTokenizer(kFixtures + "/sentencepiece");
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  EXPECT_EQ(sp->tokenizer->vocab_size(), 400);
  EXPECT_EQ(LoadTokenizer(kFixtures + "/llama").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace inferd::llm
