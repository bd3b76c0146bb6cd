#include "server/output_rules.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace inferd {
namespace {

Tensor RuleFloats(std::string name, Shape shape, const std::vector<float>& v) {
  return Tensor::Copy(std::move(name), DataType::kFp32, std::move(shape), std::as_bytes(std::span<const float>(v)));
}

std::vector<std::string> Strings(const Tensor& t) {
  auto split = SplitBytesElements(t.bytes());
  EXPECT_TRUE(split.ok());
  return std::vector<std::string>(split->begin(), split->end());
}

OutputRule Rule(const std::string& text) {
  auto r = ParseOutputRule("out", text);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

const std::vector<std::string> kLabels = {"cat", "dog", "bird"};

TEST(OutputRules, ParsesTheStepsAndRejectsWhatDoesNotFit) {
  OutputRule r = Rule(" logits | softmax | top_k 2 | threshold 0.9 others | label | map cat=animal dog=animal ");
  EXPECT_EQ(r.source, "logits");
  EXPECT_EQ(r.steps.size(), 5u);
  EXPECT_EQ(r.top_k(), 2);
  EXPECT_EQ(r.dtype(), DataType::kBytes);
  EXPECT_EQ(r.dims({3}), (Shape{2}));
  EXPECT_EQ(Rule("logits | softmax").dtype(), DataType::kFp32);
  EXPECT_EQ(Rule("logits | softmax").dims({3}), (Shape{3}));
  EXPECT_EQ(Rule("logits | argmax").dtype(), DataType::kInt64);
  EXPECT_EQ(Rule("logits | softmax | argmax | score").dtype(), DataType::kFp32);
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "it starts with the name"},
           {"a b | softmax", "it starts with the name"},
           {"logits | label", "label comes after top_k"},
           {"logits | top_k 0", "top_k takes a count >= 1, got '0'"},
           {"logits | top_k x", "top_k takes a count"},
           {"logits | argmax | softmax", "softmax comes before top_k"},
           {"logits | argmax | threshold high others", "threshold takes a number"},
           {"logits | argmax | threshold 0.5", "unknown step 'threshold 0.5'"},
           {"logits | argmax | map a=b", "map comes after label"},
           {"logits | argmax | label | map =b", "map takes FROM=TO pairs"},
           {"logits | sigmoid", "unknown step 'sigmoid'"},
           {"logits | softmax |", "step 2 is empty"},
       }) {
    auto bad = ParseOutputRule("out", text);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << text << ": " << bad.status().message();
    EXPECT_EQ(bad.status().message().rfind("rule 'out'", 0), 0u) << bad.status().message();
  }
}

TEST(OutputRules, SoftmaxArgmaxThresholdLabelAndMapPerRow) {
  // Row 0 is sure of dog, row 1 is not sure of anything.
  Tensor logits = RuleFloats("logits", {2, 3}, {0.0f, 5.0f, 0.0f, 1.0f, 1.2f, 0.9f});
  auto probs = ApplyRule(Rule("logits | softmax"), logits, true, &kLabels);
  ASSERT_TRUE(probs.ok());
  EXPECT_EQ(probs->shape, (Shape{2, 3}));
  const float* p = probs->as<float>();
  const double e5 = std::exp(5.0), z0 = 2 + e5;
  EXPECT_NEAR(p[1], e5 / z0, 1e-6);
  EXPECT_NEAR(p[0] + p[1] + p[2], 1.0, 1e-6);
  EXPECT_NEAR(p[4], std::exp(1.2) / (std::exp(1.0) + std::exp(1.2) + std::exp(0.9)), 1e-6);

  auto label = ApplyRule(Rule("logits | softmax | argmax | threshold 0.9 others | label"), logits, true, &kLabels);
  ASSERT_TRUE(label.ok());
  EXPECT_EQ(label->dtype, DataType::kBytes);
  EXPECT_EQ(label->shape, (Shape{2, 1}));
  EXPECT_EQ(Strings(*label), (std::vector<std::string>{"dog", "others"}));

  auto mapped = ApplyRule(Rule("logits | top_k 2 | label | map dog=animal bird=animal"), logits, true, &kLabels);
  ASSERT_TRUE(mapped.ok());
  EXPECT_EQ(Strings(*mapped), (std::vector<std::string>{"animal", "cat", "animal", "cat"}));

  auto index = ApplyRule(Rule("logits | softmax | argmax | threshold 0.9 none"), logits, true, nullptr);
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->dtype, DataType::kInt64);
  EXPECT_EQ(std::vector<int64_t>(index->as<int64_t>(), index->as<int64_t>() + 2), (std::vector<int64_t>{1, -1}));

  auto score = ApplyRule(Rule("logits | softmax | argmax | score"), logits, true, nullptr);
  ASSERT_TRUE(score.ok());
  EXPECT_NEAR(score->as<float>()[0], e5 / z0, 1e-6);

  auto unbatched =
      ApplyRule(Rule("logits | argmax | label"), RuleFloats("logits", {3}, {0.1f, 0.2f, 0.7f}), false, &kLabels);
  ASSERT_TRUE(unbatched.ok());
  EXPECT_EQ(unbatched->shape, (Shape{1}));
  EXPECT_EQ(Strings(*unbatched), (std::vector<std::string>{"bird"}));

  auto too_many = ApplyRule(Rule("logits | top_k 4"), logits, true, nullptr);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().message(), "rule 'out': output 'logits' has 3 entries per row; the rule takes the top 4");
}

TEST(OutputRules, ThePlanAsksTheModelForWhatTheRulesReadAndDropsItAfter) {
  ModelSpec spec;
  spec.max_batch_size = 4;
  TensorSpec logits;
  logits.name = "logits";
  logits.dtype = DataType::kFp32;
  logits.dims = {3};
  logits.labels = std::make_shared<const std::vector<std::string>>(kLabels);
  spec.outputs = {logits};
  spec.rules = {Rule("logits | softmax | argmax | label")};
  spec.rules[0].name = "label";
  auto specs = RuleOutputSpecs(spec);
  ASSERT_EQ(specs.size(), 1u);
  EXPECT_EQ(specs[0].name, "label");
  EXPECT_EQ(specs[0].dtype, DataType::kBytes);
  EXPECT_EQ(specs[0].dims, (Shape{1}));

  InferRequest only_label;
  only_label.outputs = {RequestedOutput{"label"}};
  RulePlan plan = PlanRules(spec, &only_label);
  ASSERT_EQ(plan.rules.size(), 1u);
  ASSERT_EQ(only_label.outputs.size(), 1u);
  EXPECT_EQ(only_label.outputs[0].name, "logits");  // the model is asked for what the rule reads
  EXPECT_EQ(plan.drop, (std::vector<std::string>{"logits"}));
  InferResponse r;
  r.outputs = {RuleFloats("logits", {1, 3}, {0.0f, 0.0f, 3.0f})};
  ASSERT_TRUE(ApplyRules(plan, &r).ok());
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].name, "label");
  EXPECT_EQ(Strings(r.outputs[0]), (std::vector<std::string>{"bird"}));

  InferRequest everything;  // no outputs named: the model's and every rule's
  RulePlan all = PlanRules(spec, &everything);
  EXPECT_TRUE(everything.outputs.empty());
  EXPECT_TRUE(all.drop.empty());
  InferResponse both;
  both.outputs = {RuleFloats("logits", {1, 3}, {2.0f, 0.0f, 0.0f})};
  ASSERT_TRUE(ApplyRules(all, &both).ok());
  ASSERT_EQ(both.outputs.size(), 2u);
  EXPECT_EQ(Strings(both.outputs[1]), (std::vector<std::string>{"cat"}));

  InferRequest plain;  // a request without rule outputs is left alone
  plain.outputs = {RequestedOutput{"logits"}};
  EXPECT_TRUE(PlanRules(spec, &plain).rules.empty());
  EXPECT_EQ(plain.outputs.size(), 1u);
}

}  // namespace
}  // namespace inferd
