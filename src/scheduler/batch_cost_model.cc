#include "scheduler/batch_cost_model.h"

#include <algorithm>
#include <cmath>

namespace inferd {

BatchCostModel::BatchCostModel(bool positions, double half_life)
    : positions_(positions), decay_(std::pow(0.5, 1.0 / std::max(1.0, half_life))) {}

void BatchCostModel::Observe(double rows, double positions, double seconds) {
  if (!(rows > 0) || !(seconds >= 0) || !std::isfinite(seconds) || !std::isfinite(positions)) return;
  const std::array<double, kN> x{1.0, rows, positions_ ? positions : 0.0};
  for (int i = 0; i < kN; ++i) {
    xy_[i] = xy_[i] * decay_ + x[i] * seconds;
    for (int j = 0; j < kN; ++j) xx_[i][j] = xx_[i][j] * decay_ + x[i] * x[j];
  }
  ++samples_;
  Solve();
}

void BatchCostModel::Solve() {
  const double w = xx_[0][0];
  if (w <= 0) return;
  per_row_fallback_ = xy_[1] > 0 && xx_[1][1] > 0 ? xy_[1] / xx_[1][1] : 0;  // least squares through the origin
  // The fit needs batch sizes that differ: the weighted variance of rows.
  const double mean_rows = xx_[0][1] / w;
  const double var_rows = xx_[1][1] / w - mean_rows * mean_rows;
  if (samples_ < 8 || var_rows < 0.25) {
    fitted_ = false;
    return;
  }
  // Ridge-regularised normal equations, solved by Gaussian elimination with
  // partial pivoting. The ridge keeps the system solvable when positions
  // are proportional to rows (every request the same length).
  const int n = positions_ ? 3 : 2;
  double a[kN][kN + 1];
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) a[i][j] = xx_[i][j];
    a[i][i] += 1e-6 * std::max(1.0, xx_[i][i]);
    a[i][n] = xy_[i];
  }
  for (int c = 0; c < n; ++c) {
    int p = c;
    for (int r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    if (std::fabs(a[p][c]) < 1e-300) {
      fitted_ = false;
      return;
    }
    for (int k = 0; k <= n; ++k) std::swap(a[c][k], a[p][k]);
    for (int r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (int k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
    }
  }
  std::array<double, kN> t{};
  for (int i = 0; i < n; ++i) t[i] = a[i][n] / a[i][i];
  if (!std::isfinite(t[0]) || !std::isfinite(t[1]) || !std::isfinite(t[2])) {
    fitted_ = false;
    return;
  }
  theta_ = t;
  fitted_ = true;
}

double BatchCostModel::Predict(double rows, double positions) const {
  if (!fitted_) return std::max(0.0, per_row_fallback_ * rows);
  return std::max(0.0, theta_[0] + theta_[1] * rows + theta_[2] * (positions_ ? positions : 0.0));
}

}  // namespace inferd
