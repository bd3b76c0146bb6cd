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

namespace {

// A traced stage's span, from `start_ns` to now; `answered`: the stage took the request and answered it.
void RecordStageSpan(const std::shared_ptr<const TraceParent>& parent, const RequestStage& stage, int64_t start_ns,
                     bool answered) {
  Span span(parent, stage.name(), SpanKind::kInternal, start_ns);
  if (answered) span.SetAttribute("inferd.answered", true);
  span.End(UnixNanosNow());
}

}  // namespace

void RequestPipeline::Continue(std::unique_ptr<RequestContext> ctx) const {
  if (ctx->held_since_ns != 0) {  // a traced request back from the stage that held it
    RecordStageSpan(ctx->request->trace, *stages_[ctx->next_stage - 1], ctx->held_since_ns, false);
    ctx->held_since_ns = 0;
  }
  while (ctx->next_stage < stages_.size()) {
    const RequestStage& stage = *stages_[ctx->next_stage++];
    if (!ctx->request->trace || !stage.Traced(*ctx)) {
      if (stage.Process(ctx, *this) == RequestStage::Verdict::kTaken) return;
      continue;
    }
    const int64_t start = UnixNanosNow();
    // Set before Process: a stage that holds the request may hand it back on another thread at once.
    ctx->held_since_ns = start;
    std::shared_ptr<const TraceParent> trace = ctx->request->trace;
    const RequestStage::Verdict v = stage.Process(ctx, *this);
    if (ctx == nullptr) return;  // held: its span ends when it comes back (Continue)
    ctx->held_since_ns = 0;
    RecordStageSpan(trace, stage, start, v == RequestStage::Verdict::kTaken);
    if (v == RequestStage::Verdict::kTaken) return;
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
