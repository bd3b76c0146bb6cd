#include "scheduler/ensemble_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace inferd {
namespace {

TensorSpec T(std::string name, DataType dt, Shape dims) {
  TensorSpec t;
  t.name = std::move(name);
  t.dtype = dt;
  t.dims = std::move(dims);
  return t;
}

EnsembleStepSpec Step(std::string model, std::map<std::string, std::string> in,
                      std::map<std::string, std::string> out) {
  EnsembleStepSpec s;
  s.model_name = std::move(model);
  s.input_map = std::move(in);
  s.output_map = std::move(out);
  return s;
}

// raw -> scale -> scaled -> mlp -> logits, and raw -> mlp -> direct (a diamond's two branches).
ModelSpec Ensemble(std::vector<EnsembleStepSpec> steps, std::vector<TensorSpec> outputs = {}) {
  ModelSpec e;
  e.name = "pipe";
  e.platform = "ensemble";
  e.max_batch_size = 8;
  e.inputs = {T("raw", DataType::kFp32, {4})};
  e.outputs = outputs.empty() ? std::vector<TensorSpec>{T("logits", DataType::kFp32, {3})} : outputs;
  e.ensemble = EnsembleSpec{std::move(steps), 0};
  return e;
}

ModelSpec Model(std::string name, TensorSpec in, TensorSpec out, int max_batch = 16) {
  ModelSpec m;
  m.name = std::move(name);
  m.max_batch_size = max_batch;
  m.inputs = {std::move(in)};
  m.outputs = {std::move(out)};
  return m;
}

std::string CompileError(const ModelSpec& e) {
  auto p = EnsemblePlan::Compile(e);
  return p.ok() ? "" : p.status().message();
}

TEST(EnsemblePlan, CompilesADiamondInDependencyOrder) {
  ModelSpec e =
      Ensemble({Step("mlp", {{"x", "scaled"}}, {{"y", "logits"}}), Step("scale", {{"x", "raw"}}, {{"y", "scaled"}}),
                Step("mlp", {{"x", "raw"}}, {{"y", "direct"}})},
               {T("logits", DataType::kFp32, {3}), T("direct", DataType::kFp32, {3})});
  auto p = EnsemblePlan::Compile(e);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->order.size(), 3u);
  auto pos = [&](int step) { return std::find(p->order.begin(), p->order.end(), step) - p->order.begin(); };
  EXPECT_LT(pos(1), pos(0));                       // scale before the mlp that reads its output
  EXPECT_EQ(p->readers[p->inputs[0]].size(), 2u);  // raw: read by scale and the second mlp
  EXPECT_EQ(p->StepName(0), "step 0 (model 'mlp')");
  std::vector<ModelSpec> models = {Model("mlp", T("x", DataType::kFp32, {4}), T("y", DataType::kFp32, {3})),
                                   Model("scale", T("x", DataType::kFp32, {4}), T("y", DataType::kFp32, {4})),
                                   Model("mlp", T("x", DataType::kFp32, {4}), T("y", DataType::kFp32, {3}))};
  EXPECT_TRUE(p->Check(e, models).ok()) << p->Check(e, models).ToString();
}

TEST(EnsemblePlan, StructuralErrorsNameTheStepAndTensor) {
  EXPECT_EQ(CompileError(Ensemble({Step("pipe", {{"x", "raw"}}, {{"y", "logits"}})})),
            "step 0 (model 'pipe') calls the ensemble itself");
  EXPECT_EQ(CompileError(
                Ensemble({Step("a", {{"x", "raw"}}, {{"y", "logits"}}), Step("b", {{"x", "raw"}}, {{"y", "logits"}})})),
            "tensor 'logits' is produced twice: by step 0 (model 'a') and by step 1 (model 'b') output 'y'");
  EXPECT_EQ(CompileError(Ensemble({Step("a", {{"x", "raw"}}, {{"y", "raw"}})})),
            "tensor 'raw' is produced twice: by the ensemble input and by step 0 (model 'a') output 'y'");
  EXPECT_EQ(CompileError(Ensemble({Step("a", {{"x", "ghost"}}, {{"y", "logits"}})})),
            "step 0 (model 'a'): input 'x' reads tensor 'ghost', which no step produces and the ensemble does not "
            "take as an input");
  EXPECT_EQ(CompileError(Ensemble({Step("a", {{"x", "raw"}}, {{"y", "other"}})})),
            "ensemble output 'logits' is not produced by any step");
  EXPECT_EQ(CompileError(Ensemble({Step("a", {{"x", "t2"}}, {{"y", "t1"}}), Step("b", {{"x", "t1"}}, {{"y", "t2"}}),
                                   Step("c", {{"x", "raw"}}, {{"y", "logits"}})})),
            "the ensemble's steps form a cycle: step 0 (model 'a'), step 1 (model 'b')");
}

TEST(EnsemblePlan, ChecksEveryEdgeAgainstTheComposingModels) {
  ModelSpec e =
      Ensemble({Step("scale", {{"x", "raw"}}, {{"y", "scaled"}}), Step("mlp", {{"x", "scaled"}}, {{"y", "logits"}})});
  auto p = EnsemblePlan::Compile(e);
  ASSERT_TRUE(p.ok());
  const ModelSpec scale = Model("scale", T("x", DataType::kFp32, {4}), T("y", DataType::kFp32, {4}));
  const ModelSpec mlp = Model("mlp", T("x", DataType::kFp32, {4}), T("y", DataType::kFp32, {3}));
  auto check = [&](ModelSpec a, ModelSpec b) { return p->Check(e, {a, b}).message(); };
  EXPECT_EQ(check(scale, mlp), "");
  EXPECT_EQ(check(Model("scale", T("x", DataType::kInt64, {4}), T("y", DataType::kFp32, {4})), mlp),
            "step 0 (model 'scale'): input 'x' reads tensor 'raw' (ensemble input 'raw'), which is FP32; the model "
            "takes INT64");
  EXPECT_EQ(check(scale, Model("mlp", T("x", DataType::kFp32, {5}), T("y", DataType::kFp32, {3}))),
            "step 1 (model 'mlp'): input 'x' reads tensor 'scaled' (step 0 (model 'scale') output 'y'), of shape "
            "[-1,4]; the model takes [-1,5]");
  EXPECT_EQ(check(scale, Model("mlp", T("input", DataType::kFp32, {4}), T("y", DataType::kFp32, {3}))),
            "step 1 (model 'mlp'): input_map key 'x' is not an input of model 'mlp'");
  EXPECT_EQ(check(Model("scale", T("x", DataType::kFp32, {4}), T("out", DataType::kFp32, {4})), mlp),
            "step 0 (model 'scale'): output_map key 'y' is not an output of model 'scale'");
  EXPECT_EQ(check(scale, Model("mlp", T("x", DataType::kFp32, {4}), T("y", DataType::kFp16, {3}))),
            "ensemble output 'logits' is FP32 in the config but step 1 (model 'mlp') output 'y' is FP16");
  EXPECT_EQ(check(scale, Model("mlp", T("x", DataType::kFp32, {4}), T("y", DataType::kFp32, {3}), 0)),
            "step 1 (model 'mlp') does not batch (max_batch_size 0) but the ensemble does");
  EXPECT_EQ(check(scale, Model("mlp", T("x", DataType::kFp32, {4}), T("y", DataType::kFp32, {3}), 4)),
            "step 1 (model 'mlp') takes batches of at most 4, less than the ensemble's max_batch_size 8");
  ModelSpec two = mlp;
  two.inputs.push_back(T("mask", DataType::kFp32, {4}));
  EXPECT_EQ(check(scale, two), "step 1 (model 'mlp'): model input 'mask' is not mapped");
  two.inputs.back().optional = true;
  EXPECT_EQ(check(scale, two), "");
}

}  // namespace
}  // namespace inferd
