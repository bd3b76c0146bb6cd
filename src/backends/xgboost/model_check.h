// Structural checks of an XGBoost model before it predicts.
//
// XGBoost's loaders trust the trees they read: a child index out of range, a
// cycle or a split on a feature the model does not have is read out of
// bounds at prediction time. Every model is therefore serialised back to
// XGBoost's JSON after loading (whatever its file format) and checked here
// first. Pure function over text; fuzzed (fuzz/fuzz_xgboost_model.cc).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace inferd::xgboost {

// The most features a model may have. libxgboost's CPU predictor fills a
// buffer of 64 rows x features x 4 bytes per prediction thread, even for one
// row: 256 MiB at this limit (a file declaring 2^24 features made each
// prediction reserve gigabytes; found by fuzz_xgboost_model).
inline constexpr int64_t kMaxFeatures = int64_t{1} << 20;

struct ModelFacts {
  std::string booster;    // "gbtree", "dart" or "gblinear"
  std::string objective;  // "binary:logistic", "multi:softprob", "reg:squarederror", ...
  int64_t num_feature = 0;
  int64_t num_groups = 1;  // outputs per row of a margin prediction (classes, targets)
  int64_t num_trees = 0;
};

// INVALID_ARGUMENT naming the first fault ("tree 3 node 7: left child 90
// outside 0..12").
Result<ModelFacts> CheckModelJson(std::string_view json);

}  // namespace inferd::xgboost
