// What a model's config asks of the XGBoost backend: which file, what to
// predict, how many threads. Two dialects: inferd's own (`backend:
// "xgboost"`) and Triton's FIL backend (`backend: "fil"`), whose parameters
// (model_type, output_class, predict_proba, threshold) FIL repositories use.
// Thread-safety: pure functions.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"

namespace inferd::xgboost {

enum class Dialect { kXgboost, kFil };

// What each row's output holds.
enum class OutputKind {
  kValue,   // XGBoost's prediction (probabilities, regression values, softmax class): python's predict()
  kMargin,  // untransformed scores (output_margin=True)
  kProba,   // per-class probabilities; binary models give [P(0), P(1)]
  kClass,   // the class index (binary: P(1) > threshold)
};

struct XgbConfig {
  std::vector<std::string> files;  // candidates in the version folder, first existing wins
  OutputKind output = OutputKind::kValue;
  float threshold = 0.5f;
  int iteration_begin = 0;
  int iteration_end = 0;  // 0: all rounds
  int threads = 1;
  float missing = std::numeric_limits<float>::quiet_NaN();
};

// INVALID_ARGUMENT naming the parameter at fault.
Result<XgbConfig> ParseXgbConfig(const ModelSpec& spec, Dialect dialect);

}  // namespace inferd::xgboost
