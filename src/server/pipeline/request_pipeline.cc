#include "server/pipeline/request_pipeline.h"

#include <cassert>

namespace inferd {

RequestPipeline::RequestPipeline(std::vector<std::unique_ptr<RequestStage>> stages) : stages_(std::move(stages)) {
  assert(!stages_.empty());
}

void RequestPipeline::Run(std::unique_ptr<RequestContext> ctx) const {
  ctx->next_stage = 0;
  Continue(std::move(ctx));
}

void RequestPipeline::Continue(std::unique_ptr<RequestContext> ctx) const {
  while (ctx->next_stage < stages_.size()) {
    const RequestStage& stage = *stages_[ctx->next_stage++];
    if (stage.Process(ctx, *this) == RequestStage::Verdict::kTaken) return;
  }
  // Only reached when the last stage let a request go on: a wiring bug.
  assert(false && "the pipeline's last stage must take every request");
  ctx->sink.final(Status::Internal("the request pipeline ended without an answer"));
}

std::vector<std::string> RequestPipeline::StageNames() const {
  std::vector<std::string> out;
  for (const auto& s : stages_) out.emplace_back(s->name());
  return out;
}

}  // namespace inferd
