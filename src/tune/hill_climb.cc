#include "tune/hill_climb.h"

#include <map>

namespace inferd::tune {

bool Beats(const Score& a, const Score& b, double min_gain) {
  if (a.feasible != b.feasible) return a.feasible;
  if (a.feasible) return a.throughput > b.throughput * (1.0 + min_gain);
  return a.p99_ms * (1.0 + min_gain) < b.p99_ms;
}

namespace {

class Climber {
 public:
  Climber(const std::vector<Dimension>& dims, const std::function<Score(const Point&)>& evaluate,
          const SearchOptions& options, SearchResult* result)
      : dims_(dims), evaluate_(evaluate), options_(options), result_(result) {}

  // The score of `p`, measured once; false when the budget stops the search.
  bool Score(const Point& p, tune::Score* out) {
    if (auto it = scores_.find(p); it != scores_.end()) {
      *out = it->second;
      return true;
    }
    if (static_cast<int>(result_->evaluations.size()) >= options_.max_evaluations) {
      result_->stop_reason = "evaluation budget";
      return false;
    }
    if (options_.out_of_time && options_.out_of_time()) {
      result_->stop_reason = "time budget";
      return false;
    }
    *out = evaluate_(p);
    scores_[p] = *out;
    result_->evaluations.push_back({p, *out});
    return true;
  }

  // The points one move away from `at` along dimension d.
  std::vector<Point> Neighbours(const Point& at, size_t d) const {
    std::vector<Point> out;
    const int n = static_cast<int>(dims_[d].values.size());
    auto add = [&](int v) {
      if (v < 0 || v >= n || v == at[d]) return;
      Point p = at;
      p[d] = v;
      if (!options_.allowed || options_.allowed(p)) out.push_back(std::move(p));
    };
    if (dims_[d].ordered) {
      add(at[d] - 1);
      add(at[d] + 1);
    } else {
      for (int v = 0; v < n; ++v) add(v);
    }
    return out;
  }

  // Climbs along dimension d from the current best; true when it moved.
  // *stopped: the budget ended the search.
  bool ClimbDimension(size_t d, bool* stopped) {
    bool moved = false;
    for (;;) {
      Point best = result_->best;
      tune::Score best_score = result_->best_score;
      for (const Point& p : Neighbours(result_->best, d)) {
        tune::Score s;
        if (!Score(p, &s)) {
          *stopped = true;
          return moved;
        }
        // A move must beat the current point by min_gain; among moves, the best one.
        if (best == result_->best ? Beats(s, best_score, options_.min_gain) : Beats(s, best_score, 0)) {
          best = p;
          best_score = s;
        }
      }
      if (best == result_->best) return moved;
      result_->best = best;
      result_->best_score = best_score;
      moved = true;
    }
  }

 private:
  const std::vector<Dimension>& dims_;
  const std::function<tune::Score(const Point&)>& evaluate_;
  const SearchOptions& options_;
  SearchResult* result_;
  std::map<Point, tune::Score> scores_;
};

}  // namespace

SearchResult HillClimb(const std::vector<Dimension>& dims, const Point& start,
                       const std::function<Score(const Point&)>& evaluate, const SearchOptions& options) {
  SearchResult r;
  r.best = start;
  Climber c(dims, evaluate, options, &r);
  if (!c.Score(start, &r.best_score)) return r;
  for (;;) {
    bool moved = false, stopped = false;
    for (size_t d = 0; d < dims.size() && !stopped; ++d) moved = c.ClimbDimension(d, &stopped) || moved;
    if (stopped) return r;
    if (!moved) {
      r.stop_reason = "converged";
      return r;
    }
  }
}

}  // namespace inferd::tune
