// /proc/stat text, as adaptive batching's CPU weighing reads it
// (batching.cpu_aware): ParseProcStat on each '\0'-separated snapshot, fed
// in turn to a SampledCpuLoad on a clock stepping one sampling period per
// read. The utilization must stay a fraction in [0, 1], whatever the ticks do
// (counters that wrap, go backwards or stand still).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "core/cpu_load.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> snapshots;
  for (std::string_view rest = input;;) {
    const size_t cut = rest.find('\0');
    snapshots.push_back(rest.substr(0, cut));
    if (cut == std::string_view::npos) break;
    rest = rest.substr(cut + 1);
  }
  for (const std::vector<int>& cpus : {std::vector<int>{}, std::vector<int>{0, 1}}) {
    size_t next = 0;
    inferd::SampledCpuLoad load([&]() -> std::optional<inferd::CpuTicks> {
      return next < snapshots.size() ? inferd::ParseProcStat(snapshots[next++], cpus) : std::nullopt;
    });
    inferd::TimePoint now{};
    for (size_t i = 0; i < snapshots.size(); ++i) {
      const double u = load.Utilization(now += std::chrono::milliseconds(100));
      if (!(u >= 0 && u <= 1)) std::abort();
    }
  }
  return 0;
}
