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
  // Ridge-regularised normal equations over the active terms, solved by
  // Gaussian elimination with partial pivoting; a term whose coefficient
  // comes out negative (noise, or positions proportional to rows) leaves the
  // fit and the rest is solved again: costs never fall with more work.
  // The ridge keeps the system solvable when positions are proportional to rows.
  std::array<bool, kN> active{true, true, positions_};
  for (int round = 0; round < kN; ++round) {
    int idx[kN], n = 0;
    for (int i = 0; i < kN; ++i)
      if (active[i]) idx[n++] = i;
    if (n == 0) break;
    double a[kN][kN + 1];
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j) a[i][j] = xx_[idx[i]][idx[j]];
      a[i][i] += 1e-6 * std::max(1.0, xx_[idx[i]][idx[i]]);
      a[i][n] = xy_[idx[i]];
    }
    bool singular = false;
    for (int c = 0; c < n && !singular; ++c) {
      int p = c;
      for (int r = c + 1; r < n; ++r)
        if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
      if (std::fabs(a[p][c]) < 1e-300) {
        singular = true;
        break;
      }
      for (int k = 0; k <= n; ++k) std::swap(a[c][k], a[p][k]);
      for (int r = 0; r < n; ++r) {
        if (r == c) continue;
        const double f = a[r][c] / a[c][c];
        for (int k = c; k <= n; ++k) a[r][k] -= f * a[c][k];
      }
    }
    if (singular) break;
    std::array<double, kN> t{};
    int most_negative = -1;
    for (int i = 0; i < n; ++i) {
      t[idx[i]] = a[i][n] / a[i][i];
      if (!std::isfinite(t[idx[i]])) {
        singular = true;
        break;
      }
      if (t[idx[i]] < 0 && (most_negative < 0 || t[idx[i]] < t[most_negative])) most_negative = idx[i];
    }
    if (singular) break;
    if (most_negative < 0) {
      theta_ = t;
      fitted_ = t[1] > 0 || t[2] > 0;  // a cost that grows with the batch
      return;
    }
    active[most_negative] = false;
  }
  fitted_ = false;
}

double BatchCostModel::Predict(double rows, double positions) const {
  if (!fitted_) return std::max(0.0, per_row_fallback_ * rows);
  return std::max(0.0, theta_[0] + theta_[1] * rows + theta_[2] * (positions_ ? positions : 0.0));
}

}  // namespace inferd
