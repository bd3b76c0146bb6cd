#include "frontends/codec/openai.h"

#include <gtest/gtest.h>

#include <string>

#include "llm/generation_request.h"

namespace inferd::openai {
namespace {

Result<ParsedRequest> Completion(const std::string& extra) {
  return ParseRequest(Endpoint::kCompletions, R"({"model": "m", "prompt": "Once upon")" + extra + "}");
}

TEST(OpenAiCodec, ResponseFormatsArePassedOnAndBadShapesRefused) {
  ASSERT_TRUE(Completion("").ok());
  // null is OpenAI's "not given"; text asks for nothing.
  for (const char* rf : {"null", R"({"type": "text"})"}) {
    auto p = Completion(std::string(R"(, "response_format": )") + rf);
    ASSERT_TRUE(p.ok()) << rf << ": " << p.status().message();
    auto g = llm::ParseGenerationRequest(*p->request);
    ASSERT_TRUE(g.ok());
    EXPECT_FALSE(g->structured.has_value()) << rf;
  }
  // JSON modes reach the scheduler as a parameter, checked early.
  auto schema = Completion(
      R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}})");
  ASSERT_TRUE(schema.ok()) << schema.status().message();
  auto g = llm::ParseGenerationRequest(*schema->request);
  ASSERT_TRUE(g.ok() && g->structured.has_value());
  EXPECT_EQ(g->structured->kind, llm::StructuredOutput::Kind::kJsonSchema);
  auto object = Completion(R"(, "response_format": {"type": "json_object"})");
  ASSERT_TRUE(object.ok()) << object.status().message();
  // Any other JSON type where an object belongs, and objects without a known type: a 400 naming the field, never a
  // crash (the fuzzer once found `true` reaching an object-only lookup).
  for (const char* rf : {"true", "false", "1", "2.5", R"("text")", "[]", R"([{"type": "text"}])", "{}",
                         R"({"type": 1})", R"({"kind": "text"})", R"({"type": "xml"})", R"({"type": "json_schema"})"}) {
    auto p = Completion(std::string(R"(, "response_format": )") + rf);
    ASSERT_FALSE(p.ok()) << rf;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << rf;
    EXPECT_NE(p.status().message().find("response_format"), std::string::npos) << rf << ": " << p.status().message();
  }
}

TEST(OpenAiCodec, RefusesUnsupportedFieldsOfAnyType) {
  for (const char* field :
       {R"("logit_bias": true)", R"("logit_bias": {"1": 2})", R"("tools": {})", R"("tools": [{"type": "function"}])",
        R"("echo": 1)", R"("echo": true)", R"("suffix": "")", R"("best_of": "2")"}) {
    auto p = Completion(std::string(", ") + field);
    ASSERT_FALSE(p.ok()) << field;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_NE(p.status().message().find("not supported by this server"), std::string::npos)
        << field << ": " << p.status().message();
  }
}

}  // namespace
}  // namespace inferd::openai
