#include "core/cpu_load.h"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

namespace inferd {
namespace {

// Reads a whole small file; nullopt when it cannot be opened.
std::optional<std::string> ReadFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;  // empty: every CPU
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set)) cpus.push_back(i);
  return cpus;
}

}  // namespace

std::optional<CpuTicks> ParseProcStat(std::string_view text, const std::vector<int>& cpus) {
  CpuTicks sum;
  bool found = false;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    // Per-CPU lines only: "cpu" followed by a number ("cpu " is the total).
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
    const char* p = line.data() + 3;
    const char* end = line.data() + line.size();
    int cpu = 0;
    auto [q, ec] = std::from_chars(p, end, cpu);
    if (ec != std::errc()) return std::nullopt;
    p = q;
    if (!cpus.empty() && std::find(cpus.begin(), cpus.end(), cpu) == cpus.end()) continue;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    uint64_t v[8] = {};
    int n = 0;
    while (n < 8 && p < end) {
      while (p < end && *p == ' ') ++p;
      if (p == end) break;
      auto [r, e] = std::from_chars(p, end, v[n]);
      if (e != std::errc()) return std::nullopt;
      p = r;
      ++n;
    }
    if (n < 4) return std::nullopt;
    const uint64_t idle = v[3] + v[4];
    const uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    sum.busy += busy;
    sum.total += busy + idle;
    found = true;
  }
  if (!found) return std::nullopt;
  return sum;
}

SampledCpuLoad::SampledCpuLoad(Source source, Duration period, Duration tau)
    : source_(std::move(source)), period_(period), tau_s_(std::chrono::duration<double>(tau).count()) {}

double SampledCpuLoad::Utilization(TimePoint now) {
  if (mu_.TryLock()) {
    mu_.AssertHeld();
    if (!last_at_ || now - *last_at_ >= period_) {
      std::optional<CpuTicks> t = source_();
      if (t) {
        if (last_at_ && t->total > last_.total && t->busy >= last_.busy) {
          const double u = std::clamp(
              static_cast<double>(t->busy - last_.busy) / static_cast<double>(t->total - last_.total), 0.0, 1.0);
          const double dt = std::chrono::duration<double>(now - *last_at_).count();
          const double keep = have_value_ ? std::exp(-dt / tau_s_) : 0.0;
          value_.store(keep * value_.load(std::memory_order_relaxed) + (1 - keep) * u, std::memory_order_relaxed);
          have_value_ = true;
        }
        last_ = *t;
        last_at_ = now;
      }
    }
    mu_.Unlock();
  }
  return value_.load(std::memory_order_relaxed);
}

std::unique_ptr<CpuLoad> MakeSystemCpuLoad() {
  return std::make_unique<SampledCpuLoad>([cpus = AllowedCpus()]() -> std::optional<CpuTicks> {
    std::optional<std::string> text = ReadFile("/proc/stat");
    if (!text) return std::nullopt;
    return ParseProcStat(*text, cpus);
  });
}

}  // namespace inferd
