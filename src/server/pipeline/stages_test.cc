// The request pipeline's stages one at a time, on a request pinned to a
// loaded version (testing/test_version.h). The stages that wait on Redis or
// the prediction store, and the enqueue's reroute, are tested with the server
// (server/inference_server_test.cc, hybrid_serving_test.cc, the suites).
#include "server/pipeline/stages.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "server/response_cache.h"
#include "testing/test_requests.h"
#include "testing/test_version.h"

namespace inferd {
namespace {

using testing::F32;

constexpr const char* kConfig = R"(backend: "identity" max_batch_size: 8
  input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] } ])";

class StagesTest : public ::testing::Test {
 protected:
  void SetUp() override { Load(kConfig); }
  void Load(const std::string& config) {
    auto t = testing::TestVersion::Load("m", config);
    ASSERT_TRUE(t.ok()) << t.status().message();
    loaded_ = std::move(*t);
  }

  // A request with input x of `rows` rows, pinned to the loaded version; its answers land in answers_.
  std::unique_ptr<RequestContext> Pinned(int64_t rows = 1) {
    auto ctx = std::make_unique<RequestContext>();
    ctx->request = std::make_unique<InferRequest>();
    ctx->request->model_name = "m";
    ctx->request->model_version = "1";
    if (rows > 0) ctx->request->inputs.push_back(F32("x", {rows, 2}, {1, 2}));
    ctx->handle.version = loaded_->version();
    ctx->sink.final = [this](Result<InferResponse> r) { answers_.push_back(std::move(r)); };
    return ctx;
  }
  RequestStage::Verdict Process(const RequestStage& stage, std::unique_ptr<RequestContext>& ctx) {
    return stage.Process(ctx, pipeline_);
  }
  uint64_t Failures() const { return loaded_->version()->stats()->fail().count.load(); }

  std::unique_ptr<testing::TestVersion> loaded_;
  std::vector<Result<InferResponse>> answers_;
  // What Process gets (these stages never hand a request back through it).
  RequestPipeline pipeline_{[] {
    std::vector<std::unique_ptr<RequestStage>> s;
    s.push_back(MakeParametersStage());
    return s;
  }()};
};

TEST_F(StagesTest, DecodeRunsOnceByThePinnedVersionsDeclaredInputs) {
  auto stage = MakeDecodeStage();
  auto ctx = Pinned(/*rows=*/0);
  int calls = 0;
  ctx->request->decode = [&calls](const std::vector<TensorMetadata>& inputs, InferRequest& r) {
    ++calls;
    EXPECT_EQ(r.model_version, "1");
    EXPECT_EQ(inputs.size(), 1u);
    EXPECT_EQ(inputs[0].shape, (Shape{-1, 2}));  // as clients send it: the batch dimension first
    r.inputs.push_back(F32(inputs[0].name, {1, 2}, {3}));
    return Status::OK();
  };
  EXPECT_EQ(Process(*stage, ctx), RequestStage::Verdict::kContinue);
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(ctx->request->decode);  // released: a reroute does not decode again
  ASSERT_EQ(ctx->request->inputs.size(), 1u);
  EXPECT_EQ(ctx->request->inputs[0].name, "x");
  EXPECT_EQ(Process(*stage, ctx), RequestStage::Verdict::kContinue);  // a request without a decoder goes on as is
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(answers_.empty());
}

TEST_F(StagesTest, ABodyThatDoesNotDecodeIsABadRequestOfThePinnedVersion) {
  auto stage = MakeDecodeStage();
  auto ctx = Pinned(/*rows=*/0);
  ctx->request->decode = [](const std::vector<TensorMetadata>&, InferRequest&) {
    return Status::InvalidArgument("unknown input 'z'");
  };
  EXPECT_EQ(Process(*stage, ctx), RequestStage::Verdict::kTaken);
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(answers_[0].status().message(), "unknown input 'z'");
  EXPECT_EQ(Failures(), 1u);
}

TEST_F(StagesTest, ParametersSetTheSchedulingHintsAndRefuseBadOnes) {
  auto stage = MakeParametersStage();
  auto ctx = Pinned();
  ctx->request->parameters["priority"] = int64_t{2};
  ctx->request->parameters["timeout"] = int64_t{5000};
  EXPECT_EQ(Process(*stage, ctx), RequestStage::Verdict::kContinue);
  EXPECT_EQ(ctx->request->priority, 2u);
  EXPECT_EQ(ctx->request->timeout_us, 5000u);

  auto bad = Pinned();
  bad->request->parameters["priority"] = std::string("high");
  EXPECT_EQ(Process(*stage, bad), RequestStage::Verdict::kTaken);
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(answers_[0].status().message().find("priority"), std::string::npos) << answers_[0].status().message();
  EXPECT_EQ(Failures(), 1u);
}

TEST_F(StagesTest, ValidationCountsRowsAndRefusesWhatTheConfigDoesNotAccept) {
  auto stage = MakeValidationStage();
  auto ctx = Pinned(/*rows=*/3);
  EXPECT_EQ(Process(*stage, ctx), RequestStage::Verdict::kContinue);
  EXPECT_EQ(ctx->rows, 3);

  auto missing = Pinned(/*rows=*/0);
  EXPECT_EQ(Process(*stage, missing), RequestStage::Verdict::kTaken);
  auto generative = Pinned();
  generative->request->generative_api = true;  // an OpenAI route's request
  EXPECT_EQ(Process(*stage, generative), RequestStage::Verdict::kTaken);
  ASSERT_EQ(answers_.size(), 2u);
  EXPECT_EQ(answers_[0].status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(answers_[1].status().message(), "The model `m` is not a generative model (platform identity)");
  EXPECT_EQ(Failures(), 2u);
}

TEST_F(StagesTest, TheCacheStoresASuccessfulAnswerAndAHitAnswersWithoutGoingOn) {
  Load(std::string(kConfig) + " response_cache { enable: true }");
  SteadyClock clock;
  ResponseCache cache(1 << 20);
  auto stage = MakeCacheStage(&cache, &clock);

  auto miss = Pinned();
  EXPECT_EQ(Process(*stage, miss), RequestStage::Verdict::kContinue);  // goes on to run, its answer wrapped
  InferResponse answer;
  answer.model_name = "m";
  answer.model_version = "1";
  answer.outputs.push_back(F32("x", {1, 2}, {7}));
  miss->sink.final(answer);
  ASSERT_EQ(answers_.size(), 1u);

  auto hit = Pinned();
  hit->request->id = "second";
  EXPECT_EQ(Process(*stage, hit), RequestStage::Verdict::kTaken);
  ASSERT_EQ(answers_.size(), 2u);
  ASSERT_TRUE(answers_[1].ok());
  EXPECT_EQ(answers_[1]->id, "second");  // the stored answer, with this request's id
  EXPECT_EQ(testing::ToFloats(answers_[1]->outputs[0]), (std::vector<float>{7, 7}));

  auto other = Pinned(/*rows=*/2);  // other inputs: another key
  EXPECT_EQ(Process(*stage, other), RequestStage::Verdict::kContinue);
}

TEST_F(StagesTest, RulesAndClassificationWorkOnTheAnswerTheRequestAskedFor) {
  auto stage = MakeAnswerRulesStage();
  auto plain = Pinned();
  std::function<void(Result<InferResponse>)> before = plain->sink.final;
  EXPECT_EQ(Process(*stage, plain), RequestStage::Verdict::kContinue);  // nothing asked: the answer is not wrapped
  EXPECT_EQ(plain->sink.final.target_type(), before.target_type());

  auto top1 = Pinned();
  top1->request->outputs.push_back(RequestedOutput{"x", false, false, /*classification=*/1});
  EXPECT_EQ(Process(*stage, top1), RequestStage::Verdict::kContinue);
  EXPECT_TRUE(answers_.empty());  // applied to the answer, when it comes
  InferResponse answer;
  answer.outputs.push_back(F32("x", {1, 2}, {0.25f, 0.75f}));
  top1->sink.final(answer);
  ASSERT_EQ(answers_.size(), 1u);
  ASSERT_TRUE(answers_[0].ok()) << answers_[0].status().message();
  const Tensor& t = answers_[0]->outputs.at(0);
  EXPECT_EQ(t.dtype, DataType::kBytes);
  auto elements = SplitBytesElements(t.bytes());
  ASSERT_TRUE(elements.ok());
  EXPECT_EQ(std::vector<std::string>(elements->begin(), elements->end()), (std::vector<std::string>{"0.750000:1"}));
}

}  // namespace
}  // namespace inferd
