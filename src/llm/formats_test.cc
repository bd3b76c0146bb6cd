// safetensors headers, config.json, chat templates and UTF-8 helpers.
#include <gtest/gtest.h>

#include <cstring>

#include "llm/chat_template.h"
#include "llm/decoder_config.h"
#include "llm/safetensors.h"
#include "llm/unicode_tables.h"

namespace inferd::llm {
namespace {

std::string File(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_bytes, '\0');
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
  auto f = SafetensorsFile::FromBytes(File(R"({"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
               "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},
               "__metadata__": {"format": "pt"}})",
                                           32));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const SafetensorsEntry* a = (*f)->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DataType::kFp32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ((*f)->Data(*a).size(), 24u);
  EXPECT_EQ((*f)->Find("b")->dtype, DataType::kBf16);
  EXPECT_EQ((*f)->header().metadata.at("format"), "pt");
}

TEST(Safetensors, RefusesBadHeaders) {
  struct Case {
    std::string header;
    size_t data;
    std::string needle;
  } cases[] = {
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", 8, "4 bytes for 2 elements"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 4, "outside the file"},
      {R"({"a": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}})", 2, "does not read"},
      {R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, "not a size"},
      {R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
           "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}})",
       8, "overlap"},
      {R"({"a": {"dtype": "F32", "shape": [1]}})", 4, "data_offsets"},
      {R"([1, 2])", 0, "not a JSON object"},
      {R"({"a": )", 0, "not valid JSON"},
  };
  for (const Case& c : cases) {
    auto f = SafetensorsFile::FromBytes(File(c.header, c.data));
    ASSERT_FALSE(f.ok()) << c.header;
    EXPECT_EQ(f.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(f.status().message().find(c.needle), std::string::npos) << f.status().message();
  }
  std::string huge(8, '\xff');
  EXPECT_FALSE(SafetensorsFile::FromBytes(huge).ok());
  EXPECT_FALSE(SafetensorsFile::FromBytes("abc").ok());
}

TEST(DecoderConfig, ReadsLlamaAndGpt2) {
  auto l = ParseDecoderConfig(R"({"model_type": "llama", "vocab_size": 100, "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 128,
      "max_position_embeddings": 512, "rms_norm_eps": 1e-6, "eos_token_id": [2, 7], "bos_token_id": 1})");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->architecture, Architecture::kLlama);
  EXPECT_EQ(l->head_dim, 8);
  EXPECT_EQ(l->num_kv_heads, 2);
  EXPECT_EQ(l->eos_token_ids, (std::vector<int32_t>{2, 7}));
  EXPECT_FALSE(l->tie_word_embeddings);
  auto g = ParseDecoderConfig(R"({"model_type": "gpt2", "vocab_size": 50, "n_embd": 32, "n_layer": 1,
      "n_head": 4, "n_positions": 64, "n_inner": null})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->intermediate_size, 128);
  EXPECT_TRUE(g->tie_word_embeddings);
  EXPECT_TRUE(g->attention_bias);
}

TEST(DecoderConfig, RefusesWhatItCannotRun) {
  EXPECT_EQ(ParseDecoderConfig(R"({"model_type": "bert"})").status().code(), StatusCode::kUnimplemented);
  EXPECT_EQ(ParseDecoderConfig("[").status().code(), StatusCode::kInvalidArgument);
  auto missing = ParseDecoderConfig(R"({"model_type": "llama", "vocab_size": 10})");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("hidden_size"), std::string::npos);
  auto gqa = ParseDecoderConfig(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 3, "intermediate_size": 8,
      "max_position_embeddings": 8})");
  EXPECT_EQ(gqa.status().code(), StatusCode::kInvalidArgument);
  auto huge = ParseDecoderConfig(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 1000000000,
      "num_hidden_layers": 1, "num_attention_heads": 8, "intermediate_size": 8, "max_position_embeddings": 8})");
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  auto eos = ParseDecoderConfig(R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 8, "intermediate_size": 8, "max_position_embeddings": 8,
      "eos_token_id": 10})");
  EXPECT_EQ(eos.status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplate, RendersTheFamilies) {
  std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  EXPECT_EQ(*RenderChat(ChatTemplate::kChatML, m, "<s>", "</s>"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
            "Hello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*RenderChat(ChatTemplate::kLlama2, m, "<s>", "</s>"),
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello! </s><s>[INST] Bye [/INST]");
  EXPECT_EQ(*RenderChat(ChatTemplate::kMistral, m, "<s>", "</s>"),
            "<s>[INST] Be brief.\n\nHi [/INST]Hello!</s><s>[INST] Bye [/INST]");
  EXPECT_EQ(*RenderChat(ChatTemplate::kLlama3, {{"user", "Hi"}}, "<|begin_of_text|>", ""),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(ChatEndTokens(ChatTemplate::kChatML), std::vector<std::string>{"<|im_end|>"});
  EXPECT_EQ(DetectChatTemplate("{% for m in messages %}<|im_start|>{{ m.role }}"), ChatTemplate::kChatML);
  EXPECT_EQ(DetectChatTemplate("{{ bos_token }}[INST] <<SYS>>"), ChatTemplate::kLlama2);
}

TEST(ChatTemplate, RefusesMalformedConversations) {
  EXPECT_EQ(RenderChat(ChatTemplate::kChatML, {}, "", "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(RenderChat(ChatTemplate::kChatML, {{"robot", "x"}}, "", "").status().code(), StatusCode::kInvalidArgument);
  auto order = RenderChat(ChatTemplate::kLlama2, {{"user", "a"}, {"user", "b"}}, "<s>", "</s>");
  ASSERT_FALSE(order.ok());
  EXPECT_NE(order.status().message().find("alternate"), std::string::npos);
  EXPECT_FALSE(RenderChat(ChatTemplate::kGemma, {{"system", "a"}, {"user", "b"}}, "", "").ok());
}

TEST(Unicode, ClassesAndUtf8) {
  EXPECT_TRUE(IsLetter(U'é'));
  EXPECT_TRUE(IsLetter(U'日'));
  EXPECT_TRUE(IsNumber(U'４'));
  EXPECT_TRUE(IsNumber(U'½'));
  EXPECT_FALSE(IsLetter(U'🙂'));
  EXPECT_TRUE(IsWhiteSpace(0x3000));
  EXPECT_EQ(SanitizeUtf8("ok\xff\xfe!"), "ok\xEF\xBF\xBD\xEF\xBF\xBD!");
  EXPECT_EQ(SanitizeUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(IncompleteUtf8Tail("ab\xF0\x9F"), 2u);
  EXPECT_EQ(IncompleteUtf8Tail("ab\xF0\x9F\x99\x82"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("ab\xC3"), 1u);
}

}  // namespace
}  // namespace inferd::llm
