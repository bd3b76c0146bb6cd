// Booster: one XGBoost model behind Debian's libxgboost C API (1.7).
//
// The only file that sees <xgboost/c_api.h>. Errors from the library (its
// exceptions end at the C API as -1 + XGBGetLastError) become Status.
// Thread-safety: a Booster is not safe for concurrent use (Predict returns a
// buffer the booster owns until its next call); use one per model instance.
// Different Boosters may be used concurrently.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace inferd::xgboost {

// What a prediction computes (XGBoost's predict "type").
enum class PredictKind { kValue = 0, kMargin = 1 };

struct PredictOptions {
  PredictKind kind = PredictKind::kValue;
  int iteration_begin = 0;
  int iteration_end = 0;  // 0: every boosted round
  float missing = std::numeric_limits<float>::quiet_NaN();
  // Predict through a DMatrix (a copy of the rows) instead of in place:
  // gblinear supports only that.
  bool via_dmatrix = false;
};

class Booster {
 public:
  // Loads a model from its serialised bytes: JSON, UBJSON or the legacy
  // binary format, told apart by content. JSON with whitespace (pretty
  // printed) is accepted. INVALID_ARGUMENT with the library's message when
  // the bytes are not a model. `threads` bounds the library's threads from
  // the start: loading parses trees in parallel too.
  static Result<std::unique_ptr<Booster>> FromBytes(std::string_view bytes, int threads = 1);
  ~Booster();
  Booster(const Booster&) = delete;
  Booster& operator=(const Booster&) = delete;

  Status SetThreads(int n);
  // learner_model_param.num_feature.
  Result<int64_t> NumFeatures() const;
  Result<int> BoostedRounds() const;
  // The model as XGBoost's JSON (whatever format it was loaded from).
  Result<std::string> SaveJson() const;

  // Predicts `rows` dense rows of `cols` FP32 features (row-major; `data`
  // aligned for float: the library refuses anything else). `out`
  // views the booster's buffer, valid until its next Predict; `shape` is
  // XGBoost's output shape (without strict shape: [rows] or [rows, k]).
  Status Predict(const float* data, int64_t rows, int64_t cols, const PredictOptions& options,
                 std::span<const float>* out, std::vector<int64_t>* shape);

 private:
  explicit Booster(void* handle) : handle_(handle) {}
  void* handle_;           // BoosterHandle
  void* proxy_ = nullptr;  // DMatrixHandle: the proxy in-place predictions describe their rows with
};

// Messages the library logs on this thread while a LogCapture lives are
// collected (warnings about old model formats belong in the load's note);
// elsewhere they go to stderr. Not nestable.
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// JSON model text without whitespace outside strings (XGBoost's buffer
// loader tells JSON from UBJSON by the second byte).
std::string CompactJson(std::string_view text);

}  // namespace inferd::xgboost
