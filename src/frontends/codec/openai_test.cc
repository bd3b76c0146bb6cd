#include "frontends/codec/openai.h"

#include <gtest/gtest.h>

#include <string>

namespace inferd::openai {
namespace {

Result<ParsedRequest> Completion(const std::string& extra) {
  return ParseRequest(Endpoint::kCompletions, R"({"model": "m", "prompt": "Once upon")" + extra + "}");
}

TEST(OpenAiCodec, AcceptsATextResponseFormatAndRefusesEveryOtherShape) {
  ASSERT_TRUE(Completion("").ok());
  ASSERT_TRUE(Completion(R"(, "response_format": {"type": "text"})").ok());
  // null is OpenAI's "not given". Any other JSON type where an object belongs, and objects that are not
  // {"type": "text"}: a 400, never a crash (the fuzzer found `true` reaching an object-only lookup).
  ASSERT_TRUE(Completion(R"(, "response_format": null)").ok());
  for (const char* rf : {"true", "false", "1", "2.5", R"("text")", "[]", R"([{"type": "text"}])", "{}",
                         R"({"type": 1})", R"({"type": "json_object"})", R"({"kind": "text"})"}) {
    auto p = Completion(std::string(R"(, "response_format": )") + rf);
    ASSERT_FALSE(p.ok()) << rf;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << rf;
    EXPECT_EQ(p.status().message(), R"('response_format' other than {"type": "text"} is not supported by this server)")
        << rf;
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
