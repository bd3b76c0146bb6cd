#include "bench/request_builder.h"

#include <gtest/gtest.h>

namespace inferd::bench {
namespace {

ModelDesc Mlp() {
  ModelDesc m;
  m.name = "mlp";
  m.batched = true;
  m.inputs.push_back(InputDesc{"x", DataType::kFp32, {-1, 2}});
  return m;
}

TEST(RequestParameter, ParsesPerfAnalyzersForm) {
  auto s = ParseRequestParameter("id:user:7:string");  // the value may hold ':'
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->name, "id");
  EXPECT_EQ(s->value, "user:7");
  EXPECT_EQ(s->type, RequestParameter::Type::kString);
  EXPECT_TRUE(ParseRequestParameter("n:-3:int").ok());
  EXPECT_TRUE(ParseRequestParameter("b:true:bool").ok());
  for (const char* bad : {"id", "id:x", ":x:string", "n:3.5:int", "b:yes:bool", "x:1:float"})
    EXPECT_FALSE(ParseRequestParameter(bad).ok()) << bad;
}

TEST(RequestParameter, GoesIntoTheV2RequestsParameters) {
  const auto inputs = RandomInputs(Mlp(), 1, 1);
  std::vector<RequestParameter> ps = {*ParseRequestParameter("id:k\"1:string"), *ParseRequestParameter("n:4:int")};
  auto json = EncodeRequest(Protocol::kV2Json, Mlp(), "", inputs, ps);
  ASSERT_TRUE(json.ok());
  EXPECT_NE(json->body.find(R"("parameters":{"id":"k\"1","n":4})"), std::string::npos) << json->body;
  auto binary = EncodeRequest(Protocol::kV2Binary, Mlp(), "", inputs, ps);
  ASSERT_TRUE(binary.ok());
  EXPECT_NE(binary->body.find(R"("parameters":{"binary_data_output":true,"id":"k\"1","n":4})"), std::string::npos);
  EXPECT_FALSE(EncodeRequest(Protocol::kV1, Mlp(), "", inputs, ps).ok());
  auto plain = EncodeRequest(Protocol::kV2Json, Mlp(), "", inputs);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->body.find("parameters"), std::string::npos);
}

}  // namespace
}  // namespace inferd::bench
