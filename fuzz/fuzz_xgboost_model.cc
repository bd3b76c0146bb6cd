// XGBoost model files (JSON, UBJSON, legacy binary) through the backend's
// load path: libxgboost's parser, the structural check (model_check.h) and,
// when a model loads, a prediction. The first byte picks the output kind.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "backends/xgboost/tree_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace inferd::xgboost;
  if (size < 1) return 0;
  XgbConfig config;
  config.output = static_cast<OutputKind>(data[0] % 4);
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  auto model = TreeModel::Load(bytes, config);
  if (!model.ok()) return 0;
  // Wide models (up to model_check.h's kMaxFeatures) cost megabytes of input
  // and library buffers per prediction, not coverage: load only.
  if ((*model)->num_features() > (int64_t{1} << 16)) return 0;
  const int64_t rows = 3;
  std::vector<float> x(static_cast<size_t>(rows * (*model)->num_features()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 5 == 4 ? NAN : static_cast<float>(i % 7) - 3.0f;
  std::vector<float> out(static_cast<size_t>(rows * (*model)->row_width()));
  (void)(*model)->Predict(x.data(), rows, out.data());
  return 0;
}
