#include "backends/python/protocol.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backends/python/shared_region.h"

namespace inferd::python {
namespace {

TEST(PythonProtocol, ParsesResponsesWithPerRequestErrors) {
  auto m = ParseWorkerMessage(R"({"type":"responses","out_size":8192,"responses":[)"
                              R"({"outputs":[{"name":"Y","datatype":"FP32","shape":[1,2],"offset":64,"size":8}]},)"
                              R"({"error":{"message":"bad row","code":3}}]})");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->kind, WorkerMessage::Kind::kResponses);
  EXPECT_EQ(m->out_size, 8192u);
  ASSERT_EQ(m->answers.size(), 2u);
  ASSERT_TRUE(m->answers[0].ok());
  EXPECT_EQ((*m->answers[0])[0].shape, (Shape{1, 2}));
  EXPECT_EQ((*m->answers[0])[0].offset, 64u);
  EXPECT_EQ(m->answers[1].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(m->answers[1].status().message(), "bad row");
}

TEST(PythonProtocol, ParsesBlsCalls) {
  auto m = ParseWorkerMessage(
      R"({"type":"bls","id":7,"model":"m","version":"2","inputs":[{"name":"x","datatype":"BYTES","shape":[1],)"
      R"("offset":0,"size":5}],"outputs":["y"],"request_id":"r","parameters":{"a":1,"b":"s","c":true,"d":0.5},)"
      R"("timeout_us":10,"trace":1})");
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->bls.id, 7u);
  EXPECT_EQ(m->bls.trace_index, 1);
  EXPECT_EQ(m->bls.version, "2");
  EXPECT_EQ(m->bls.outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(std::get<int64_t>(m->bls.parameters.at("a")), 1);
  EXPECT_EQ(std::get<std::string>(m->bls.parameters.at("b")), "s");
  EXPECT_EQ(m->bls.timeout_us, 10u);
  auto untraced = ParseWorkerMessage(R"({"type":"bls","id":8,"model":"m","inputs":[],"outputs":[]})");
  ASSERT_TRUE(untraced.ok()) << untraced.status().message();
  EXPECT_EQ(untraced->bls.trace_index, -1);
}

TEST(PythonProtocol, RejectsMalformedMessages) {
  for (const char* bad : {"", "[]", "{}", R"({"type":"nope"})", R"({"type":"responses"})",
                          R"({"type":"responses","responses":[{"outputs":[{"name":"y"}]}]})",
                          R"({"type":"responses","responses":[{"outputs":[{"name":"y","datatype":"FP99","shape":[],)"
                          R"("offset":0,"size":0}]}]})",
                          R"({"type":"responses","responses":[{"outputs":[{"name":"y","datatype":"FP32","shape":[-1],)"
                          R"("offset":0,"size":0}]}]})",
                          R"({"type":"log","level":"info"})", R"({"type":"ready","out_size":-1})",
                          R"({"type":"bls","id":1,"model":"m","inputs":[],"parameters":{"x":[1]}})"}) {
    auto m = ParseWorkerMessage(bad);
    EXPECT_FALSE(m.ok()) << bad;
    if (!m.ok()) EXPECT_EQ(m.status().code(), StatusCode::kInternal) << bad;
  }
  EXPECT_FALSE(ParseWorkerMessage(R"({"type":"responses","responses":[{},{}]})", 1).ok());
}

TEST(PythonProtocol, CopyTensorChecksBoundsAndLayout) {
  std::vector<std::byte> region(64);
  const float values[2] = {1.5f, -2.0f};
  std::memcpy(region.data() + 8, values, sizeof(values));
  auto t = CopyTensor(TensorDesc{"y", DataType::kFp32, {2}, 8, 8}, region);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->as<float>()[1], -2.0f);
  EXPECT_FALSE(CopyTensor(TensorDesc{"y", DataType::kFp32, {2}, 60, 8}, region).ok());         // past the end
  EXPECT_FALSE(CopyTensor(TensorDesc{"y", DataType::kFp32, {2}, ~0ull - 2, 8}, region).ok());  // wraps
  EXPECT_FALSE(CopyTensor(TensorDesc{"y", DataType::kFp32, {3}, 8, 8}, region).ok());          // size vs shape
  // BYTES: one element "ab" = 02 00 00 00 'a' 'b'; a length past the data fails.
  const unsigned char bytes[] = {2, 0, 0, 0, 'a', 'b', 9, 0, 0, 0};
  std::memcpy(region.data(), bytes, sizeof(bytes));
  EXPECT_TRUE(CopyTensor(TensorDesc{"s", DataType::kBytes, {1}, 0, 6}, region).ok());
  EXPECT_FALSE(CopyTensor(TensorDesc{"s", DataType::kBytes, {2}, 0, 10}, region).ok());
}

TEST(PythonProtocol, EncodesExecuteAndBlsResults) {
  Parameters p{{"mode", std::string("x")}, {"n", int64_t{2}}};
  RequestToSend r{"id1", &p, {TensorDesc{"x", DataType::kInt32, {1, 3}, 0, 12}}, {"y"}};
  EXPECT_EQ(EncodeExecute("m", 4096, {r}),
            R"({"type":"execute","model":"m","in_size":4096,"requests":[{"id":"id1","parameters":{"mode":"x","n":2},)"
            R"("inputs":[{"name":"x","datatype":"INT32","shape":[1,3],"offset":0,"size":12}],"outputs":["y"]}]})");
  EXPECT_EQ(
      EncodeBlsResult(3, 10, Status::NotFound("no model"), {}),
      R"({"type":"bls_result","id":3,"in_size":10,"final":true,"error":{"message":"no model","code":2},"outputs":[]})");
}

TEST(PythonProtocol, TritonErrorCodesRoundTrip) {
  for (int64_t code : {2, 3, 4, 5, 6, 7}) EXPECT_EQ(TritonErrorCode(StatusFromTritonError(code, "m")), code);
  EXPECT_EQ(StatusFromTritonError(0, "m").code(), StatusCode::kInternal);
}

TEST(SharedRegion, GrowsUpToItsLimitAndNeverShrinks) {
  auto r = SharedRegion::Create("test", 4096, 1 << 16);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->size(), 4096u);
  auto a = r->Allocate(10);
  auto b = r->Allocate(5000);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, 0u);
  EXPECT_EQ(*b, 64u);  // aligned
  EXPECT_GE(r->size(), 5064u);
  std::memset(r->data() + *b, 1, 5000);  // mapped and writable
  EXPECT_EQ(r->Allocate(1 << 16).status().code(), StatusCode::kResourceExhausted);
  r->Reset();
  EXPECT_EQ(*r->Allocate(1), 0u);
  // The writer side cannot shrink the file: the seal refuses it.
  EXPECT_NE(ftruncate(r->fd(), 0), 0);
  // A reader follows a larger size only when the file has it.
  auto reader = SharedRegion::Create("reader", 4096, 1 << 16);
  ASSERT_TRUE(reader.ok());
  EXPECT_FALSE(reader->Follow(1 << 15).ok());
  EXPECT_FALSE(reader->Follow(1 << 20).ok());
  ASSERT_EQ(ftruncate(reader->fd(), 1 << 15), 0);
  EXPECT_TRUE(reader->Follow(1 << 15).ok());
  EXPECT_EQ(reader->size(), 1u << 15);
}

}  // namespace
}  // namespace inferd::python
