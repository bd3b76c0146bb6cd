// BatchCostModel: a batch's execution time as a + b*rows + c*positions
// (positions = rows times the padded length, for padded models), fitted
// online by exponentially weighted least squares, so it follows the model
// when its cost changes (another model loaded beside it, a new version).
//
// Until the batches it has seen differ enough in size to separate a from b,
// it predicts time proportional to rows (no batching benefit assumed), so an
// adaptive batcher never waits on a guess.
//
// Thread-safety: none; the owner serializes access.
#pragma once

#include <array>
#include <cstddef>

namespace inferd {

class BatchCostModel {
 public:
  // `positions`: fit the positions term (padded models). `half_life`: the
  // number of executions after which an observation weighs half.
  explicit BatchCostModel(bool positions = false, double half_life = 200);

  void Observe(double rows, double positions, double seconds);
  // Predicted seconds for a batch; >= 0.
  double Predict(double rows, double positions) const;

  // Whether the fit is in use (else the proportional fallback).
  bool fitted() const { return fitted_; }
  double fixed_s() const { return fitted_ ? theta_[0] : 0; }
  double per_row_s() const { return fitted_ ? theta_[1] : per_row_fallback_; }
  double per_position_s() const { return fitted_ ? theta_[2] : 0; }
  size_t samples() const { return samples_; }

 private:
  void Solve();

  static constexpr int kN = 3;
  bool positions_;
  double decay_;
  std::array<std::array<double, kN>, kN> xx_{};  // decayed sum of x x^T
  std::array<double, kN> xy_{};                  // decayed sum of x y
  std::array<double, kN> theta_{};
  double per_row_fallback_ = 0;
  bool fitted_ = false;
  size_t samples_ = 0;
};

}  // namespace inferd
