// Output rules (server/output_rules.h) and the classification extension
// (server/classification.h), planned on the request, applied to the answer.
#include "server/classification.h"
#include "server/output_rules.h"
#include "server/pipeline/stages.h"

namespace inferd {
namespace {

class AnswerRulesStage final : public RequestStage {
 public:
  const char* name() const override { return "rules_and_classification"; }
  Verdict Process(std::unique_ptr<RequestContext>& ctx, const RequestPipeline&) const override {
    const ModelSpec& spec = ctx->handle.spec();
    Classification classify = PlanClassification(spec, ctx->request->outputs);
    RulePlan rules = PlanRules(spec, ctx->request.get());
    if (classify.outputs.empty() && rules.rules.empty()) return Verdict::kContinue;
    ctx->sink.final = [classify = std::move(classify), rules = std::move(rules),
                       final = std::move(ctx->sink.final)](Result<InferResponse> r) {
      if (r.ok()) {
        Status st = ApplyRules(rules, &*r);
        if (st.ok()) st = ApplyClassification(classify, &*r);
        if (!st.ok()) return final(st);
      }
      final(std::move(r));
    };
    return Verdict::kContinue;
  }
};

}  // namespace

std::unique_ptr<RequestStage> MakeAnswerRulesStage() { return std::make_unique<AnswerRulesStage>(); }

}  // namespace inferd
