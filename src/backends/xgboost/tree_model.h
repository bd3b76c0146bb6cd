// TreeModel: one loaded, checked XGBoost booster and what it answers per row.
//
// Loading = parse (Booster::FromBytes) + structural check of the trees
// (model_check.h) + a probe prediction that fixes the output width. Predict
// turns XGBoost's output into the configured OutputKind (value, margin,
// per-class probabilities, class index).
// Thread-safety: not safe for concurrent use (one per model instance).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/xgboost/booster.h"
#include "backends/xgboost/model_check.h"
#include "backends/xgboost/xgboost_config.h"
#include "core/status.h"

namespace inferd::xgboost {

class TreeModel {
 public:
  // INVALID_ARGUMENT for bytes that are not a well-formed model, or a
  // configuration the model cannot answer (class output of a regressor,
  // an iteration range past the boosted rounds).
  static Result<std::unique_ptr<TreeModel>> Load(std::string_view bytes, const XgbConfig& config);

  const ModelFacts& facts() const { return facts_; }
  int64_t num_features() const { return facts_.num_feature; }
  // Values per row of the configured output (1 for a binary model's value,
  // the class count for probabilities).
  int64_t row_width() const { return row_width_; }

  // `rows` x num_features() FP32 values in, rows x row_width() out.
  Status Predict(const float* data, int64_t rows, float* out);

 private:
  TreeModel(std::unique_ptr<Booster> booster, XgbConfig config, ModelFacts facts)
      : booster_(std::move(booster)), config_(std::move(config)), facts_(std::move(facts)) {}
  // How the configured output is computed from what XGBoost predicts.
  enum class Post { kCopy, kBinaryProba, kSigmoidBinaryProba, kSoftmax, kThreshold, kSigmoidThreshold, kArgmax };
  void Plan();
  Status Run(const float* data, int64_t rows, std::span<const float>* out);

  std::unique_ptr<Booster> booster_;
  XgbConfig config_;
  ModelFacts facts_;
  PredictKind kind_ = PredictKind::kValue;
  Post post_ = Post::kCopy;
  int64_t predicted_width_ = 1;  // values per row XGBoost returns
  int64_t row_width_ = 1;        // values per row answered
  std::vector<int64_t> shape_;   // scratch
};

}  // namespace inferd::xgboost
