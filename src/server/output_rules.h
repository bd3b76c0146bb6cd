// Computes the rule outputs of a model's answer (core/output_rule.h) in the
// request path: the request asks the model for the outputs the rules read,
// and the answer gets the rules' outputs (and loses the read outputs the
// client did not ask for). Runs on the thread that completes the request
// (the model's worker).
// Thread-safety: pure functions; a RulePlan is immutable once made.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/infer_request.h"
#include "core/model_spec.h"

namespace inferd {

struct RulePlan {
  struct Rule {
    OutputRule rule;
    std::shared_ptr<const std::vector<std::string>> labels;  // the source output's, may be null
  };
  std::vector<Rule> rules;        // to compute (empty: nothing to do)
  std::vector<std::string> drop;  // model outputs read for rules only
  bool batched = false;
};

// The rules `request` needs; rewrites its requested outputs so the model
// returns what they read. No requested outputs: every rule.
RulePlan PlanRules(const ModelSpec& spec, InferRequest* request);

// Appends each planned rule's output to `response` and drops `plan.drop`.
Status ApplyRules(const RulePlan& plan, InferResponse* response);

// One rule over its source tensor (rows along dimension 0 when `batched`).
Result<Tensor> ApplyRule(const OutputRule& rule, const Tensor& source, bool batched,
                         const std::vector<std::string>* labels);

// The rule outputs as the model's metadata lists them.
std::vector<TensorSpec> RuleOutputSpecs(const ModelSpec& spec);

}  // namespace inferd
