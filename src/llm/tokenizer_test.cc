// Tokenizers against their references (backends/llm/testdata/make_fixtures.py):
// byte-level BPE against OpenAI's GPT-2 encoding algorithm, SentencePiece
// against python3-sentencepiece; streaming decoding against decoding at once.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <fstream>
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

TEST(ByteLevelBpe, VocabAndMergesMatchGpt2Encoding) {
  auto t = ByteLevelBpe::FromVocabAndMerges(Read(kFixtures + "/bpe/vocab.json"), Read(kFixtures + "/bpe/merges.txt"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  for (const Sample& s : Samples(kFixtures + "/bpe")) {
    EXPECT_EQ((*t)->Encode(s.text, false), s.ids) << s.text;
    EXPECT_EQ((*t)->Decode(s.ids, false), s.text);
    ExpectStreamsLikeWhole(**t, s.ids);
  }
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
