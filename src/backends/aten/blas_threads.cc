#include "backends/aten/blas_threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <exception>

namespace inferd::aten {

bool KeepBlasOnCallingThread() {
  using SetThreads = void (*)(int);
  static const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set == nullptr) return false;
  set(1);
  return true;
}

bool SetIntraOpThreads(int n) {
  try {
    at::set_num_threads(n);
    return true;
  } catch (const std::exception& e) {
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true))
      spdlog::error("libtorch cannot set up its thread pool ({}); models on libtorch will fail their calls", e.what());
    return false;
  }
}

}  // namespace inferd::aten
