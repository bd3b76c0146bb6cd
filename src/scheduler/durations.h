// Duration helpers the schedulers' statistics share.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "core/clock.h"

namespace inferd {

// Nanoseconds of `d`, negative durations as 0.
inline uint64_t Ns(Duration d) { return static_cast<uint64_t>(std::max<int64_t>(0, d.count())); }

// Wall-clock milliseconds since the epoch (statistics' last_inference).
inline uint64_t WallMillis() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
}

}  // namespace inferd
