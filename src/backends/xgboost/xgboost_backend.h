// The XGBoost backends: gradient-boosted trees through Debian's libxgboost
// (C API, 1.7).
//
//   backend: "xgboost"  <version>/model.json | model.ubj | model.bst | model.bin
//                       parameters: predict_type (value | margin | proba | class),
//                       threshold, iteration_begin, iteration_end, nthread, missing
//   backend: "fil"      Triton's FIL-backend configuration: <version>/xgboost.model |
//                       xgboost.json | xgboost.ubj by model_type, output_class,
//                       predict_proba, threshold
//
// One input, dense FP32 [batch, n_features] (NaN = missing unless `missing`
// says otherwise); one FP32 output [batch, k]. Without a config (or one
// without inputs) the spec is completed from the model: input__0
// [n_features], output__0 [k]. Each instance owns its booster (prediction
// buffers are per booster); `nthread` defaults to INTRA_OP_THREAD_COUNT.
// Every model is checked structurally before it predicts (model_check.h).
#pragma once

#include <memory>

#include "backends/backend.h"

namespace inferd {

std::unique_ptr<Backend> MakeXgboostBackend();
std::unique_ptr<Backend> MakeFilBackend();
// Registers both.
Status RegisterXgboostBackends(BackendRegistry* registry);

}  // namespace inferd
