// The search behind `inferd tune`: coordinate-wise hill climbing over a small
// space of serving settings (Model Analyzer's quick mode is the same idea).
// From the start point it tries, one dimension at a time, the neighbouring
// values of an ordered dimension (one step each way) or every value of an
// unordered one, moves to the best of them when it beats the current point by
// `min_gain`, keeps going in that dimension while it improves, and cycles
// through the dimensions until a whole pass moves nowhere, the evaluation
// budget is spent or `out_of_time` says so. Every point is evaluated at most
// once. Pure: the caller's `evaluate` does the measuring, so the search is
// tested on synthetic functions (hill_climb_test.cc).
//
// Thread-safety: none needed (one call, on the caller's thread).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace inferd::tune {

struct Dimension {
  std::string name;
  std::vector<std::string> values;  // at least one
  bool ordered = true;              // neighbours are one step away; else every value is one
};

using Point = std::vector<int>;  // one value index per dimension

// How good a point is: a feasible point (one that met the objective) beats
// any infeasible one; two feasible ones compare by throughput, two infeasible
// ones by latency (the one nearer the objective).
struct Score {
  bool feasible = false;
  double throughput = 0;  // at the objective
  double p99_ms = 0;      // infeasible: the lowest p99 it reached
};

// Whether `a` beats `b` by more than `min_gain` (0.05 = 5%).
bool Beats(const Score& a, const Score& b, double min_gain);

struct SearchOptions {
  double min_gain = 0.05;
  int max_evaluations = 1000;
  std::function<bool()> out_of_time;          // null: never
  std::function<bool(const Point&)> allowed;  // null: every point
};

struct Evaluation {
  Point point;
  Score score;
};

struct SearchResult {
  Point best;
  Score best_score;
  std::vector<Evaluation> evaluations;  // in the order they were made; the start first
  std::string stop_reason;              // "converged", "evaluation budget", "time budget"
};

SearchResult HillClimb(const std::vector<Dimension>& dims, const Point& start,
                       const std::function<Score(const Point&)>& evaluate, const SearchOptions& options);

}  // namespace inferd::tune
