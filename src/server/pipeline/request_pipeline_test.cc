#include "server/pipeline/request_pipeline.h"

#include <gtest/gtest.h>

#include "server/pipeline/stages.h"
#include "server/response_cache.h"

namespace inferd {
namespace {

// Records its name; `take` parks the request (the test continues it later), `answer` answers it.
class RecordingStage final : public RequestStage {
 public:
  enum class Mode { kPass, kPark, kAnswer };
  RecordingStage(const char* name, Mode mode, std::vector<std::string>* seen,
                 std::unique_ptr<RequestContext>* parked = nullptr)
      : name_(name), mode_(mode), seen_(seen), parked_(parked) {}
  const char* name() const override { return name_; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    seen_->push_back(name_);
    if (mode_ == Mode::kPass) return Verdict::kContinue;
    if (mode_ == Mode::kPark) {
      *parked_ = std::move(ctx);
      return Verdict::kTaken;
    }
    ctx->sink.final(Status::NotFound(name_));
    return Verdict::kTaken;
  }

 private:
  const char* name_;
  Mode mode_;
  std::vector<std::string>* seen_;
  std::unique_ptr<RequestContext>* parked_;
};

std::unique_ptr<RequestContext> Context(std::vector<std::string>* answers) {
  auto ctx = std::make_unique<RequestContext>();
  ctx->request = std::make_unique<InferRequest>();
  ctx->sink.final = [answers](Result<InferResponse> r) { answers->push_back(r.status().message()); };
  return ctx;
}

TEST(RequestPipelineTest, StagesRunInOrderAndAParkedRequestGoesOnAtTheNextStage) {
  using Mode = RecordingStage::Mode;
  std::vector<std::string> seen, answers;
  std::unique_ptr<RequestContext> parked;
  std::vector<std::unique_ptr<RequestStage>> stages;
  stages.push_back(std::make_unique<RecordingStage>("first", Mode::kPass, &seen));
  stages.push_back(std::make_unique<RecordingStage>("fetch", Mode::kPark, &seen, &parked));
  stages.push_back(std::make_unique<RecordingStage>("check", Mode::kPass, &seen));
  stages.push_back(std::make_unique<RecordingStage>("last", Mode::kAnswer, &seen));
  RequestPipeline pipeline(std::move(stages));
  EXPECT_EQ(pipeline.StageNames(), (std::vector<std::string>{"first", "fetch", "check", "last"}));

  pipeline.Run(Context(&answers));
  EXPECT_EQ(seen, (std::vector<std::string>{"first", "fetch"}));
  ASSERT_NE(parked, nullptr);  // held by the stage: nothing answered yet
  EXPECT_TRUE(answers.empty());
  pipeline.Continue(std::move(parked));  // e.g. the Redis fetch came back
  EXPECT_EQ(seen, (std::vector<std::string>{"first", "fetch", "check", "last"}));
  EXPECT_EQ(answers, (std::vector<std::string>{"last"}));  // exactly one answer
}

TEST(RequestPipelineTest, TheOrderIsDeclaredInOnePlaceAndOptionalStagesFollowTheirParts) {
  PipelineParts none;
  EXPECT_EQ(BuildRequestPipeline(none)->StageNames(),
            (std::vector<std::string>{"admission", "decode", "parameters", "validation", "rules_and_classification",
                                      "shadow", "enqueue"}));
  ResponseCache cache(1 << 20);
  PipelineParts with_cache;
  with_cache.cache = &cache;
  EXPECT_EQ(BuildRequestPipeline(with_cache)->StageNames(),
            (std::vector<std::string>{"admission", "decode", "parameters", "validation", "cache",
                                      "rules_and_classification", "shadow", "enqueue"}));
}

}  // namespace
}  // namespace inferd
