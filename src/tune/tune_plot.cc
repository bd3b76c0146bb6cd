// RenderTunePlot (tune_report.h): throughput against p99 for every point an
// `inferd tune` run measured.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tune/png_canvas.h"
#include "tune/tune_report.h"

namespace inferd::tune {

namespace {

constexpr Rgb kWhite{255, 255, 255}, kAxis{40, 40, 40}, kGrid{225, 225, 225}, kGrey{170, 170, 170}, kBlue{40, 90, 200},
    kGreen{20, 150, 60}, kRed{220, 30, 30}, kObjective{120, 120, 120};

// A step of 1, 2 or 5 times a power of ten giving about `ticks` ticks up to `max`.
double NiceStep(double max, int ticks) {
  const double raw = max / ticks;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

std::string Label(double v) {
  char buf[32];
  if (v >= 10000)
    std::snprintf(buf, sizeof buf, "%.0fK", v / 1000);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void Marker(Canvas& c, int x, int y, int half, Rgb color) { c.FillRect(x - half, y - half, x + half, y + half, color); }

}  // namespace

std::string RenderTunePlot(const TuneResult& r) {
  constexpr int W = 760, H = 500, L = 80, R = 740, T = 50, B = 410;
  Canvas c(W, H, kWhite);
  double max_thr = 1, max_p99 = 0, max_feasible_p99 = 0;
  for (const auto& t : r.trials) {
    for (const auto& p : t.sweep) {
      if (p.summary.requests == 0) continue;
      max_thr = std::max(max_thr, p.summary.throughput * r.batch_size);
      max_p99 = std::max(max_p99, p.summary.p99_us / 1e3);
    }
    if (t.operating >= 0)
      max_feasible_p99 = std::max(max_feasible_p99, t.sweep[static_cast<size_t>(t.operating)].summary.p99_us / 1e3);
  }
  const double x_max = std::max({r.p99_ms * 1.5, std::min(max_p99, r.p99_ms * 3), max_feasible_p99}) * 1.05;
  const double y_step = NiceStep(max_thr * 1.05, 5), x_step = NiceStep(x_max, 6);
  const double y_max = std::ceil(max_thr * 1.05 / y_step) * y_step;
  auto px = [&](double ms) { return L + static_cast<int>(std::lround(std::min(ms, x_max) / x_max * (R - L))); };
  auto py = [&](double thr) { return B - static_cast<int>(std::lround(thr / y_max * (B - T))); };

  for (double v = 0; v <= y_max + 1e-9; v += y_step) {
    c.Line(L, py(v), R, py(v), kGrid);
    const std::string s = Label(v);
    c.Text(L - 6 - Canvas::TextWidth(s), py(v) - 3, s, kAxis);
  }
  for (double v = 0; v <= x_max + 1e-9; v += x_step) {
    c.Line(px(v), T, px(v), B, kGrid);
    const std::string s = Label(v);
    c.Text(px(v) - Canvas::TextWidth(s) / 2, B + 8, s, kAxis);
  }
  c.Line(L, B, R, B, kAxis);
  c.Line(L, T, L, B, kAxis);
  c.Line(px(r.p99_ms), T, px(r.p99_ms), B, kObjective, 4);
  c.Text(px(r.p99_ms) + 4, T + 2, "OBJECTIVE", kObjective);
  c.Text(L, 14, r.facts.name + ": THROUGHPUT VS P99", kAxis, 2);
  c.Text(L - 60, T - 14, "PREDICTIONS/S", kAxis);
  c.Text((L + R) / 2 - Canvas::TextWidth("P99 LATENCY (MS)") / 2, B + 24, "P99 LATENCY (MS)", kAxis);

  // Every point, each candidate's sweep joined; then the operating points on top.
  for (const auto& t : r.trials) {
    int lx = -1, ly = -1;
    for (const auto& p : t.sweep) {
      if (p.summary.requests == 0) continue;
      const int x = px(p.summary.p99_us / 1e3), y = py(p.summary.throughput * r.batch_size);
      if (lx >= 0) c.Line(lx, ly, x, y, kGrid);
      Marker(c, x, y, 1, kGrey);
      lx = x;
      ly = y;
    }
  }
  auto operating = [&](size_t i, int half, Rgb color) {
    const Trial& t = r.trials[i];
    if (t.operating < 0) return;
    const SweepPoint& p = t.sweep[static_cast<size_t>(t.operating)];
    Marker(c, px(p.summary.p99_us / 1e3), py(p.summary.throughput * r.batch_size), half, color);
  };
  for (size_t i = 0; i < r.trials.size(); ++i) operating(i, 3, kBlue);
  if (!r.trials.empty()) operating(0, 5, kGreen);
  if (r.best >= 0) operating(static_cast<size_t>(r.best), 6, kRed);

  int x = L;
  auto legend = [&](Rgb color, const std::string& text) {
    Marker(c, x + 4, H - 30, 4, color);
    x += 14 + c.Text(x + 14, H - 33, text, kAxis) + 18;
  };
  legend(kRed, "CHOSEN");
  legend(kGreen, "OWN CONFIG");
  legend(kBlue, "BEST OF EACH CANDIDATE");
  legend(kGrey, "ALL POINTS");
  return c.EncodePng();
}

}  // namespace inferd::tune
